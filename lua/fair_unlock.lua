-- Release one hold of a Redisson RFairLock (RedissonFairLock.unlockInnerAsync, without its
-- unlock latch: a retry runs lua/trim.lua instead, as for lua/unlock.lua), waking the queue head
-- on its own channel.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  queue `redisson_lock_queue:{<name>}`
-- KEYS[3]  deadlines `redisson_lock_timeout:{<name>}`
-- KEYS[4]  channel prefix `redisson_lock__channel:{<name>}` (waiter channel = prefix:<field>)
-- ARGV[1]  unlock message (`0`)
-- ARGV[2]  lease in milliseconds, re-applied when holds remain
-- ARGV[3]  owner field
-- ARGV[4]  now, epoch milliseconds
-- ARGV[5]  publish command
--
-- Returns: nil when the owner holds nothing (the head is still woken if
-- the lock is free, as Redisson does); 0 holds remain; 1 released.
local now = tonumber(ARGV[4])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then break end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline == false or tonumber(deadline) > now then break end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
    end
    return nil
end
-- The last hold (exactly `1`) skips the `HINCRBY` to 0 the hash is deleted after anyway.
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
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
    redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1
