//! `inspect`: what a lock's keys hold, read with plain commands (what a Java client would see),
//! and the kind detected from that data.
//!
//! Names follow `docs/protocol.md` and the crate's `KindSpec`s: the lock hash `<name>`, channels
//! `redisson_lock__channel:{<name>}` / `redisson_rwlock:{<name>}`, the fair queue
//! `redisson_lock_queue:{<name>}` and deadlines `redisson_lock_timeout:{<name>}`, the fencing
//! counter `redisson_lock_token:{<name>}`, and read holds' `{<name>}:<field>:rwlock_timeout:<n>`.

use std::collections::HashMap;

use redis::AsyncCommands;
use serde::Serialize;

use crate::clients::{self, ClientConn};
use crate::output::now_ms;
use crate::subscribers;
use crate::target::Target;
use crate::Result;

pub const LOCK_CHANNEL: &str = "redisson_lock__channel";
pub const RWLOCK_CHANNEL: &str = "redisson_rwlock";
pub const TOKEN: &str = "redisson_lock_token";
pub const FAIR_QUEUE: &str = "redisson_lock_queue";
pub const FAIR_TIMEOUT: &str = "redisson_lock_timeout";
pub const SEMAPHORE_CHANNEL: &str = "redisson_sc";
/// The permit semaphore's score of a permit without a lease (Redisson's `nonExpirableTimeout`).
const NON_EXPIRABLE: i64 = 922_337_203_685_477;

/// The count-down latch's channel: `redisson_countdownlatch__channel__{<name>}` (Redisson
/// adds the braces itself here, whatever the name).
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// `prefix:{name}`, or `prefix:name` when `name` contains `{` (Redisson's `prefixName`).
pub fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `{name}:suffix`, or `name:suffix` when `name` contains `{` (Redisson's `suffixName`).
pub fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// What a key holds: a lock, one of Redisson's synchronizers, or something else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Reentrant,
    Fair,
    Fenced,
    ReadWrite,
    /// `RPermitExpirableSemaphore`: an integer string and the `{NAME}:timeout` zset of permits.
    PermitSemaphore,
    /// `RSemaphore`: an integer string whose semaphore channel has subscribers.
    Semaphore,
    /// `RCountDownLatch`: an integer string whose latch channel has subscribers.
    CountDownLatch,
    /// An integer string with no waiters to tell a semaphore from a latch (Redisson stores both
    /// the same way).
    SemaphoreOrLatch,
    /// `RRateLimiter`: a hash with `rate`, `interval` and `type` (and `{NAME}:value`, the
    /// permits left in the window).
    RateLimiter,
    Unknown,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Reentrant => "reentrant",
            Kind::Fair => "fair",
            Kind::Fenced => "fenced",
            Kind::ReadWrite => "read_write",
            Kind::PermitSemaphore => "permit_semaphore",
            Kind::Semaphore => "semaphore",
            Kind::CountDownLatch => "count_down_latch",
            Kind::SemaphoreOrLatch => "semaphore_or_latch",
            Kind::RateLimiter => "rate_limiter",
            Kind::Unknown => "unknown",
        }
    }

    /// Whether it is a lock (what `force-unlock` and `list` deal with).
    pub fn is_lock(self) -> bool {
        matches!(
            self,
            Kind::Reentrant | Kind::Fair | Kind::Fenced | Kind::ReadWrite
        )
    }
}

/// A permit of a permit semaphore: its id and the time left on its lease.
#[derive(Clone, Debug, Serialize)]
pub struct Permit {
    /// The permit id as Redisson's `PermitId` prints it (hex of the 16 bytes).
    pub id: String,
    /// Milliseconds until the lease ends (negative: overdue, reclaimed by the next caller);
    /// `null`: no lease.
    pub lease_ms: Option<i64>,
}

/// One hash field of a lock: an owner and its hold count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// `<client uuid>:<thread or owner id>`.
    pub owner: String,
    /// `exclusive` (RLock, fair, fenced), `read` or `write`.
    pub role: &'static str,
    pub count: i64,
    /// Read holds: the PTTL of each `rwlock_timeout:<n>` key, n = 1..=count (-2: missing);
    /// empty for other roles.
    pub read_timeouts_ms: Vec<i64>,
    /// `inspect`: the server connections whose name contains the holder's client uuid
    /// (`CLIENT LIST` of every master); empty in `list` and `watch`.
    pub connections: Vec<ClientConn>,
}

/// A fair-lock waiter in the queue.
#[derive(Clone, Debug, Serialize)]
pub struct Queued {
    pub owner: String,
    /// Milliseconds until its deadline in `redisson_lock_timeout:{name}` (negative: overdue).
    pub timeout_ms: Option<i64>,
}

