//! Java Redisson's own lock scripts, written out from the protocol reference
//! (`docs/protocol.md`, shared reference `redisson-protocol.md` §2.2, §2.5, §2.8), NOT from this
//! crate's `lua/`: tests run them as "the Java client" to check that our data, channels and
//! messages are what Redisson itself reads and writes.

/// `RedissonLock.tryLockInnerAsync` (3.19+). KEYS[1] name; ARGV[1] lease ms, ARGV[2] owner.
/// Returns nil when acquired (also on re-entry), else the holder's PTTL.
pub const ACQUIRE: &str = "\
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; \
end; \
return redis.call('pttl', KEYS[1]);";

/// `RedissonLock.unlockInnerAsync` (3.24+). KEYS: name, channel, latch; ARGV: message `0`,
/// lease to re-apply, owner, publish command, latch PX.
pub const UNLOCK: &str = "\
local val = redis.call('get', KEYS[3]); \
if val ~= false then \
    return tonumber(val); \
end; \
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return nil; \
end; \
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]); \
    return 0; \
else \
    redis.call('del', KEYS[1]); \
    redis.call(ARGV[4], KEYS[2], ARGV[1]); \
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]); \
    return 1; \
end;";

/// `RedissonSpinLock.unlockInnerAsync` (3.24+): the RLock release without a publish. KEYS:
/// name, latch; ARGV: lease to re-apply, owner, latch PX.
pub const SPIN_UNLOCK: &str = "\
local val = redis.call('get', KEYS[2]); \
if val ~= false then \
    return tonumber(val); \
end; \
if (redis.call('hexists', KEYS[1], ARGV[2]) == 0) then \
    return nil; \
end; \
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); \
if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    redis.call('set', KEYS[2], 0, 'px', ARGV[3]); \
    return 0; \
else \
    redis.call('del', KEYS[1]); \
    redis.call('set', KEYS[2], 1, 'px', ARGV[3]); \
    return 1; \
end;";

/// `RedissonBaseLock.renewExpirationAsync` (≤3.43). KEYS[1] name; ARGV: lease, owner.
pub const RENEW: &str = "\
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return 1; \
end; \
return 0;";

/// Redisson's channel rule for `name`.
pub fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

/// Redisson's unlock latch for `name` and a request id.
pub fn latch(name: &str, request: &str) -> String {
    if name.contains('{') {
        format!("redisson_unlock_latch:{name}:{request}")
    } else {
        format!("redisson_unlock_latch:{{{name}}}:{request}")
    }
}
