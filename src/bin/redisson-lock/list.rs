//! `list PATTERN`: `SCAN` (never `KEYS`) every master for lock-like keys.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::inspect::{self, Kind};
use crate::output;
use crate::target::Target;
use crate::Result;

/// One line of `list` (the JSON array's element, see docs/cli.md).
#[derive(Debug, Serialize)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub redis_type: String,
    pub holders: usize,
    pub ttl_ms: Option<i64>,
}

/// `list PATTERN`.
pub async fn run(target: &Target, pattern: &str, count: u32, all: bool, json: bool) -> Result<()> {
    let keys = scan_all(target, pattern, count).await?;
    let mut entries = Vec::new();
    for key in keys {
        if is_companion(&key) {
            continue;
        }
        let found = inspect::read(target, &key, false).await?;
        let (Some(kind), Some(redis_type)) = (found.kind, found.redis_type) else {
            continue; // expired between SCAN and now
        };
        if !kind.is_lock() && !all {
            continue;
        }
        entries.push(Entry {
            name: key,
            kind,
            redis_type,
            holders: found.holders.len(),
            ttl_ms: found.ttl_ms,
        });
    }
    if json {
        return output::print_json(&entries);
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
    print!("{}", output::table(&rows));
    eprintln!("{} lock(s)", entries.len());
    Ok(())
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

/// Every key matching `pattern`, in order, from every master (the one server outside a cluster),
/// following each `SCAN` cursor to its end.
pub async fn scan_all(target: &Target, pattern: &str, count: u32) -> Result<BTreeSet<String>> {
    let mut keys = BTreeSet::new();
    let nodes = target.node_conns(true).await?;
    if nodes.is_empty() {
        scan_node(&mut target.conn(), pattern, count, &mut keys).await?;
    }
    for mut node in nodes {
        scan_node(&mut node, pattern, count, &mut keys).await?;
    }
    Ok(keys)
}

async fn scan_node<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    pattern: &str,
    count: u32,
    keys: &mut BTreeSet<String>,
) -> Result<()> {
    let mut cursor: u64 = 0;
    loop {
        let (next, page): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count.max(1))
            .query_async(conn)
            .await?;
        keys.extend(page);
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}
