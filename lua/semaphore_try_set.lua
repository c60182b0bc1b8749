-- Set a Redisson RSemaphore's permits if it has none yet (RedissonSemaphore.trySetPermitsAsync,
-- and trySetPermitsAsync(permits, timeToLive)).
--
-- KEYS[1]  semaphore `<name>`
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- ARGV[1]  permits
-- ARGV[2]  publish command
-- ARGV[3]  time to live of the key in milliseconds; `0`: none
--
-- Publishes ARGV[1] on KEYS[2] when set.
-- Returns: 1 when set, 0 when the key already exists (nothing written).
if redis.call('get', KEYS[1]) ~= false then
    return 0
end
if tonumber(ARGV[3]) > 0 then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
    redis.call('set', KEYS[1], ARGV[1])
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
