-- Set the total number of permits of a Redisson RPermitExpirableSemaphore
-- (setPermitsAsync): the available count becomes `n - acquired`.
--
-- KEYS[1]  `<name>`
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- KEYS[3]  `{<name>}:timeout`
-- ARGV[1]  the total n
-- ARGV[2]  publish command
--
-- Missing count key: `SET n`, publish n. Else, when available + acquired differs from n:
-- `INCRBY n - (available + acquired)` and publish n (Redisson publishes the total, not the new
-- available count). Expired permits are not reclaimed first, as in Redisson.
-- Returns: 1 when something changed, 0 when the total was n already.
local available = redis.call('get', KEYS[1])
if available == false then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
local acquired = redis.call('zcount', KEYS[3], 0, '+inf')
local maximum = acquired + tonumber(available)
if maximum == tonumber(ARGV[1]) then
    return 0
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - maximum)
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
