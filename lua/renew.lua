-- Batched lease renewal (Redisson LockTask, 3.44+): extend every lock whose owner field still exists.
--
-- KEYS[1..n]  lock hashes (all in one hash slot in cluster mode)
-- ARGV[1]     lease in milliseconds
-- ARGV[i+1]   owner field for KEYS[i]
--
-- Never shortens a key: a fixed-lease hold of the same owner may need it to live longer than
-- the watchdog's lease (Redisson sets the lease outright, which could end that hold early).
--
-- Returns: an array of n integers in KEYS order: 1 renewed, 0 gone (the hold is lost).
-- A key of another type counts as gone instead of failing the whole batch.
local result = {}
for i = 1, #KEYS do
    local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if held == 1 then
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
            redis.call('pexpire', KEYS[i], ARGV[1])
        end
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
