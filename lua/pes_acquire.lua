-- Take permits of a Redisson RPermitExpirableSemaphore under client-made ids, all or none
-- (RedissonPermitExpirableSemaphore.tryAcquireAsync(ids, timeoutDate)).
--
-- KEYS[1]  `<name>`: a STRING holding the available permits
-- KEYS[2]  `{<name>}:timeout`: ZSET of acquired permits, member = the id's 16 raw bytes,
--          score = expiry in epoch ms (ARGV[4] for "never")
-- KEYS[3]  channel `redisson_sc:{<name>}`
-- ARGV[1]  permits to take: the number of ids
-- ARGV[2]  the permit's expiry, epoch ms (or ARGV[4])
-- ARGV[3]  now, epoch ms (client clock, as Redisson)
-- ARGV[4]  the "never expires" score, 922337203685477
-- ARGV[5]  publish command
-- ARGV[6..] the permit ids' 16 raw bytes, one per permit
--
-- First, like every Redisson script on this object, returns up to ARGV[1] expired permits to
-- the pool and publishes the new count if it is positive.
-- Returns: {1, 0} when taken (also when the first id is already held: a repeated request
--          takes nothing more, the ids of one request being taken together); {0, t}: not enough permits, t = the earliest expiry among the held
--          permits (epoch ms), or -1 when none expires.
if redis.call('zscore', KEYS[2], ARGV[6]) ~= false then
    return {1, 0}
end
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        redis.call(ARGV[5], KEYS[3], value)
    end
end
local available = redis.call('get', KEYS[1])
if available ~= false and tonumber(available) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    for i = 6, #ARGV do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return {1, 0}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] ~= nil and first[2] ~= ARGV[4] then
    return {0, tonumber(first[2])}
end
return {0, -1}
