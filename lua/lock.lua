-- Acquire (or re-enter) a Redisson RLock.
-- Same data and semantics as Redisson's RedissonLock.tryLockInnerAsync; only the success
-- reply differs (we return the new hold count so the client can detect a lost hold).
--
-- KEYS[1]  lock hash `<name>`
-- ARGV[1]  lease in milliseconds (PEXPIRE value)
-- ARGV[2]  owner field `<client uuid>:<owner id>`
--
-- Returns: acquired -> a one-element array {new hold count};
--          held by another owner -> the integer PTTL of the lock (-1 when it has no expiry).
-- A key of another type fails with WRONGTYPE.
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {count}
end
return redis.call('pttl', KEYS[1])
