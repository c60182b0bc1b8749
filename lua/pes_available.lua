-- Available permits of an RPermitExpirableSemaphore, after returning every expired permit to
-- the pool (RedissonPermitExpirableSemaphore.availablePermitsAsync).
--
-- KEYS[1]  `<name>`
-- KEYS[2]  `{<name>}:timeout`
-- KEYS[3]  channel `redisson_sc:{<name>}`
-- ARGV[1]  now, epoch ms
-- ARGV[2]  publish command
--
-- Returns: the available permits (0 when the semaphore does not exist).
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        redis.call(ARGV[2], KEYS[3], value)
    end
    return value
end
return tonumber(redis.call('get', KEYS[1]) or '0')
