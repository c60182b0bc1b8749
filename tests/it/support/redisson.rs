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

/// `name` as Redisson's `prefixName`/`suffixName` embed it: as it is when it already has a
/// hash tag, else wrapped in braces.
pub fn tagged(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// The fair lock's queue of `name` (`redisson_lock_queue:{name}`).
pub fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{}", tagged(name))
}

/// The fair lock's waiter deadlines of `name` (`redisson_lock_timeout:{name}`).
pub fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{}", tagged(name))
}

/// Redisson's channel rule for `name`.
pub fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{}", tagged(name))
}

/// Redisson's unlock latch for `name` and a request id.
pub fn latch(name: &str, request: &str) -> String {
    format!("redisson_unlock_latch:{}:{request}", tagged(name))
}

// === Synchronizers: Redisson's own script text (RedissonSemaphore, RedissonCountDownLatch,
// RedissonPermitExpirableSemaphore, 3.24+/4.x), as a Java client sends it. ===

/// `RedissonSemaphore.tryAcquireAsync0`. KEYS: name; ARGV: permits. 1 taken, 0 not.
pub const SEM_TRY_ACQUIRE: &str = "local value = redis.call('get', KEYS[1]); \
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then \
local val = redis.call('decrby', KEYS[1], ARGV[1]); \
return 1; \
end; \
return 0;";

/// `RedissonSemaphore.releaseAsync`. KEYS: name, channel; ARGV: permits, publish command.
pub const SEM_RELEASE: &str = "local value = redis.call('incrby', KEYS[1], ARGV[1]); \
redis.call(ARGV[2], KEYS[2], value); ";

/// `RedissonSemaphore.trySetPermitsAsync`. KEYS: name, channel; ARGV: permits, publish.
pub const SEM_TRY_SET: &str = "local value = redis.call('get', KEYS[1]); \
if (value == false) then \
redis.call('set', KEYS[1], ARGV[1]); \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1;\
end;\
return 0;";

/// `RedissonSemaphore.addPermitsAsync`. KEYS: name, channel; ARGV: permits, publish.
pub const SEM_ADD: &str = "local value = redis.call('get', KEYS[1]); \
if (value == false) then \
value = 0;\
end;\
redis.call('set', KEYS[1], value + ARGV[1]); \
redis.call(ARGV[2], KEYS[2], value + ARGV[1]); ";

/// `RedissonSemaphore.drainPermitsAsync`. KEYS: name. Returns the old value.
pub const SEM_DRAIN: &str = "local value = redis.call('get', KEYS[1]); \
if (value == false) then \
return 0; \
end; \
redis.call('set', KEYS[1], 0); \
return value;";

/// Redisson's semaphore channel (`prefixName("redisson_sc", name)`).
pub fn sem_channel(name: &str) -> String {
    format!("redisson_sc:{}", tagged(name))
}

/// Runs a Java script with string arguments; the reply as a redis Value.
pub async fn eval(
    raw: &mut redis::aio::MultiplexedConnection,
    script: &str,
    keys: &[&str],
    args: &[&str],
) -> redis::Value {
    eval_args(raw, script, keys, args).await
}

/// Runs a Java script with binary arguments (permit ids travel as 16 raw bytes).
pub async fn eval_bytes(
    raw: &mut redis::aio::MultiplexedConnection,
    script: &str,
    keys: &[&str],
    args: &[&[u8]],
) -> redis::Value {
    eval_args(raw, script, keys, args).await
}

/// `EVAL script` with `keys` and `args`, as a Java client sends it (no EVALSHA).
async fn eval_args<A: redis::ToRedisArgs>(
    raw: &mut redis::aio::MultiplexedConnection,
    script: &str,
    keys: &[&str],
    args: &[A],
) -> redis::Value {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(a);
    }
    cmd.query_async(raw).await.unwrap()
}

/// Runs one of Java's synchronizer scripts on `name` as a Java client does: KEYS are the name
/// and its channel (`channel` makes it from the name), ARGV is `args` then `PUBLISH`.
async fn java_on(
    raw: &mut redis::aio::MultiplexedConnection,
    script: &str,
    name: &str,
    channel: fn(&str) -> String,
    args: &[&str],
) -> redis::Value {
    let argv = [args, &["PUBLISH"]].concat();
    eval(raw, script, &[name, &channel(name)], &argv).await
}

/// Runs one of Java's `RSemaphore` scripts (`SEM_*`) on `name`; `args` without the trailing
/// publish command.
pub async fn java_sem(
    raw: &mut redis::aio::MultiplexedConnection,
    script: &str,
    name: &str,
    args: &[&str],
) -> redis::Value {
    java_on(raw, script, name, sem_channel, args).await
}

/// Runs one of Java's `RCountDownLatch` scripts (`LATCH_*`) on `name`; `args` without the
/// trailing publish command.
pub async fn java_latch(
    raw: &mut redis::aio::MultiplexedConnection,
    script: &str,
    name: &str,
    args: &[&str],
) -> redis::Value {
    java_on(raw, script, name, latch_channel, args).await
}

