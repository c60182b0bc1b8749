-- Delete a Redisson RCountDownLatch (RedissonCountDownLatch.deleteAsync).
--
-- KEYS[1]  latch `<name>`
-- KEYS[2]  channel `redisson_countdownlatch__channel__{<name>}`
-- ARGV[1]  message published when deleted: `1` (NEW_COUNT_MESSAGE)
-- ARGV[2]  publish command
--
-- Returns: 1 when the latch existed and was deleted, else 0 (nothing published).
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
