//! The human format of `inspect`: aligned `key  value` rows, holders and queue indented.

use crate::inspect::{Inspection, Kind};
use crate::output;

/// The human format of an inspection.
pub fn inspection(found: &Inspection) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |k: &str, v: String| rows.push(vec![k.to_owned(), v]);
    match found.kind {
        None => row("lock", format!("{}: not locked", found.name)),
        Some(kind) => {
            row("lock", found.name.clone());
            row("kind", kind.as_str().to_owned());
            if let Some(t) = &found.redis_type {
                if kind == Kind::Unknown {
                    row("type", t.clone());
                }
            }
            row("ttl", output::opt_ttl(found.ttl_ms));
            if let Some(mode) = &found.mode {
                row("mode", mode.clone());
            }
            if kind != Kind::Unknown {
                row("holders", found.holders.len().to_string());
            }
        }
    }
    let mut out = output::table(&rows);
    out.push_str(&holder_rows(found));
    let mut rows: Vec<Vec<String>> = Vec::new();
    if found.kind == Some(Kind::Fair) {
        rows.push(vec!["queue".into(), found.queue.len().to_string()]);
    }
    let mut tail = output::table(&rows);
    tail.push_str(&queue_rows(found));
    let mut rows: Vec<Vec<String>> = Vec::new();
    if let Some(token) = found.token {
        rows.push(vec!["token".into(), token.to_string()]);
    }
    if let Some(v) = &found.value {
        rows.push(vec!["value".into(), v.to_string()]);
    }
    if !found.channels.is_empty() {
        rows.push(vec![
            "waiters".into(),
            format!(
                "{}  (subscribers of {})",
                found.waiters,
                found.channels.join(", ")
            ),
        ]);
    }
    tail.push_str(&output::table(&rows));
    out + &tail
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
