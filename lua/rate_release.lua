-- Give permits back to a Redisson RRateLimiter before their interval ends
-- (RedissonRateLimiter.releaseAsync, Redisson 4.x).
--
-- KEYS[1..5]  as rate_set.lua (hash, value, client value, permits, client permits)
-- ARGV[1]  permits to give back (>= 1)
--
-- Removes takes oldest first until ARGV[1] permits are accounted for (a take only partly given
-- back stays with its remainder and its score), then adds ARGV[1] to the value, capped at the
-- rate (a missing value counts as the rate). TTLs follow keepAliveTime as in rate_acquire.lua.
-- Returns: 1; -1 when not initialized.
local rate = redis.call('hget', KEYS[1], 'rate')
local interval = redis.call('hget', KEYS[1], 'interval')
local kind = redis.call('hget', KEYS[1], 'type')
if rate == false or interval == false or kind == false then
    return -1
end
rate = tonumber(rate)
local value, permits = KEYS[2], KEYS[4]
if kind == '1' then
    value, permits = KEYS[3], KEYS[5]
end
local give = tonumber(ARGV[1])
local takes = redis.call('zrange', permits, 0, -1, 'withscores')
for i = 1, #takes - 1, 2 do
    if give <= 0 then
        break
    end
    local id, p = struct.unpack('Bc0I', takes[i])
    redis.call('zrem', permits, takes[i])
    if p <= give then
        give = give - p
    else
        redis.call('zadd', permits, takes[i + 1], struct.pack('Bc0I', string.len(id), id, p - give))
        give = 0
    end
end
local left = redis.call('get', value)
if left == false then
    left = rate
else
    left = tonumber(left)
end
left = math.min(left + tonumber(ARGV[1]), rate)
redis.call('set', value, left)

local keep = redis.call('hget', KEYS[1], 'keepAliveTime')
if keep ~= false and tonumber(keep) > 0 then
    redis.call('pexpire', KEYS[1], keep)
    redis.call('pexpire', value, keep)
    redis.call('pexpire', permits, keep)
else
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', value, ttl)
        redis.call('pexpire', permits, ttl)
    end
end
return 1
