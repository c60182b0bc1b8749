-- Release one write hold of a Redisson RReadWriteLock (RedissonWriteLock.unlockInnerAsync, 3.44+,
-- without its unlock latch: a retry runs lua/trim.lua instead, as for lua/unlock.lua).
--
-- KEYS[1]  RW hash `<name>`
-- KEYS[2]  channel `redisson_rwlock:{<name>}`
-- ARGV[1]  unlock message (`1`: wakes every waiter, so all readers retry)
-- ARGV[2]  lease in milliseconds, re-applied when write holds remain
-- ARGV[3]  write owner field
-- ARGV[4]  publish command
--
-- Returns: nil when the owner holds no write hold; 0 write holds remain;
-- 1 the last write hold went (the lock was deleted and published, or, when the owner still has
-- read holds, the mode switched to read without a message).
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    return nil
end
if mode ~= 'write' then
    return nil
end
-- The last hold (exactly `1`) skips the `HINCRBY` to 0 the field is deleted after anyway.
local held = redis.call('hget', KEYS[1], ARGV[3])
if held == false then
    return nil
end
if held ~= '1' then
    local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
    if count > 0 then
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 0
    end
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1
