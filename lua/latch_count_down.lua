-- Count a Redisson RCountDownLatch down by one (RedissonCountDownLatch.countDownAsync).
-- The key is deleted once the count reaches zero (or below: a count-down of a missing latch
-- leaves nothing); reaching exactly zero publishes `0`, which opens the latch for every waiter.
--
-- KEYS[1]  latch `<name>`
-- KEYS[2]  channel `redisson_countdownlatch__channel__{<name>}`
-- ARGV[1]  message published at zero: `0` (Redisson's ZERO_COUNT_MESSAGE)
-- ARGV[2]  publish command
--
-- Returns: the count after this count-down (negative when the latch did not exist).
local count = redis.call('decr', KEYS[1])
if count <= 0 then
    redis.call('del', KEYS[1])
end
if count == 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return count
