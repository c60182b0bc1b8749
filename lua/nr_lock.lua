-- Acquire a Redisson non-reentrant lock (RedissonNonReentrantLock.tryLockInnerAsync, 4.4+).
-- Same data as RLock: the hash `<name>`, field `<uuid>:<id>` -> 1. A second acquire by the
-- owner that holds it is refused with Redisson's error and changes nothing; only the success
-- reply differs from Redisson's (we return the hold count, always 1, as lock.lua does).
--
-- KEYS[1]  lock hash `<name>`
-- ARGV[1]  lease in milliseconds (PEXPIRE value)
-- ARGV[2]  owner field `<client uuid>:<owner id>`
--
-- Returns: acquired -> {1}; held by another owner -> the integer PTTL of the lock (-1 when it
-- has no expiry); held by this owner -> the error `NON_REENTRANT_REACQUIRE` (Redisson's
-- REENTRY_ERR, which its client turns into an IllegalMonitorStateException).
-- A key of another type fails with WRONGTYPE.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return redis.error_reply('NON_REENTRANT_REACQUIRE')
end
return redis.call('pttl', KEYS[1])
