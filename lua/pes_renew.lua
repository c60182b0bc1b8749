-- Renew the permits a client's watchdog keeps alive (PermitGuard), one script per semaphore
-- batch. To Redisson each renewal looks like updateLeaseTime: the permit's score moves.
--
-- KEYS[1]  `<name>`
-- KEYS[2]  `{<name>}:timeout`
-- KEYS[3]  channel `redisson_sc:{<name>}`
-- ARGV[1]  the new lease end, epoch ms
-- ARGV[2]  now, epoch ms
-- ARGV[3]  publish command
-- ARGV[4..] the permit ids' 16 raw bytes
--
-- First returns every expired permit to the pool (as updateLeaseTime does: an expired permit is
-- never revived) and publishes the new count if it is positive. A held permit's score is moved
-- to ARGV[1], never back (a later lease end set by update_lease_time stays).
-- Returns: one entry per id: 1 renewed (held); 0 gone (released, reclaimed or deleted).
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[2], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local value = redis.call('incrby', KEYS[1], #expired)
    if tonumber(value) > 0 then
        redis.call(ARGV[3], KEYS[3], value)
    end
end
local result = {}
for i = 4, #ARGV do
    local score = redis.call('zscore', KEYS[2], ARGV[i])
    if score == false then
        result[#result + 1] = 0
    else
        if tonumber(score) < tonumber(ARGV[1]) then
            redis.call('zadd', KEYS[2], ARGV[1], ARGV[i])
        end
        result[#result + 1] = 1
    end
end
return result
