-- Whether one side of a Redisson RReadWriteLock is locked (RedissonReadLock/RedissonWriteLock.isLocked).
--
-- KEYS[1]  RW hash `<name>`
-- ARGV[1]  `read` or `write`
--
-- Returns: 1 or 0. Read: mode is read, or write with the writer also holding reads (HLEN > 2).
local mode = redis.call('hget', KEYS[1], 'mode')
if ARGV[1] == 'write' then
    if mode == 'write' then return 1 end
    return 0
end
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1
end
return 0
