-- Bring an owner's hold count back down to what the client knows it holds.
-- Used after a script whose outcome is unknown (a cancelled future, a lost reply): an acquire
-- may or may not have incremented the count, a release may or may not have decremented it, so
-- the client trims to its own count instead of guessing. Never touches other owners' fields and
-- never raises a count.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  the lock kind's unlock channel
-- KEYS[3]  read holds: the owner's timeout prefix `{<name>}:<field>:rwlock_timeout`;
--          fair lock: the queue `redisson_lock_queue:{<name>}`, whose head is woken on its own
--          channel `<KEYS[2]>:<head>`; any key of the same slot otherwise (it is not touched)
-- ARGV[1]  owner field
-- ARGV[2]  target hold count (the holds the client knows about; 0 = none)
-- ARGV[3]  lease in milliseconds, re-applied when holds remain (read: the hash keeps a longer TTL)
-- ARGV[4]  publish command (empty for the spin lock: nothing is published)
-- ARGV[5]  message published when the lock is freed (`0`, or `1` for a write lock)
-- ARGV[6]  layout: `plain` (RLock, fenced), `fair`, `read` or `write` (read-write lock hash)
--
-- Returns: the hold count found before trimming (0 when the field is absent).
local found = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
local target = tonumber(ARGV[2])
if found <= target then
    return found
end
if ARGV[6] == 'read' then
    for n = found, target + 1, -1 do
        redis.call('del', KEYS[3] .. ':' .. n)
    end
end
if target > 0 then
    redis.call('hset', KEYS[1], ARGV[1], target)
    local lease = tonumber(ARGV[3])
    if ARGV[6] == 'read' then
        -- Other readers may hold longer leases: never shorten the hash (as read_lock.lua).
        lease = math.max(redis.call('pttl', KEYS[1]), lease)
    end
    redis.call('pexpire', KEYS[1], lease)
    return found
end
redis.call('hdel', KEYS[1], ARGV[1])
local left = redis.call('hlen', KEYS[1])
local rw = ARGV[6] == 'read' or ARGV[6] == 'write'
if left == 0 or (rw and left == 1 and redis.call('hexists', KEYS[1], 'mode') == 1) then
    redis.call('del', KEYS[1])
    if ARGV[4] == '' then
        return found
    end
    if ARGV[6] == 'fair' then
        local head = redis.call('lindex', KEYS[3], 0)
        if head ~= false then
            redis.call(ARGV[4], KEYS[2] .. ':' .. head, ARGV[5])
        end
    else
        redis.call(ARGV[4], KEYS[2], ARGV[5])
    end
elseif ARGV[6] == 'write' then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
return found