/// Everything `inspect` reports (the JSON document, see docs/cli.md).
#[derive(Clone, Debug, Serialize)]
pub struct Inspection {
    pub name: String,
    /// `null` when the key does not exist (not locked).
    pub kind: Option<Kind>,
    pub redis_type: Option<String>,
    /// PTTL of the key: `-1` no expiry; `null` when missing.
    pub ttl_ms: Option<i64>,
    /// Read-write locks: `read` or `write`.
    pub mode: Option<String>,
    pub holders: Vec<Holder>,
    pub queue: Vec<Queued>,
    /// The fencing counter `redisson_lock_token:{name}`, when it exists.
    pub token: Option<i64>,
    pub channels: Vec<String>,
    /// Subscriber connections on `channels` (`PUBSUB NUMSUB`, plus `SHARDNUMSUB` on a cluster).
    pub waiters: i64,
    /// Unknown kinds: the value (string, or the first 100 members/entries).
    pub value: Option<serde_json::Value>,
    /// Synchronizers: the semaphore's available permits, or the latch's count.
    pub count: Option<i64>,
    /// Permit semaphores: the permits taken (at most 1,000 shown).
    pub permits: Vec<Permit>,
    /// Whether the holders' connections were looked up (`false`: no holders, or `CLIENT LIST`
    /// was refused).
    #[serde(skip)]
    pub clients_read: bool,
}

impl Inspection {
    fn missing(name: &str) -> Inspection {
        Inspection {
            name: name.to_owned(),
            kind: None,
            redis_type: None,
            ttl_ms: None,
            mode: None,
            holders: Vec::new(),
            queue: Vec::new(),
            token: None,
            channels: Vec::new(),
            waiters: 0,
            value: None,
            count: None,
            permits: Vec::new(),
            clients_read: false,
        }
    }
}

/// The full report: data, channels and their subscribers.
pub async fn inspect(target: &Target, name: &str) -> Result<Inspection> {
    let mut found = read(target, name, true).await?;
    // A semaphore's or latch's channels were counted to detect it.
    if found.channels.is_empty() {
        found.channels = channels(&found);
        found.waiters = subscribers::total(target, &found.channels).await?;
    }
    if !found.holders.is_empty() {
        match clients::named(target).await {
            Ok(all) => {
                for h in &mut found.holders {
                    h.connections = clients::of_owner(&all, &h.owner);
                }
                found.clients_read = true;
            }
            Err(e) => {
                tracing::warn!(error = %e.0, "CLIENT LIST refused: holders shown without their connections")
            }
        }
    }
    Ok(found)
}

/// Reads the key and its companions; `detail`: also the read holds' timeout keys and the value
/// of unknown kinds.
pub async fn read(target: &Target, name: &str, detail: bool) -> Result<Inspection> {
    let mut conn = target.conn();
    let mut found = Inspection::missing(name);
    let token: Option<String> = conn.get(prefix_name(TOKEN, name)).await?;
    found.token = token.and_then(|t| t.parse().ok());
    let redis_type: String = redis::cmd("TYPE").arg(name).query_async(&mut conn).await?;
    if redis_type == "none" {
        return Ok(found);
    }
    found.ttl_ms = Some(conn.pttl(name).await?);
    found.redis_type = Some(redis_type.clone());
    if redis_type == "hash" {
        let fields = hash_fields(&mut conn, name).await?;
        if let Some(holders) = lock_holders(&fields) {
            read_lock(target, &mut found, holders, &fields, detail).await?;
            return Ok(found);
        }
        if read_rate_limiter(target, &mut found, &fields).await? {
            return Ok(found);
        }
    }
    if redis_type == "string" && read_synchronizer(target, &mut found, detail).await? {
        return Ok(found);
    }
    found.kind = Some(Kind::Unknown);
    if detail {
        found.value = value(target, name, &redis_type).await?;
    }
    Ok(found)
}

/// A hash with Redisson's `RRateLimiter` fields (`rate`, `interval`, `type`; `keepAliveTime`
/// in 4.x) is a rate limiter: its configuration goes to `value`, and `count` is the permits
/// left in the OVERALL window (`{NAME}:value`; the rate when no window is open; a PER_CLIENT
/// limiter's windows are per client, so none is shown). `false`: not a rate limiter.
async fn read_rate_limiter(
    target: &Target,
    found: &mut Inspection,
    fields: &[(String, String)],
) -> Result<bool> {
    let Some(config) = rate_limiter_config(fields) else {
        return Ok(false);
    };
    let rate = config["rate"].as_i64().unwrap_or(0);
    let per_client = config["type"] == "PER_CLIENT";
    found.kind = Some(Kind::RateLimiter);
    found.value = Some(config);
    if !per_client {
        let left: Option<i64> = target.conn().get(suffix_name(&found.name, "value")).await?;
        found.count = Some(left.unwrap_or(rate));
    }
    Ok(true)
}

