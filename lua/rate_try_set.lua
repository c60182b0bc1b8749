-- Set a Redisson RRateLimiter's configuration if it has none yet
-- (RedissonRateLimiter.trySetRateAsync, Redisson 4.x).
--
-- KEYS[1]  configuration hash `<name>` (fields rate, interval, type, keepAliveTime)
-- ARGV[1]  rate (permits per interval)
-- ARGV[2]  interval in ms
-- ARGV[3]  type: 0 OVERALL, 1 PER_CLIENT (RateType ordinal)
-- ARGV[4]  keepAliveTime in ms (0: none)
--
-- Each field is set only where missing, as Redisson does; the key gets the keep-alive TTL when
-- this call set the type (the field that decides).
-- Returns: 1 when set, 0 when a configuration exists.
redis.call('hsetnx', KEYS[1], 'rate', ARGV[1])
redis.call('hsetnx', KEYS[1], 'interval', ARGV[2])
redis.call('hsetnx', KEYS[1], 'keepAliveTime', ARGV[4])
local set = redis.call('hsetnx', KEYS[1], 'type', ARGV[3])
if set == 1 and tonumber(ARGV[4]) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[4])
end
return set
