-- Return permits to a Redisson RSemaphore only if it exists, at most once per request
-- (RedissonSemaphore.releaseIfExistsAsync).
--
-- KEYS[1]  semaphore `<name>`
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- KEYS[3]  release receipt `redisson_semaphore_latch:{<name>}:<request id>` (ours): a retry of a
--          request whose reply was lost answers what its first run did
-- ARGV[1]  permits (> 0)
-- ARGV[2]  publish command
-- ARGV[3]  receipt TTL in milliseconds
--
-- The key keeps its TTL (INCRBY). Publishes the new count (Redisson's message) on KEYS[2].
-- Returns: 1 when the permits were added, 0 when the semaphore does not exist (nothing written
-- but the receipt).
local done = redis.call('get', KEYS[3])
if done ~= false then
    return tonumber(done)
end
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[3], 0, 'px', ARGV[3])
    return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
redis.call('set', KEYS[3], 1, 'px', ARGV[3])
return 1
