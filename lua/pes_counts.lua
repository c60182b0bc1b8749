-- The permit totals of a Redisson RPermitExpirableSemaphore (getPermitsAsync,
-- acquiredPermitsAsync).
--
-- KEYS[1]  `<name>`
-- KEYS[2]  `{<name>}:timeout`
-- KEYS[3]  channel `redisson_sc:{<name>}`
-- ARGV[1]  now, epoch ms
-- ARGV[2]  publish command
-- ARGV[3]  `total`: available + acquired (0 when the count key does not exist, as Redisson);
--          `acquired`: the permits held
--
-- First returns every expired permit to the pool (publishing the new count if positive).
-- Returns: the number asked for.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        redis.call(ARGV[2], KEYS[3], value)
    end
end
local acquired = redis.call('zcount', KEYS[2], 0, '+inf')
if ARGV[3] == 'acquired' then
    return acquired
end
local available = redis.call('get', KEYS[1])
if available == false then
    return 0
end
return tonumber(available) + acquired
