//! `list [PATTERN]`: `SCAN` (never `KEYS`) every master for lock-like keys, gently enough for a
//! production keyspace.
//!
//! - `SCAN ... TYPE hash` (every lock is a hash), so the server filters the other keys out;
//!   `--all` scans every type. A server without the `TYPE` filter (before Redis 6) is scanned
//!   without it and the keys' types are read instead.
//! - The keys of one `SCAN` page are read in pipelines, a few round trips per page whatever its
//!   size: type, TTL, field count and companion keys first, then the fields of the hashes that
//!   are small enough to be locks (a Redisson lock hash has one field per holder); a bigger hash
//!   is judged by one `HSCAN` page, never read whole.
//! - A key that changed type or vanished between `SCAN` and the reads is skipped.
//! - `--limit N` stops the scan once N entries are found.

use std::collections::HashMap;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Value};
use serde::Serialize;

use crate::inspect::{self, Kind};
use crate::output;
use crate::progress::Progress;
use crate::subscribers;
use crate::target::Target;
use crate::Result;

/// Hashes with at most this many fields are read whole (`HGETALL`): every Redisson lock, even a
/// read-write lock with a crowd of readers. Bigger ones are judged by one `HSCAN` page.
const FIELDS_READ_WHOLE: i64 = inspect::FIELDS_READ_WHOLE;
/// Strings longer than this cannot hold a synchronizer's integer: their value is not read.
const INTEGER_LEN: i64 = 20;

/// One line of `list` (the JSON array's element, see docs/cli.md).
#[derive(Debug, Serialize)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub redis_type: String,
    pub holders: usize,
    pub ttl_ms: Option<i64>,
    /// The holders' fields (`<client uuid>:<id>`, a writer's without `:write`), for `--wide`
    /// and `--orphans`.
    #[serde(skip)]
    pub owners: Vec<String>,
}

/// What `list` was asked.
pub struct Options {
    pub pattern: String,
    /// `SCAN COUNT`.
    pub count: u32,
    /// Synchronizers and other keys too.
    pub all: bool,
    /// Stop after this many entries.
    pub limit: Option<usize>,
    /// Progress on stderr: `Some(true)` forced on, `Some(false)` off, `None` when it is a TTY.
    pub progress: Option<bool>,
}

/// `list PATTERN`.
pub async fn run(target: &Target, options: &Options, json: bool) -> Result<()> {
    let entries = collect(target, options).await?;
    if json {
        let mut doc = vec![lead(target, None)?];
        for e in &entries {
            doc.push(serde_json::to_string(e)?);
        }
        return output::line(&format!("[{}]", doc.join(",")));
    }
    let mut rows = vec![vec![
        "KIND".to_owned(),
        "HOLDERS".to_owned(),
        "TTL".to_owned(),
        "NAME".to_owned(),
    ]];
    rows.extend(entries.iter().map(|e| {
        vec![
            e.kind.as_str().to_owned(),
            e.holders.to_string(),
            output::opt_ttl(e.ttl_ms),
            e.name.clone(),
        ]
    }));
    output::out(&output::table(&rows))?;
    crate::output::errln!("{} lock(s)", entries.len());
    Ok(())
}

/// The JSON array's first element: `{"server": {...}}`, so that an empty list still says where
/// it looked (docs/cli.md, "JSON"); `clients`: what `--wide` and `--orphans` add to it.
pub fn lead(target: &Target, clients: Option<serde_json::Value>) -> Result<String> {
    #[derive(Serialize)]
    struct Lead<'a> {
        server: &'a crate::server::Server,
        #[serde(skip_serializing_if = "Option::is_none")]
        clients: Option<serde_json::Value>,
    }
    Ok(serde_json::to_string(&Lead {
        server: &target.server,
        clients,
    })?)
}

