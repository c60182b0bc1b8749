-- Return one permit by id (RedissonPermitExpirableSemaphore.tryReleaseAsync(id)).
--
-- KEYS[1]  `<name>`
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- KEYS[3]  `{<name>}:timeout`
-- ARGV[1]  the permit id's 16 raw bytes
-- ARGV[2]  permits per id: 1
-- ARGV[3]  now, epoch ms
-- ARGV[4]  publish command
--
-- An id that is held goes back to the pool and the new count is published, also when its lease
-- has run out but it was not reclaimed yet (as Redisson).
-- Returns: 1 released; 2 released, but its lease had already expired; 0 no such permit
--          (nothing changed).
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then
    return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(expiry) <= tonumber(ARGV[3]) then
    return 2
end
return 1
