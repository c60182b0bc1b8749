-- Take permits of a Redisson RSemaphore, at most once per request (RedissonSemaphore.tryAcquireAsync0).
--
-- KEYS[1]  semaphore `<name>`: a STRING holding the number of available permits
-- KEYS[2]  acquire receipt `redisson_semaphore_latch:{<name>}:<32 hex request id>` (ours; Java
--          never reads it): lets a try whose reply was lost be repeated or undone exactly once
-- ARGV[1]  permits to take (> 0)
-- ARGV[2]  receipt TTL in milliseconds
--
-- Returns: 1 when taken (also when the receipt says this request already took them);
--          0 when fewer than ARGV[1] permits are available (nothing written).
if redis.call('exists', KEYS[2]) == 1 then
    return 1
end
local available = redis.call('get', KEYS[1])
if available ~= false and tonumber(available) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], ARGV[1], 'px', ARGV[2])
    return 1
end
return 0
