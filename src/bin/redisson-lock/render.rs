//! The human format of `inspect`: aligned `key  value` rows, holders and queue indented.

use crate::inspect::{Holder, Inspection, Kind};
use crate::output;

/// Width of the key column: the longest key (`holders`, `waiters`) and two spaces.
const KEY: usize = 9;

fn kv(out: &mut String, key: &str, value: &str) {
    out.push_str(&format!("{key:<KEY$}{value}\n"));
}

/// The human format of an inspection.
pub fn inspection(found: &Inspection) -> String {
    let mut out = String::new();
    match found.kind {
        None => out.push_str(&format!("{}: not locked\n", found.name)),
        Some(kind) => {
            let synchronizer = found.count.is_some() || kind == Kind::RateLimiter;
            kv(
                &mut out,
                if synchronizer { "name" } else { "lock" },
                &found.name,
            );
            kv(&mut out, "kind", kind.as_str());
            if kind == Kind::Unknown {
                kv(&mut out, "type", found.redis_type.as_deref().unwrap_or("?"));
            }
            kv(&mut out, "ttl", &output::opt_ttl(found.ttl_ms));
            if let Some(mode) = &found.mode {
                kv(&mut out, "mode", mode);
            }
            if kind.is_lock() {
                kv(&mut out, "holders", &found.holders.len().to_string());
                out.push_str(&holder_rows(found));
            }
            if let Some(count) = found.count {
                out.push_str(&synchronizer_rows(found, kind, count));
            }
        }
    }
    if found.kind == Some(Kind::Fair) {
        kv(&mut out, "queue", &found.queue.len().to_string());
        out.push_str(&queue_rows(found));
    }
    if let Some(token) = found.token {
        kv(&mut out, "token", &token.to_string());
    }
    if let Some(v) = &found.value {
        kv(&mut out, "value", &v.to_string());
    }
    if !found.channels.is_empty() {
        let subs = format!(
            "{}  (subscribers of {})",
            found.waiters,
            found.channels.join(", ")
        );
        kv(&mut out, "waiters", &subs);
    }
    out
}

fn holder_rows(found: &Inspection) -> String {
    let mut out = String::new();
    for h in &found.holders {
        out.push_str(&output::table(&[holder_row(h)]));
        for c in &h.connections {
            let node = c
                .node
                .as_deref()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "    conn {}{node}  name {}  age {}  idle {}\n",
                c.addr,
                c.name,
                output::ttl(c.age_s * 1000),
                output::ttl(c.idle_s * 1000)
            ));
        }
        if found.clients_read && h.connections.is_empty() {
            out.push_str("    conn none named with its client id\n");
        }
    }
    out
}

fn holder_row(h: &Holder) -> Vec<String> {
    let mut r = vec![
        format!("  {}", h.owner),
        h.role.to_owned(),
        format!("x{}", h.count),
    ];
    if !h.read_timeouts_ms.is_empty() {
        let ttls: Vec<String> = h.read_timeouts_ms.iter().map(|t| output::ttl(*t)).collect();
        r.push(format!("timeouts {}", ttls.join(", ")));
    }
    r
}

fn queue_rows(found: &Inspection) -> String {
    let rows: Vec<Vec<String>> = found
        .queue
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let deadline = q
                .timeout_ms
                .map(|t| format!("timeout {}", output::remaining(t)))
                .unwrap_or_else(|| "no deadline".to_owned());
            vec![format!("  {}. {}", i + 1, q.owner), deadline]
        })
        .collect();
    output::table(&rows)
}

/// A semaphore's available permits (and a permit semaphore's permits taken), or a latch's count.
fn synchronizer_rows(found: &Inspection, kind: Kind, count: i64) -> String {
    let mut out = String::new();
    match kind {
        Kind::CountDownLatch => kv(&mut out, "count", &count.to_string()),
        Kind::SemaphoreOrLatch => kv(
            &mut out,
            "value",
            &format!("{count}  (a semaphore's permits or a latch's count: no waiters tell which)"),
        ),
        Kind::RateLimiter => kv(
            &mut out,
            "permits",
            &format!("{count} left in the current window"),
        ),
        _ => kv(&mut out, "permits", &format!("{count} available")),
    }
    if kind == Kind::PermitSemaphore {
        kv(&mut out, "taken", &found.permits.len().to_string());
        let rows: Vec<Vec<String>> = found
            .permits
            .iter()
            .map(|p| {
                let lease = p
                    .lease_ms
                    .map(|t| format!("lease {}", output::remaining(t)))
                    .unwrap_or_else(|| "no lease".to_owned());
                vec![format!("  {}", p.id), lease]
            })
            .collect();
        out.push_str(&output::table(&rows));
    }
    out
}
