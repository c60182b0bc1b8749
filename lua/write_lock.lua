-- Acquire (or re-enter) the write side of a Redisson RReadWriteLock (RedissonWriteLock.tryLockInnerAsync).
--
-- KEYS[1]  RW hash `<name>`
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  write owner field `<client uuid>:<owner id>:write`
--
-- As in Redisson, a write re-entry ADDS the lease to the remaining TTL.
-- Returns: acquired -> {new write hold count}; otherwise the integer PTTL of the hash.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local remain = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], remain + tonumber(ARGV[1]))
    return {count}
end
return redis.call('pttl', KEYS[1])
