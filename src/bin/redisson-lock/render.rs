//! The human format of `inspect`: aligned `key  value` rows, holders and queue indented.

use crate::inspect::{Inspection, Kind};
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
            kv(&mut out, "lock", &found.name);
            kv(&mut out, "kind", kind.as_str());
            if kind == Kind::Unknown {
                kv(&mut out, "type", found.redis_type.as_deref().unwrap_or("?"));
            }
            kv(&mut out, "ttl", &output::opt_ttl(found.ttl_ms));
            if let Some(mode) = &found.mode {
                kv(&mut out, "mode", mode);
            }
            if kind != Kind::Unknown {
                kv(&mut out, "holders", &found.holders.len().to_string());
                out.push_str(&holder_rows(found));
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
    let rows: Vec<Vec<String>> = found
        .holders
        .iter()
        .map(|h| {
            let mut r = vec![
                format!("  {}", h.owner),
                h.role.to_owned(),
                format!("x{}", h.count),
            ];
            if !h.read_timeouts_ms.is_empty() {
                let ttls: Vec<String> =
                    h.read_timeouts_ms.iter().map(|t| output::ttl(*t)).collect();
                r.push(format!("timeouts {}", ttls.join(", ")));
            }
            r
        })
        .collect();
    output::table(&rows)
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
