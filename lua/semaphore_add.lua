-- Add (or, negative, remove) permits of a Redisson RSemaphore (RedissonSemaphore.addPermitsAsync).
-- Like Redisson: SET (so any TTL is cleared), and the new count is published even when it is
-- zero or negative.
--
-- KEYS[1]  semaphore `<name>`
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- ARGV[1]  permits to add (may be negative)
-- ARGV[2]  publish command
--
-- Returns: the new count.
local value = tonumber(redis.call('get', KEYS[1]) or '0') + tonumber(ARGV[1])
redis.call('set', KEYS[1], value)
redis.call(ARGV[2], KEYS[2], value)
return value
