-- Return permits to a Redisson RSemaphore, at most once per request (RedissonSemaphore.releaseAsync).
--
-- KEYS[1]  semaphore `<name>`
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- KEYS[3]  release receipt `redisson_semaphore_latch:{<name>}:<request id>` (ours): a retry of a
--          release whose reply was lost does not add the permits twice
-- ARGV[1]  permits (> 0)
-- ARGV[2]  publish command
-- ARGV[3]  receipt TTL in milliseconds
--
-- Publishes the new count (Redisson's message) on KEYS[2].
-- Returns: the new count; or, for a repeated request, the count its first run left.
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
redis.call('set', KEYS[3], value, 'px', ARGV[3])
return value
