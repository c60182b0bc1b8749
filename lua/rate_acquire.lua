-- Take permits from a Redisson RRateLimiter if the window allows
-- (RedissonRateLimiter.tryAcquireAsync, Redisson 4.x).
--
-- KEYS[1..5]  as rate_set.lua (hash, value, client value, permits, client permits)
-- ARGV[1]  permits wanted (>= 1)
-- ARGV[2]  now, the client's clock in ms since the epoch (Redisson uses the client's clock)
-- ARGV[3]  random id of this take (Redisson sends 16 bytes)
--
-- State: the value key holds the permits left in the window; the permits ZSET holds one member
-- per take, struct.pack('Bc0I', #id, id, permits) (1-byte length, the id, a 4-byte unsigned
-- count, native byte order) scored by the take's time. Takes older than one interval are given
-- back to the value before deciding. Every key's TTL follows keepAliveTime (or the hash's TTL).
-- Returns: nil when taken; else the ms to wait before a retry can succeed
-- (3 + interval - age of the oldest take, as Redisson); -1 not initialized; -2 permits > rate.
local rate = redis.call('hget', KEYS[1], 'rate')
local interval = redis.call('hget', KEYS[1], 'interval')
local kind = redis.call('hget', KEYS[1], 'type')
if rate == false or interval == false or kind == false then
    return -1
end
rate, interval = tonumber(rate), tonumber(interval)
local value, permits = KEYS[2], KEYS[4]
if kind == '1' then
    value, permits = KEYS[3], KEYS[5]
end
local want, now = tonumber(ARGV[1]), tonumber(ARGV[2])
if want > rate then
    return -2
end

local function count(members)
    local n = 0
    for _, m in ipairs(members) do
        local _, p = struct.unpack('Bc0I', m)
        n = n + p
    end
    return n
end

local left = redis.call('get', value)
local wait = nil
if left == false then
    left = rate
else
    left = tonumber(left)
    local horizon = now - interval
    local back = count(redis.call('zrangebyscore', permits, 0, horizon))
    if back > 0 then
        redis.call('zremrangebyscore', permits, 0, horizon)
        if left + back > rate then
            left = rate - count(redis.call('zrange', permits, 0, -1))
        else
            left = left + back
        end
        redis.call('set', value, left)
    end
    if left < want then
        local oldest = redis.call('zrange', permits, 0, 0, 'withscores')
        if oldest[2] ~= nil then
            wait = 3 + interval - (now - tonumber(oldest[2]))
        else
            wait = 3 + interval
        end
    end
end
if wait == nil then
    redis.call('zadd', permits, ARGV[2], struct.pack('Bc0I', string.len(ARGV[3]), ARGV[3], want))
    redis.call('set', value, left - want)
end

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
return wait
