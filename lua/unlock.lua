-- Release one hold of a Redisson RLock, idempotently (Redisson RedissonLock.unlockInnerAsync, 3.24+).
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  unlock channel `redisson_lock__channel:{<name>}`
-- KEYS[3]  unlock latch `redisson_unlock_latch:{<name>}:<32 hex request id>`
-- ARGV[1]  unlock message (`0`)
-- ARGV[2]  lease in milliseconds, re-applied when holds remain
-- ARGV[3]  owner field `<client uuid>:<owner id>`
-- ARGV[4]  publish command (`PUBLISH` or `SPUBLISH`; empty for the spin lock: nothing is published)
-- ARGV[5]  latch TTL in milliseconds
--
-- Returns: the stored result when the latch exists (a retry of an unlock that already ran);
--          nil when the owner holds nothing (not owner / lease lost);
--          0 when holds remain (lease re-applied); 1 when the lock was deleted and ARGV[1] published.
local latch = redis.call('get', KEYS[3])
if latch ~= false then
    return tonumber(latch)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
if ARGV[4] ~= '' then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
