-- Acquire (or re-enter) a Redisson RFencedLock and take a fencing token
-- (RedissonFencedLock.tryLockInnerAsync): the token is bumped on every acquisition, re-entry too.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  token counter `redisson_lock_token:{<name>}` (never expires)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field `<client uuid>:<owner id>`
--
-- Returns: acquired -> {new hold count, token}; held by another owner -> the integer PTTL.
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    local token = redis.call('incr', KEYS[2])
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {count, token}
end
return redis.call('pttl', KEYS[1])
