-- Release one read hold of a Redisson RReadWriteLock (RedissonReadLock.unlockInnerAsync, 3.44+,
-- without its unlock latch: a retry runs lua/trim.lua instead, as for lua/unlock.lua).
--
-- KEYS[1]  RW hash `<name>`
-- KEYS[2]  channel `redisson_rwlock:{<name>}`
-- KEYS[3]  this owner's timeout prefix `{<name>}:<field>:rwlock_timeout`
-- KEYS[4]  key prefix `{<name>}` (`<name>` when the name contains `{`)
-- ARGV[1]  unlock message (`0`: wakes one waiter)
-- ARGV[2]  read owner field
-- ARGV[3]  publish command
--
-- Returns: nil when the owner holds no read hold; 0 the lock is still
-- held (by other readers, or by the same owner's write hold); 1 the lock was deleted and published.
--
-- The owner's last read hold (the value is exactly `1`) is removed without decrementing it first:
-- the field is deleted either way, so the `hincrby` to 0 that Redisson's script runs there is
-- skipped (as in lua/unlock.lua); the field is read with `hget` where Redisson's checks it with
-- `hexists` (one call either way).
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    return nil
end
local held = redis.call('hget', KEYS[1], ARGV[2])
if held == false then
    return nil
end
local count = 0
if held ~= '1' then
    count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
end
if count == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (count + 1))
if redis.call('hlen', KEYS[1]) > 1 then
    local max_remain = -3
    local fields = redis.call('hkeys', KEYS[1])
    for _, field in ipairs(fields) do
        local holds = tonumber(redis.call('hget', KEYS[1], field))
        if type(holds) == 'number' then
            for i = holds, 1, -1 do
                local remain = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
                max_remain = math.max(remain, max_remain)
            end
        end
    end
    if max_remain > 0 then
        redis.call('pexpire', KEYS[1], max_remain)
        return 0
    end
    if mode == 'write' then
        return 0
    end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
