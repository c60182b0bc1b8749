-- Batched renewal of read holds (Redisson ReadLockTask, 4.4+): for each (RW hash, owner), extend
-- that owner's own `rwlock_timeout:<n>` keys, and the hash to at least the lease, while the
-- owner still holds reads.
--
-- KEYS[2i-1]  RW hash `<name>`;  KEYS[2i]  the owner's timeout prefix `{<name>}:<field>:rwlock_timeout`
-- ARGV[1]     lease in milliseconds
-- ARGV[i+1]   read owner field for pair i
--
-- Returns: one integer per pair: 1 renewed, 0 gone.
local result = {}
for i = 1, #KEYS, 2 do
    local holds = redis.pcall('hget', KEYS[i], ARGV[(i + 1) / 2 + 1])
    local n = (type(holds) == 'string') and tonumber(holds) or nil
    if n ~= nil and n > 0 then
        for c = n, 1, -1 do
            redis.call('pexpire', KEYS[i + 1] .. ':' .. c, ARGV[1])
        end
        -- Never shorten the hash: other readers may hold longer leases (Redisson sets it to
        -- the lease outright, which can expire another reader's hold early).
        local remain = redis.call('pttl', KEYS[i])
        redis.call('pexpire', KEYS[i], math.max(remain, tonumber(ARGV[1])))
        result[#result + 1] = 1
    else
        result[#result + 1] = 0
    end
end
return result
