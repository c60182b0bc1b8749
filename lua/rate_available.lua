-- The permits a Redisson RRateLimiter has left in its window
-- (RedissonRateLimiter.availablePermitsAsync, Redisson 4.x).
--
-- KEYS[1..5]  as rate_set.lua (hash, value, client value, permits, client permits)
-- ARGV[1]  now, the client's clock in ms since the epoch
--
-- Writes as Redisson does: a missing value is set to the rate; takes older than one interval
-- are removed and added back to the value.
-- Returns: the permits left; -1 when not initialized.
local rate = redis.call('hget', KEYS[1], 'rate')
local interval = redis.call('hget', KEYS[1], 'interval')
local kind = redis.call('hget', KEYS[1], 'type')
if rate == false or interval == false or kind == false then
    return -1
end
local value, permits = KEYS[2], KEYS[4]
if kind == '1' then
    value, permits = KEYS[3], KEYS[5]
end
local left = redis.call('get', value)
if left == false then
    redis.call('set', value, rate)
    return tonumber(rate)
end
left = tonumber(left)
local horizon = tonumber(ARGV[1]) - tonumber(interval)
local back = 0
for _, m in ipairs(redis.call('zrangebyscore', permits, 0, horizon)) do
    local _, p = struct.unpack('Bc0I', m)
    back = back + p
end
if back > 0 then
    redis.call('zremrangebyscore', permits, 0, horizon)
    left = left + back
    redis.call('set', value, left)
end
return left