/// A rate limiter's configuration from its hash fields (`rate`, `interval`, `type`, and
/// `keepAliveTime` from Redisson 4.x); `None`: not a rate limiter's hash.
pub fn rate_limiter_config(fields: &[(String, String)]) -> Option<serde_json::Value> {
    let get = |f: &str| fields.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str());
    let (rate, interval, kind) = (get("rate")?, get("interval")?, get("type")?);
    let (Ok(rate), Ok(interval)) = (rate.parse::<i64>(), interval.parse::<i64>()) else {
        return None;
    };
    Some(serde_json::json!({
        "rate": rate,
        "interval_ms": interval,
        "type": if kind == "1" { "PER_CLIENT" } else { "OVERALL" },
        "keep_alive_ms": get("keepAliveTime").and_then(|v| v.parse::<i64>().ok()),
    }))
}

/// A string holding an integer is a synchronizer: a permit semaphore when its `{NAME}:timeout`
/// zset exists, else a semaphore or a latch, told apart by whose channel has subscribers.
/// `detail`: also the permits taken. `false`: the string is not an integer.
async fn read_synchronizer(target: &Target, found: &mut Inspection, detail: bool) -> Result<bool> {
    let mut conn = target.conn();
    let value: String = conn.get(&found.name).await?;
    let Ok(count) = value.trim().parse::<i64>() else {
        return Ok(false);
    };
    found.count = Some(count);
    let timeouts = suffix_name(&found.name, "timeout");
    let timeouts_type: String = redis::cmd("TYPE")
        .arg(&timeouts)
        .query_async(&mut conn)
        .await?;
    if timeouts_type == "zset" {
        found.kind = Some(Kind::PermitSemaphore);
        if !detail {
            return Ok(true);
        }
        let taken: Vec<(Vec<u8>, f64)> = conn.zrange_withscores(&timeouts, 0, 999).await?;
        let now = now_ms();
        found.permits = taken
            .into_iter()
            .map(|(id, end)| Permit {
                id: id.iter().map(|b| format!("{b:02x}")).collect(),
                lease_ms: (end as i64 != NON_EXPIRABLE).then(|| end as i64 - now),
            })
            .collect();
        return Ok(true);
    }
    let semaphore =
        subscribers::total(target, &[prefix_name(SEMAPHORE_CHANNEL, &found.name)]).await?;
    let latch = subscribers::total(target, &[latch_channel(&found.name)]).await?;
    found.kind = Some(match (semaphore > 0, latch > 0) {
        (true, false) => Kind::Semaphore,
        (false, true) => Kind::CountDownLatch,
        _ => Kind::SemaphoreOrLatch,
    });
    found.channels = channels(found);
    found.waiters = semaphore + latch;
    Ok(true)
}

/// The holders of a lock hash, or `None` when the hash is not a lock (a field that is neither
/// `mode` nor `<id>:<id>` with an integer count).
pub fn lock_holders(fields: &[(String, String)]) -> Option<Vec<Holder>> {
    let mut holders = Vec::new();
    for (field, value) in fields {
        if field == "mode" {
            continue;
        }
        let count = value.parse::<i64>().ok()?;
        if !field.contains(':') {
            return None;
        }
        let (owner, role) = match field.strip_suffix(":write") {
            Some(owner) => (owner.to_owned(), "write"),
            None => (field.clone(), "exclusive"),
        };
        holders.push(Holder {
            owner,
            role,
            count,
            read_timeouts_ms: Vec::new(),
            connections: Vec::new(),
        });
    }
    holders.sort_by(|a, b| a.owner.cmp(&b.owner).then(a.role.cmp(b.role)));
    Some(holders)
}

async fn read_lock(
    target: &Target,
    found: &mut Inspection,
    mut holders: Vec<Holder>,
    fields: &[(String, String)],
    detail: bool,
) -> Result<()> {
    let name = found.name.clone();
    let mut conn = target.conn();
    let mode = fields.iter().find(|(f, _)| f == "mode").map(|(_, v)| v);
    if let Some(mode) = mode {
        found.kind = Some(Kind::ReadWrite);
        found.mode = Some(mode.clone());
        for h in holders.iter_mut().filter(|h| h.role != "write") {
            h.role = "read";
            if detail {
                let prefix = suffix_name(&name, &format!("{}:rwlock_timeout", h.owner));
                for n in 1..=h.count.clamp(0, 1000) {
                    h.read_timeouts_ms
                        .push(conn.pttl(format!("{prefix}:{n}")).await?);
                }
            }
        }
    } else {
        let queue_key = prefix_name(FAIR_QUEUE, &name);
        let timeout_key = prefix_name(FAIR_TIMEOUT, &name);
        // One key per command: a name with a stray `{` puts them in different cluster slots.
        let fair = conn.exists::<_, bool>(&queue_key).await?
            || conn.exists::<_, bool>(&timeout_key).await?;
        found.kind = Some(if fair {
            Kind::Fair
        } else if found.token.is_some() {
            Kind::Fenced
        } else {
            Kind::Reentrant
        });
        if fair {
            found.queue = fair_queue(target, &queue_key, &timeout_key).await?;
        }
    }
    found.holders = holders;
    Ok(())
}

