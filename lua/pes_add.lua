-- Add (or, negative, remove) permits of a Redisson RPermitExpirableSemaphore
-- (RedissonPermitExpirableSemaphore.addPermitsAsync). Like Redisson: SET (any TTL of the count
-- is cleared), and the amount added is published only when positive (what waiters may now take;
-- RSemaphore's addPermits publishes the new count instead).
--
-- KEYS[1]  `<name>`: a STRING holding the available permits
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- ARGV[1]  permits to add (may be negative)
-- ARGV[2]  publish command
--
-- Returns: the new count.
local value = tonumber(redis.call('get', KEYS[1]) or '0') + tonumber(ARGV[1])
redis.call('set', KEYS[1], value)
if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return value
