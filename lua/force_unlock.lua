-- Delete a lock whoever holds it and wake waiters (Redisson RedissonLock.forceUnlockAsync).
-- Unlike Redisson we refuse to delete a key that is not a hash: it is not a lock.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  unlock channel
-- ARGV[1]  unlock message (`0`)
-- ARGV[2]  publish command (`PUBLISH` or `SPUBLISH`; empty for the spin lock: nothing is published)
-- ARGV[3]  the holders the caller saw (below), or empty
--
-- Returns: 1 deleted (and published), 0 no such key, -1 held by others than ARGV[3] names
-- (nothing changed). A key of another type fails with WRONGTYPE.
-- The holders the caller saw (ARGV[3]): their fields, sorted, joined by newlines; the `mode`
-- field of a read-write lock is not a holder. Empty: delete whoever holds it (Redisson's
-- forceUnlock). Otherwise the lock is deleted only while exactly those fields hold it.
local function holders_changed(key, seen)
    if seen == '' then return false end
    local fields = {}
    for _, f in ipairs(redis.call('hkeys', key)) do
        if f ~= 'mode' then fields[#fields + 1] = f end
    end
    table.sort(fields)
    return table.concat(fields, '\n') ~= seen
end
local t = redis.call('type', KEYS[1])['ok']
if t == 'none' then
    return 0
end
if t ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if holders_changed(KEYS[1], ARGV[3]) then
    return -1
end
redis.call('del', KEYS[1])
if ARGV[2] ~= '' then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return 1
