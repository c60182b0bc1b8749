-- Acquire (or re-enter) the read side of a Redisson RReadWriteLock (RedissonReadLock.tryLockInnerAsync).
-- Readers share the lock; the write owner may also read.
--
-- KEYS[1]  RW hash `<name>` (`mode` -> read|write, fields -> hold counts)
-- KEYS[2]  this owner's timeout prefix `{<name>}:<field>:rwlock_timeout`
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  read owner field `<client uuid>:<owner id>`
-- ARGV[3]  the same owner's write field `<client uuid>:<owner id>:write`
--
-- Each read hold n gets a key `<KEYS[2]>:<n>` = 1 with PX lease, so the hash's TTL can shrink to
-- the longest remaining reader when one leaves.
-- Returns: acquired -> {new read hold count}; otherwise the integer PTTL of the hash.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1)
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local key = KEYS[2] .. ':' .. count
    redis.call('set', key, 1)
    redis.call('pexpire', key, ARGV[1])
    local remain = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(remain, tonumber(ARGV[1])))
    return {count}
end
return redis.call('pttl', KEYS[1])
