-- Take every available permit of a Redisson RSemaphore (RedissonSemaphore.drainPermitsAsync).
-- Like Redisson: SET 0 (clears any TTL), nothing published.
--
-- KEYS[1]  semaphore `<name>`
--
-- Returns: the count before draining (0 when the key is absent; may be negative).
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(value)
