-- Delete a lock whoever holds it and wake waiters (Redisson RedissonLock.forceUnlockAsync).
-- Unlike Redisson we refuse to delete a key that is not a hash: it is not a lock.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  unlock channel
-- ARGV[1]  unlock message (`0`)
-- ARGV[2]  publish command (`PUBLISH` or `SPUBLISH`; empty for the spin lock: nothing is published)
--
-- Returns: 1 deleted (and published), 0 no such key. A key of another type fails with WRONGTYPE.
local t = redis.call('type', KEYS[1])['ok']
if t == 'none' then
    return 0
end
if t ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
if ARGV[2] ~= '' then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return 1
