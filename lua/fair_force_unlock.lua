-- Delete a Redisson RFairLock whoever holds it and wake the queue head
-- (RedissonFairLock.forceUnlockAsync). Refuses a key that is not a hash.
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  queue `redisson_lock_queue:{<name>}`
-- KEYS[3]  deadlines `redisson_lock_timeout:{<name>}`
-- KEYS[4]  channel prefix `redisson_lock__channel:{<name>}`
-- ARGV[1]  unlock message (`0`)
-- ARGV[2]  now, epoch milliseconds
-- ARGV[3]  publish command
--
-- Returns: 1 deleted, 0 no lock.
local now = tonumber(ARGV[2])
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if head == false then break end
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline == false or tonumber(deadline) > now then break end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end
local t = redis.call('type', KEYS[1])['ok']
if t == 'none' then return 0 end
if t ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
    redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1
