-- Bring an owner's hold count back down to what the client knows it holds.
-- Used after an acquire whose outcome is unknown (cancelled future, lost reply): the acquire may
-- or may not have incremented the count, so the client trims to its own count instead of
-- guessing. Never touches other owners' fields, never raises a count.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  unlock channel
-- ARGV[1]  owner field
-- ARGV[2]  target hold count (the holds the client knows about; 0 = none)
-- ARGV[3]  lease in milliseconds, re-applied when holds remain
-- ARGV[4]  publish command
-- ARGV[5]  unlock message (`0`)
--
-- Returns: the hold count found before trimming (0 when the field is absent).
local found = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
local target = tonumber(ARGV[2])
if found <= target then
    return found
end
if target <= 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
    if redis.call('hlen', KEYS[1]) == 0 then
        redis.call('del', KEYS[1])
        redis.call(ARGV[4], KEYS[2], ARGV[5])
    end
else
    redis.call('hset', KEYS[1], ARGV[1], target)
    redis.call('pexpire', KEYS[1], ARGV[3])
end
return found
