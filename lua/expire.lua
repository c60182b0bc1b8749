-- Re-apply the lease of one owner's holds, exactly, while the owner still holds the lock.
-- MultiLock/RedLock run it on every member once all are taken, so each member's lease starts
-- from that moment; the client passes the expiry that covers every hold the owner still has.
--
-- KEYS[1]  lock hash `<name>`
-- ARGV[1]  expiry in milliseconds (PEXPIRE value)
-- ARGV[2]  owner field `<client uuid>:<owner id>`
--
-- Returns: 1 when set; 0 when the owner holds nothing (lost). A key of another type fails with
-- WRONGTYPE.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
