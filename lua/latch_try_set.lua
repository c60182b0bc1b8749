-- Set a Redisson RCountDownLatch's count if it has none (RedissonCountDownLatch.trySetCountAsync).
--
-- KEYS[1]  latch `<name>`: a STRING holding the count
-- KEYS[2]  channel `redisson_countdownlatch__channel__{<name>}`
-- ARGV[1]  message published when set: `1` (Redisson's NEW_COUNT_MESSAGE, closes the latch)
-- ARGV[2]  count (>= 0)
-- ARGV[3]  publish command (`PUBLISH` or `SPUBLISH`)
--
-- Returns: 1 when set, 0 when the key exists (nothing written).
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
