-- A write to a resource kept in Redis, fenced by a FencedLock token: it happens only when the
-- token is at least the highest token that wrote this resource before (the same holder may
-- write several times with its token; a stale holder, whose lock was taken over by a holder with
-- a greater token, is refused).
--
-- KEYS[1]  the resource (a STRING, written with SET)
-- KEYS[2]  its fence: the highest token that wrote it (`{<resource>}:redisson_lock_fence`)
-- ARGV[1]  the writer's token (a positive integer)
-- ARGV[2]  the value
--
-- Returns: 1 written; 0 refused (a greater token wrote before), nothing changed.
local last = tonumber(redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < last then
    return 0
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
