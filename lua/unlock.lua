-- Release one hold of a Redisson RLock (Redisson RedissonLock.unlockInnerAsync, 3.24+, without
-- its unlock latch: ours is never read by anyone else, and our retry after an unknown outcome
-- runs lua/trim.lua to the count the owner knows instead, docs/protocol.md "Unlock retries").
--
-- KEYS[1]  lock hash `<name>`
-- KEYS[2]  unlock channel `redisson_lock__channel:{<name>}`
-- ARGV[1]  unlock message (`0`)
-- ARGV[2]  lease in milliseconds, re-applied when holds remain
-- ARGV[3]  owner field `<client uuid>:<owner id>`
-- ARGV[4]  publish command (`PUBLISH` or `SPUBLISH`; empty for the spin lock: nothing is published)
--
-- Returns: nil when the owner holds nothing (not owner / lease lost);
--          0 when holds remain (lease re-applied); 1 when the lock was deleted and ARGV[1] published.
--
-- The last hold (the value is exactly `1`) is released without decrementing it first: the key is
-- deleted either way, so the `hincrby` to 0 that Redisson's script runs there is skipped (one
-- redis.call less per lock cycle); any other value goes through `hincrby` as in Redisson's.
local held = redis.call('hget', KEYS[1], ARGV[3])
if held == false then
    return nil
end
if held ~= '1' then
    local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
    if count > 0 then
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 0
    end
end
redis.call('del', KEYS[1])
if ARGV[4] ~= '' then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
end
return 1
