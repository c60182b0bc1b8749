-- Move a held permit's expiry (RedissonPermitExpirableSemaphore.updateLeaseTimeAsync), after
-- returning every expired permit to the pool (so an expired permit cannot be revived).
--
-- KEYS[1]  `<name>`
-- KEYS[2]  `{<name>}:timeout`
-- KEYS[3]  channel `redisson_sc:{<name>}`
-- ARGV[1]  the permit id's 16 raw bytes
-- ARGV[2]  the new expiry, epoch ms (or 922337203685477 for never)
-- ARGV[3]  now, epoch ms
-- ARGV[4]  publish command
--
-- Returns: 1 updated; 0 no such permit (expired or released; nothing else changed).
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        redis.call(ARGV[4], KEYS[3], value)
    end
end
if redis.call('zscore', KEYS[2], ARGV[1]) ~= false then
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
    return 1
end
return 0
