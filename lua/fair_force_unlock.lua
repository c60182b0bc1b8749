-- Delete a Redisson RFairLock whoever holds it and wake the queue head
-- (RedissonFairLock.forceUnlockAsync). Refuses a key that is not a hash.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  queue `redisson_lock_queue:{<name>}`
-- KEYS[3]  deadlines `redisson_lock_timeout:{<name>}`
-- KEYS[4]  channel prefix `redisson_lock__channel:{<name>}`
-- ARGV[1]  unlock message (`0`)
-- ARGV[2]  now, epoch milliseconds
-- ARGV[3]  publish command
-- ARGV[4]  the holders the caller saw (below), or empty
--
-- Returns: 1 deleted, 0 no lock, -1 held by others than ARGV[4] names (nothing changed).
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
local now = tonumber(ARGV[2])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then break end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline == false or tonumber(deadline) > now then break end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end
local t = redis.call('type', KEYS[1])['ok']
if t == 'none' then return 0 end
if t ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if holders_changed(KEYS[1], ARGV[4]) then
    return -1
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
    redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1
