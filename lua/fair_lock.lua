-- Acquire a Redisson RFairLock (RedissonFairLock.tryLockInnerAsync), FIFO through a queue.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  queue `redisson_lock_queue:{<name>}` (LIST of owner fields)
-- KEYS[3]  deadlines `redisson_lock_timeout:{<name>}` (ZSET field -> epoch ms after which that
--          waiter counts as gone)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field `<client uuid>:<owner id>`
-- ARGV[3]  thread wait time in ms (how long a queued waiter may be absent)
-- ARGV[4]  now, epoch milliseconds (client clock, as Redisson)
-- ARGV[5]  `1`: join the queue when the lock is busy; `0`: never enqueue (tryLock without wait)
-- ARGV[6]  `1`: non-reentrant (RedissonNonReentrantFairLock, 4.4+): an acquire by the owner that
--          holds the lock is refused with the error `NON_REENTRANT_REACQUIRE` and changes
--          nothing; `0` (or absent): re-entry increments the count, as RFairLock
--
-- Returns: acquired -> {new hold count}; otherwise the milliseconds to wait at most before trying
-- again (-1: wait for a message only). Unlike Redisson, a queued waiter whose turn has not come
-- waits at most until the head's deadline, and never 0 ms while the lock is free (no spinning).
local now = tonumber(ARGV[4])

-- 1. Drop waiters whose deadline passed, from the head.
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then break end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline == false or tonumber(deadline) > now then break end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end

-- 2. Free, and nobody queued or it is our turn.
if (redis.call('exists', KEYS[1]) == 0)
    and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    local waiters = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #waiters do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), waiters[i])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1}
end

-- 3. Re-entry (refused by the non-reentrant kind, before the queue is touched, as Redisson).
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if ARGV[6] == '1' then
        return redis.error_reply('NON_REENTRANT_REACQUIRE')
    end
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {count}
end

-- How long a waiter should wait at most: until the holder's lease runs out or, when another
-- waiter is at the head, until that waiter's deadline, whichever comes first. A release wakes
-- only the head; if the head is dead, nobody is told when its deadline passes, so the waiters
-- behind it must come back by then (whether the lock is free or still held).
local function wait_hint()
    local ttl = redis.call('pttl', KEYS[1])
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false and head ~= ARGV[2] then
        local deadline = redis.call('zscore', KEYS[3], head)
        if deadline ~= false then
            local until_head = math.max(1, tonumber(deadline) - now)
            if ttl < 0 or until_head < ttl then return until_head end
        end
    end
    if ttl ~= -2 then return ttl end
    return 1
end

-- 4. Already queued.
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
    return wait_hint()
end
if ARGV[5] ~= '1' then
    return wait_hint()
end

-- 5. Join the tail: deadline = the previous waiter's deadline (or the lock's expiry) + wait time.
local ttl
local last = redis.call('lindex', KEYS[2], -1)
local last_deadline = false
if last ~= false and last ~= ARGV[2] then
    last_deadline = redis.call('zscore', KEYS[3], last)
end
if last_deadline ~= false then
    ttl = tonumber(last_deadline) - now
else
    ttl = redis.call('pttl', KEYS[1])
end
local deadline = ttl + tonumber(ARGV[3]) + now
if redis.call('zadd', KEYS[3], deadline, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return wait_hint()
