-- Acquire (or re-enter) a Redisson RFencedLock and take a fencing token
-- (RedissonFencedLock.tryLockInnerAsync): the token is bumped on every acquisition, re-entry too.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  token counter `redisson_lock_token:{<name>}` (never expires)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field `<client uuid>:<owner id>`
--
-- Returns: acquired -> {new hold count, token}; held by another owner -> the integer PTTL.
-- The token is the counter's decimal string, read back with GET after the INCR: INCR's integer
-- reply becomes a Lua number (a double) in a script, which rounds tokens above 2^53 (2^53 + 1
-- comes back as 2^53, a token handed out twice) and turns those near i64::MAX into i64::MIN.
-- Redisson's own script returns the rounded number; the counter itself is exact either way.
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('incr', KEYS[2])
    local token = redis.call('get', KEYS[2])
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {count, token}
end
return redis.call('pttl', KEYS[1])
