-- Set or clear the time to live of a synchronizer's keys (Redisson's RExpirable.expireAsync /
-- clearExpireAsync with the object's keys: the permit-expirable semaphore's count and its
-- `{<name>}:timeout` set together).
--
-- KEYS     the object's keys
-- ARGV[1]  time to live in milliseconds; `persist`: remove it
--
-- Returns: 1 when any key's TTL was set (or removed), else 0 (no key, or nothing to remove).
local result = 0
for i = 1, #KEYS do
    local changed
    if ARGV[1] == 'persist' then
        changed = redis.call('persist', KEYS[i])
    else
        changed = redis.call('pexpire', KEYS[i], ARGV[1])
    end
    if changed == 1 then
        result = 1
    end
end
return result
