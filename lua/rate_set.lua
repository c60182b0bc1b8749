-- Replace a Redisson RRateLimiter's configuration and reset its state
-- (RedissonRateLimiter.setRateAsync, Redisson 4.x).
--
-- KEYS[1]  configuration hash `<name>`
-- KEYS[2]  OVERALL value `{<name>}:value`
-- KEYS[3]  PER_CLIENT value `{<name>}:value:<client id>`
-- KEYS[4]  OVERALL permits `{<name>}:permits`
-- KEYS[5]  PER_CLIENT permits `{<name>}:permits:<client id>`
-- ARGV[1]  rate; ARGV[2] interval ms; ARGV[3] type (0/1); ARGV[4] keepAliveTime ms (0: none)
--
-- Deletes the state (value and permits) of the new type, for this client where PER_CLIENT.
-- Returns: 1.
local value, permits = KEYS[2], KEYS[4]
if ARGV[3] == '1' then
    value, permits = KEYS[3], KEYS[5]
end
redis.call('hset', KEYS[1], 'rate', ARGV[1], 'interval', ARGV[2], 'type', ARGV[3],
    'keepAliveTime', ARGV[4])
if tonumber(ARGV[4]) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[4])
end
redis.call('del', value, permits)
return 1
