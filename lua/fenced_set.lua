-- A write to a resource kept in Redis, fenced by a FencedLock token: it happens only when the
-- token is at least the highest token that wrote this resource before (the same holder may
-- write several times with its token; a stale holder, whose lock was taken over by a holder with
-- a greater token, is refused).
--
-- KEYS[1]  the resource (a STRING, written with SET)
-- KEYS[2]  its fence: the highest token that wrote it (`{<resource>}:redisson_lock_fence`)
-- ARGV[1]  the writer's token (a positive integer, in canonical decimal: no sign, no leading
--          zero)
-- ARGV[2]  the value
--
-- Tokens are compared as integers, exactly, over the whole i64 range: as decimal strings, the
-- longer one is the greater, and of two as long the first differing digit decides. Not with
-- `tonumber`: Lua numbers are doubles, which cannot tell 2^53 from 2^53 + 1 (nor neighbours
-- near i64::MAX), so a stale token would pass there. The fence is stored as the token's own
-- string, never as a Lua number (which would be rounded the same way).
--
-- Returns: 1 written; 0 refused (a greater token wrote before), nothing changed.
local function below(a, b)
    if #a ~= #b then
        return #a < #b
    end
    for i = 1, #a do
        local x, y = string.byte(a, i), string.byte(b, i)
        if x ~= y then
            return x < y
        end
    end
    return false
end

local last = redis.call('get', KEYS[2])
if last and below(ARGV[1], last) then
    return 0
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
