-- The remaining lease of one permit of a Redisson RPermitExpirableSemaphore (getLeaseTime).
--
-- KEYS[1]  `{<name>}:timeout`
-- ARGV[1]  the permit id's 16 raw bytes
-- ARGV[2]  now, epoch ms
-- ARGV[3]  the "never expires" score, 922337203685477
--
-- Read only: an expired permit is reported as unknown, not reclaimed.
-- Returns: the milliseconds left; -1 when the permit never expires; -2 when the permit is not
-- held (never acquired, released, or its lease has ended).
local expiry = redis.call('zscore', KEYS[1], ARGV[1])
if expiry == false then
    return -2
end
if expiry == ARGV[3] then
    return -1
end
local left = tonumber(expiry) - tonumber(ARGV[2])
if left <= 0 then
    return -2
end
return left
