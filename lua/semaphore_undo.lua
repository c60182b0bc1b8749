-- Give back the permits one acquire request took, if it took any (a cancelled or unanswered
-- acquire). Idempotent: the receipt is deleted with the give-back.
--
-- KEYS[1]  semaphore `<name>`
-- KEYS[2]  channel `redisson_sc:{<name>}`
-- KEYS[3]  the request's receipt `redisson_semaphore_latch:{<name>}:<request id>`
-- ARGV[1]  publish command (`PUBLISH` or `SPUBLISH`)
--
-- Returns: the permits given back (0 when the request took none, or was already undone).
local taken = redis.call('get', KEYS[3])
if taken == false then
    return 0
end
redis.call('del', KEYS[3])
local value = redis.call('incrby', KEYS[1], taken)
redis.call(ARGV[1], KEYS[2], value)
return tonumber(taken)
