-- Force-unlock one side of a Redisson RReadWriteLock (RedissonReadLock/RedissonWriteLock.forceUnlockAsync):
-- deletes the hash when its mode is ARGV[1] and publishes ARGV[2].
--
-- KEYS[1]  RW hash `<name>`
-- KEYS[2]  channel `redisson_rwlock:{<name>}`
-- ARGV[1]  mode to match (`read` or `write`)
-- ARGV[2]  message (`0` for read, `1` for write)
-- ARGV[3]  publish command
-- ARGV[4]  the holders the caller saw (below), or empty
--
-- Returns: 1 deleted, 0 not locked in that mode, -1 held by others than ARGV[4] names (nothing
-- changed). A key of another type fails with WRONGTYPE.
-- The holders the caller saw (ARGV[4]): their fields, sorted, joined by newlines; the `mode`
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
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    if holders_changed(KEYS[1], ARGV[4]) then
        return -1
    end
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    return 1
end
return 0
