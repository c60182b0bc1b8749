-- Leave a Redisson RFairLock queue after a timed-out or cancelled wait
-- (RedissonFairLock.acquireFailedAsync). Unlike Redisson, when the leaver was the head and the
-- lock is free, the new head is woken at once instead of sleeping out its deadline.
--
-- KEYS[1]  queue `redisson_lock_queue:{<name>}`
-- KEYS[2]  deadlines `redisson_lock_timeout:{<name>}`
-- KEYS[3]  lock hash `<name>`
-- KEYS[4]  channel prefix `redisson_lock__channel:{<name>}`
-- ARGV[1]  owner field leaving the queue
-- ARGV[2]  thread wait time in ms (later waiters' deadlines move earlier by it)
-- ARGV[3]  publish command
-- ARGV[4]  unlock message (`0`)
--
-- Returns: 1 if the field was queued, else 0.
local queue = redis.call('lrange', KEYS[1], 0, -1)
local pos = #queue + 1
for i = 1, #queue do
    if queue[i] == ARGV[1] then pos = i; break end
end
for i = pos + 1, #queue do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i])
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
if pos == 1 and #queue > 1 and redis.call('exists', KEYS[3]) == 0 then
    redis.call(ARGV[3], KEYS[4] .. ':' .. queue[2], ARGV[4])
end
if pos <= #queue then return 1 end
return 0
