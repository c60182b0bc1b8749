-- Force-unlock one side of a Redisson RReadWriteLock (RedissonReadLock/RedissonWriteLock.forceUnlockAsync):
-- deletes the hash when its mode is ARGV[1] and publishes ARGV[2].
--
-- KEYS[1]  RW hash `<name>`
-- KEYS[2]  channel `redisson_rwlock:{<name>}`
-- ARGV[1]  mode to match (`read` or `write`)
-- ARGV[2]  message (`0` for read, `1` for write)
-- ARGV[3]  publish command
--
-- Returns: 1 deleted, 0 not locked in that mode. A key of another type fails with WRONGTYPE.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    return 1
end
return 0