/// The fair queue in order, each waiter with the time left until its deadline.
async fn fair_queue(target: &Target, queue_key: &str, timeout_key: &str) -> Result<Vec<Queued>> {
    let mut conn = target.conn();
    let owners: Vec<String> = conn.lrange(queue_key, 0, -1).await?;
    let deadlines: Vec<(String, f64)> = conn.zrange_withscores(timeout_key, 0, -1).await?;
    let deadlines: HashMap<String, f64> = deadlines.into_iter().collect();
    let now = now_ms();
    Ok(owners
        .into_iter()
        .map(|owner| {
            let timeout_ms = deadlines.get(&owner).map(|d| *d as i64 - now);
            Queued { owner, timeout_ms }
        })
        .collect())
}

/// Hashes with at most this many fields are read whole; a bigger one (no lock is that big) by
/// one `HSCAN` page, enough to see that it is not a lock.
pub const FIELDS_READ_WHOLE: i64 = 512;

/// A hash's fields: all of them when it has at most [`FIELDS_READ_WHOLE`], else one `HSCAN`
/// page (never a whole big application hash).
async fn hash_fields<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    name: &str,
) -> Result<Vec<(String, String)>> {
    let len: i64 = redis::cmd("HLEN").arg(name).query_async(conn).await?;
    if len <= FIELDS_READ_WHOLE {
        return Ok(redis::cmd("HGETALL").arg(name).query_async(conn).await?);
    }
    let (_, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
        .arg(name)
        .arg(0)
        .arg("COUNT")
        .arg(100)
        .query_async(conn)
        .await?;
    Ok(page)
}

/// A bounded look at a key that is not a lock.
async fn value(target: &Target, name: &str, redis_type: &str) -> Result<Option<serde_json::Value>> {
    use serde_json::json;
    let mut conn = target.conn();
    Ok(match redis_type {
        "string" => {
            let v: String = conn.get(name).await?;
            Some(json!(v))
        }
        "zset" => {
            let v: Vec<(String, f64)> = conn.zrange_withscores(name, 0, 99).await?;
            Some(json!(v))
        }
        "list" => {
            let v: Vec<String> = conn.lrange(name, 0, 99).await?;
            Some(json!(v))
        }
        "set" => {
            let v: Vec<String> = conn.srandmember_multiple(name, 100).await?;
            Some(json!(v))
        }
        "hash" => {
            let (_, v): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
                .arg(name)
                .arg(0)
                .arg("COUNT")
                .arg(100)
                .query_async(&mut conn)
                .await?;
            Some(json!(v.into_iter().take(100).collect::<HashMap<_, _>>()))
        }
        _ => None,
    })
}

/// The channels a lock's waiters subscribe to.
pub fn channels(found: &Inspection) -> Vec<String> {
    let lock = prefix_name(LOCK_CHANNEL, &found.name);
    let rw = prefix_name(RWLOCK_CHANNEL, &found.name);
    match found.kind {
        None => vec![lock, rw],
        Some(Kind::ReadWrite) => vec![rw],
        Some(Kind::Fair) => {
            // Each queued waiter waits on its own channel `<channel>:<owner>`.
            let mut v: Vec<String> = found
                .queue
                .iter()
                .map(|q| format!("{lock}:{}", q.owner))
                .collect();
            v.insert(0, lock);
            v
        }
        Some(Kind::Reentrant | Kind::Fenced) => vec![lock],
        Some(Kind::PermitSemaphore | Kind::Semaphore) => {
            vec![prefix_name(SEMAPHORE_CHANNEL, &found.name)]
        }
        Some(Kind::CountDownLatch) => vec![latch_channel(&found.name)],
        Some(Kind::SemaphoreOrLatch) => vec![
            prefix_name(SEMAPHORE_CHANNEL, &found.name),
            latch_channel(&found.name),
        ],
        Some(Kind::RateLimiter | Kind::Unknown) => Vec::new(),
    }
}
