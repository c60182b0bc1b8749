-- Return several permits by id (RedissonPermitExpirableSemaphore.tryReleaseAsync(ids)).
--
-- KEYS[1]  `<name>`
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- KEYS[3]  `{<name>}:timeout`
-- ARGV[1]  now, epoch ms
-- ARGV[2]  publish command
-- ARGV[3..] the permit ids' 16 raw bytes
--
-- First returns every expired permit to the pool (publishing the new count if positive), so
-- an id whose lease has ended counts as not released, as in Redisson. Then removes the ids that
-- are held, adds them to the pool and publishes how many were removed (Redisson's message: the
-- amount, not the new count).
-- Returns: how many of the ids were held and released (0: nothing changed after the reclaim).
local expired = redis.call('zrangebyscore', KEYS[3], 0, ARGV[1], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[3], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        redis.call(ARGV[2], KEYS[2], value)
    end
end
local ids = {}
for i = 3, #ARGV do
    table.insert(ids, ARGV[i])
end
local removed = redis.call('zrem', KEYS[3], unpack(ids))
if removed == 0 then
    return 0
end
redis.call('incrby', KEYS[1], removed)
redis.call(ARGV[2], KEYS[2], removed)
return removed