/// `RedissonCountDownLatch.trySetCountAsync`. KEYS: name, channel; ARGV: `1`, count, publish.
pub const LATCH_TRY_SET: &str = "if redis.call('exists', KEYS[1]) == 0 then \
redis.call('set', KEYS[1], ARGV[2]); \
redis.call(ARGV[3], KEYS[2], ARGV[1]); \
return 1 \
else \
return 0 \
end";

/// `RedissonCountDownLatch.countDownAsync`. KEYS: name, channel; ARGV: `0`, publish.
pub const LATCH_COUNT_DOWN: &str = "local v = redis.call('decr', KEYS[1]);\
if v <= 0 then redis.call('del', KEYS[1]) end;\
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";

/// `RedissonCountDownLatch.deleteAsync`. KEYS: name, channel; ARGV: `1`, publish.
pub const LATCH_DELETE: &str = "if redis.call('del', KEYS[1]) == 1 then \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1 \
else \
return 0 \
end";

/// `RedissonCountDownLatch.getChannelName`: always wrapped in braces.
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// How many calls of `command` (lowercase) the server ran since the last `CONFIG RESETSTAT`.
pub async fn calls(server: &super::TestServer, command: &str) -> u64 {
    let mut raw = server.conn().await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut raw)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `CONFIG RESETSTAT`: command counts start from zero.
pub async fn reset_stats(server: &super::TestServer) {
    let mut raw = server.conn().await;
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut raw)
        .await
        .unwrap();
}

/// `RedissonPermitExpirableSemaphore.tryAcquireAsync(ids, timeoutDate)`. KEYS: name, timeout
/// zset, channel; ARGV: count, expireAt, now, nonExpirable, publish, id bytes... Returns `OK`,
/// `:<nearest expiry>`, or nil.
pub const PES_TRY_ACQUIRE: &str =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); \
if #expiredIds > 0 then \
redis.call('zrem', KEYS[2], unpack(expiredIds)); \
local value = redis.call('incrby', KEYS[1], #expiredIds); \
if tonumber(value) > 0 then \
redis.call(ARGV[5], KEYS[3], value); \
end;\
end; \
local value = redis.call('get', KEYS[1]); \
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then \
redis.call('decrby', KEYS[1], ARGV[1]); \
for i = 6, #ARGV, 1 do \
redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); \
end; \
local ttl = redis.call('pttl', KEYS[1]); \
if ttl > 0 then \
redis.call('pexpire', KEYS[2], ttl); \
end; \
return 'OK'; \
end; \
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); \
if v[1] ~= nil and v[2] ~= ARGV[4] then \
return ':' .. tostring(v[2]); \
end \
return nil;";

/// `RedissonPermitExpirableSemaphore.tryReleaseAsync(id)`. KEYS: name, channel, timeout zset;
/// ARGV: id bytes, 1, now, publish. 1 released, 0 not (or expired).
pub const PES_TRY_RELEASE: &str = "local expire = redis.call('zscore', KEYS[3], ARGV[1]);\
local removed = redis.call('zrem', KEYS[3], ARGV[1]);\
if tonumber(removed) ~= 1 then \
return 0;\
end;\
local value = redis.call('incrby', KEYS[1], ARGV[2]); \
redis.call(ARGV[4], KEYS[2], value); \
if tonumber(expire) <= tonumber(ARGV[3]) then \
return 0;\
end;\
return 1;";

/// `RedissonPermitExpirableSemaphore.availablePermitsAsync`. KEYS: name, timeout zset,
/// channel; ARGV: now, publish.
pub const PES_AVAILABLE: &str =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1); \
if #expiredIds > 0 then \
redis.call('zrem', KEYS[2], unpack(expiredIds)); \
local value = redis.call('incrby', KEYS[1], #expiredIds); \
if tonumber(value) > 0 then \
redis.call(ARGV[2], KEYS[3], value); \
end;\
return value; \
end; \
local ret = redis.call('get', KEYS[1]); \
return ret == false and 0 or ret;";

/// `RedissonPermitExpirableSemaphore.addPermitsAsync`, the same commands in the same order.
/// KEYS: name, channel; ARGV: permits (may be negative), publish command.
pub const PES_ADD: &str = "local value = redis.call('get', KEYS[1]); \
    if value == false then value = 0 end; \
    redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1])); \
    if tonumber(ARGV[1]) > 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end";

/// Redisson's `nonExpirableTimeout` score.
pub const NON_EXPIRABLE: &str = "922337203685477";

/// `suffixName(name, "timeout")`.
pub fn pes_timeouts(name: &str) -> String {
    format!("{}:timeout", tagged(name))
}

/// Epoch milliseconds now (the client clock both sides use for permit leases).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A permit id as hex (32 chars) from its 16 raw bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 16 raw bytes from 32 hex characters.
pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}