/// The entries, sorted by name, at most `limit`.
pub async fn collect(target: &Target, options: &Options) -> Result<Vec<Entry>> {
    let mut progress = Progress::new(options.progress);
    let mut entries = Vec::new();
    let nodes = target.node_conns(true).await?;
    // Every node (replicas too: a subscriber may be on any), opened once for the whole scan.
    let every_node = if options.all {
        target.node_conns(false).await?
    } else {
        Vec::new()
    };
    let limit = options.limit.unwrap_or(usize::MAX);
    if nodes.is_empty() {
        scan_node(
            target,
            &every_node,
            &mut target.conn(),
            options,
            limit,
            &mut entries,
            &mut progress,
        )
        .await?;
    }
    for mut node in nodes {
        if entries.len() >= limit {
            break;
        }
        scan_node(
            target,
            &every_node,
            &mut node,
            options,
            limit,
            &mut entries,
            &mut progress,
        )
        .await?;
    }
    progress.done(entries.len());
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.dedup_by(|a, b| a.name == b.name);
    entries.truncate(limit);
    Ok(entries)
}

/// Follows one node's `SCAN` cursor, reading each page's keys in pipelines.
async fn scan_node<C: redis::aio::ConnectionLike>(
    target: &Target,
    every_node: &[MultiplexedConnection],
    conn: &mut C,
    options: &Options,
    limit: usize,
    entries: &mut Vec<Entry>,
    progress: &mut Progress,
) -> Result<()> {
    let mut type_filter = !options.all;
    let mut cursor: u64 = 0;
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(&options.pattern)
            .arg("COUNT")
            .arg(options.count.max(1));
        if type_filter {
            scan.arg("TYPE").arg("hash");
        }
        let (next, page): (u64, Vec<String>) = match scan.query_async(conn).await {
            Ok(reply) => reply,
            Err(e) if type_filter && cursor == 0 && lacks_type_filter(&e) => {
                tracing::info!(error = %e, "the server has no SCAN TYPE filter: scanning every type");
                type_filter = false;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        tracing::debug!(cursor = next, keys = page.len(), "scan page");
        let keys: Vec<String> = page.into_iter().filter(|k| !is_companion(k)).collect();
        progress.page(keys.len());
        if !keys.is_empty() {
            let found = read_page(target, every_node, conn, &keys, options.all).await?;
            entries.extend(found);
            progress.found(entries.len());
        }
        if next == 0 || entries.len() >= limit {
            return Ok(());
        }
        cursor = next;
    }
}

/// Whether `SCAN`'s refusal means the server does not know the `TYPE` option (Redis < 6).
fn lacks_type_filter(e: &redis::RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("syntax") || text.contains("type")
}

/// What the first pipeline learns of one key.
#[derive(Debug, Default)]
struct First {
    redis_type: String,
    ttl_ms: i64,
    /// Hashes: the field count and whether `mode` is one of them.
    fields: i64,
    mode: bool,
    /// Hashes: the fencing counter exists; a fair lock's queue or deadlines exist.
    token: bool,
    fair: bool,
    /// Strings: the length, and whether a permit semaphore's `{NAME}:timeout` zset exists.
    len: i64,
    timeouts: bool,
}

/// The entries among `keys` (one `SCAN` page), read in at most four pipelined round trips on
/// `conn`, the connection that scanned them (on a cluster, the node that has them: a key's
/// companions share its hash slot; a key moved away meanwhile is skipped).
async fn read_page<C: redis::aio::ConnectionLike>(
    target: &Target,
    every_node: &[MultiplexedConnection],
    conn: &mut C,
    keys: &[String],
    all: bool,
) -> Result<Vec<Entry>> {
    // 1. The type of each key (the TYPE filter says "hash", but a key may have changed since).
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for key in keys {
        pipe.cmd("TYPE").arg(key).cmd("PTTL").arg(key);
    }
    let replies: Vec<RedisResult<Value>> = pipe.query_async(conn).await?;
    let mut first: Vec<First> = replies
        .chunks(2)
        .map(|r| First {
            redis_type: text(&r[0]).unwrap_or_else(|| "none".to_owned()),
            ttl_ms: int(&r[1]).unwrap_or(-2),
            ..First::default()
        })
        .collect();

    // 2. What tells the kinds apart, per type: a hash's field count and companions, a string's
    //    length and its permit-semaphore zset.
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let mut asked = Vec::new();
    for (i, (key, f)) in keys.iter().zip(&first).enumerate() {
        match f.redis_type.as_str() {
            "hash" => {
                pipe.cmd("HLEN")
                    .arg(key)
                    .cmd("HEXISTS")
                    .arg(key)
                    .arg("mode");
                pipe.cmd("EXISTS")
                    .arg(inspect::prefix_name(inspect::TOKEN, key));
                // One key per command: a name with a stray `{` puts them in different slots.
                pipe.cmd("EXISTS")
                    .arg(inspect::prefix_name(inspect::FAIR_QUEUE, key));
                pipe.cmd("EXISTS")
                    .arg(inspect::prefix_name(inspect::FAIR_TIMEOUT, key));
                asked.push((i, 5));
            }
            "string" if all => {
                pipe.cmd("STRLEN").arg(key);
                pipe.cmd("EXISTS").arg(inspect::suffix_name(key, "timeout"));
                asked.push((i, 2));
            }
            _ => {}
        }
    }
    if !asked.is_empty() {
        let replies: Vec<RedisResult<Value>> = pipe.query_async(conn).await?;
        let mut at = 0;
        for (i, n) in asked {
            let r = &replies[at..at + n];
            at += n;
            let f = &mut first[i];
            if f.redis_type == "hash" {
                f.fields = int(&r[0]).unwrap_or(0);
                f.mode = int(&r[1]) == Some(1);
                f.token = int(&r[2]) == Some(1);
                f.fair = int(&r[3]) == Some(1) || int(&r[4]) == Some(1);
            } else {
                f.len = int(&r[0]).unwrap_or(i64::MAX);
                f.timeouts = int(&r[1]) == Some(1);
            }
        }
    }

    // 3. The fields of small hashes (whole) and of big ones (one HSCAN page); short strings.
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    let mut asked = Vec::new();
    for (i, (key, f)) in keys.iter().zip(&first).enumerate() {
        match f.redis_type.as_str() {
            "hash" if f.fields > 0 && f.fields <= FIELDS_READ_WHOLE => {
                pipe.cmd("HGETALL").arg(key);
                asked.push(i);
            }
            "hash" if f.fields > 0 => {
                pipe.cmd("HSCAN").arg(key).arg(0).arg("COUNT").arg(100);
                asked.push(i);
            }
            "string" if all && f.len <= INTEGER_LEN => {
                pipe.cmd("GET").arg(key);
                asked.push(i);
            }
            _ => {}
        }
    }
    let replies: Vec<RedisResult<Value>> = if asked.is_empty() {
        Vec::new()
    } else {
        pipe.query_async(conn).await?
    };
    let mut read: HashMap<usize, &RedisResult<Value>> = HashMap::new();
    for (i, r) in asked.into_iter().zip(&replies) {
        read.insert(i, r);
    }

    // 4. Integer strings without a permit zset: a semaphore or a latch, by whose channel has
    //    subscribers (one PUBSUB NUMSUB per node for the whole page).
    let mut entries = Vec::new();
    let mut undecided = Vec::new();
    for (i, (key, f)) in keys.iter().zip(first).enumerate() {
        if f.ttl_ms == -2 || f.redis_type == "none" {
            continue; // gone since the scan
        }
        let mut entry = Entry {
            name: key.clone(),
            kind: Kind::Unknown,
            redis_type: f.redis_type.clone(),
            holders: 0,
            ttl_ms: Some(f.ttl_ms),
            owners: Vec::new(),
        };
        match (f.redis_type.as_str(), read.get(&i)) {
            ("hash", Some(Ok(value))) => {
                let sampled = f.fields > FIELDS_READ_WHOLE;
                let fields = hash_fields(value, sampled);
                if let Some(holders) = inspect::lock_holders(&fields) {
                    entry.kind = if f.mode {
                        Kind::ReadWrite
                    } else if f.fair {
                        Kind::Fair
                    } else if f.token {
                        Kind::Fenced
                    } else {
                        Kind::Reentrant
                    };
                    entry.holders = if sampled {
                        usize::try_from(f.fields - i64::from(f.mode)).unwrap_or(0)
                    } else {
                        holders.len()
                    };
                    entry.owners = holders.into_iter().map(|h| h.owner).collect();
                    entry.owners.dedup();
                } else if inspect::rate_limiter_config(&fields).is_some() {
                    entry.kind = Kind::RateLimiter;
                }
            }
            ("string", Some(Ok(value))) => {
                let integer = text(&Ok(value.clone())).and_then(|v| v.trim().parse::<i64>().ok());
                if integer.is_some() {
                    if f.timeouts {
                        entry.kind = Kind::PermitSemaphore;
                    } else {
                        entry.kind = Kind::SemaphoreOrLatch;
                        undecided.push(entries.len());
                    }
                }
            }
            _ => {}
        }
        if entry.kind.is_lock() || all {
            entries.push(entry);
        }
    }
    if !undecided.is_empty() {
        let mut channels = Vec::new();
        for &e in &undecided {
            let name = &entries[e].name;
            channels.push(inspect::prefix_name(inspect::SEMAPHORE_CHANNEL, name));
            channels.push(inspect::latch_channel(name));
        }
        let counts = subscribers::each(target, every_node, &channels).await?;
        for &e in &undecided {
            let name = entries[e].name.clone();
            let count = |c: String| counts.get(&c).copied().unwrap_or(0) > 0;
            let semaphore = count(inspect::prefix_name(inspect::SEMAPHORE_CHANNEL, &name));
            let latch = count(inspect::latch_channel(&name));
            entries[e].kind = match (semaphore, latch) {
                (true, false) => Kind::Semaphore,
                (false, true) => Kind::CountDownLatch,
                _ => Kind::SemaphoreOrLatch,
            };
        }
    }
    Ok(entries)
}

/// `(field, value)` pairs of an `HGETALL` reply, or of an `HSCAN` page (`sampled`).
fn hash_fields(value: &Value, sampled: bool) -> Vec<(String, String)> {
    let value = if sampled {
        match value {
            Value::Array(parts) if parts.len() == 2 => &parts[1],
            _ => return Vec::new(),
        }
    } else {
        value
    };
    match value {
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((text(&Ok(k.clone()))?, text(&Ok(v.clone()))?)))
            .collect(),
        Value::Array(flat) => flat
            .chunks(2)
            .filter_map(|p| {
                let k = text(&Ok(p.first()?.clone()))?;
                let v = text(&Ok(p.get(1)?.clone()))?;
                Some((k, v))
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn text(r: &RedisResult<Value>) -> Option<String> {
    match r {
        Ok(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        Ok(Value::SimpleString(s)) => Some(s.clone()),
        Ok(Value::Okay) => Some("OK".to_owned()),
        _ => None,
    }
}

fn int(r: &RedisResult<Value>) -> Option<i64> {
    match r {
        Ok(Value::Int(n)) => Some(*n),
        _ => None,
    }
}

/// Keys that sit beside a lock rather than being one: fair queues and deadlines, fencing
/// counters, read-hold timeouts, unlock latches.
fn is_companion(key: &str) -> bool {
    const PREFIXES: [&str; 4] = [
        "redisson_lock_queue:",
        "redisson_lock_timeout:",
        "redisson_lock_token:",
        "redisson_unlock_latch:",
    ];
    PREFIXES.iter().any(|p| key.starts_with(p)) || key.contains(":rwlock_timeout:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_replies_of_both_protocols_parse() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let flat = Value::Array(vec![b("a:1"), b("2")]);
        assert_eq!(hash_fields(&flat, false), vec![("a:1".into(), "2".into())]);
        let map = Value::Map(vec![(b("a:1"), b("2"))]);
        assert_eq!(hash_fields(&map, false).len(), 1);
        let page = Value::Array(vec![b("0"), flat]);
        assert_eq!(hash_fields(&page, true), vec![("a:1".into(), "2".into())]);
    }

    #[test]
    fn an_old_servers_refusal_of_the_type_filter_is_recognised() {
        let e = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "ERR syntax error",
        ));
        assert!(lacks_type_filter(&e));
    }

    #[test]
    fn companions_are_not_listed() {
        assert!(is_companion("redisson_lock_token:{a}"));
        assert!(is_companion("{a}:x:1:rwlock_timeout:1"));
        assert!(!is_companion("orders:1"));
    }
}
