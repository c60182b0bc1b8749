//! `force-unlock NAME`: Redisson's `forceUnlock` for the detected kind, through the crate's own
//! `Lock::force_unlock_held_by` (the same delete and the same message on the same channel), so
//! only the holders the operator was shown are removed; one audit line per change.

use std::path::Path;

use redisson_lock::ForceUnlock;

use serde::Serialize;

use crate::change::{self, Audit, EXIT_ABORTED};
use crate::inspect::{self, Inspection, Kind};
use crate::output;
use crate::server::Server;
use crate::target::Target;
use crate::{Failure, Result};
/// `force-unlock`: the lock is held by others than the holders shown (or than `--owner`):
/// nothing changed.
pub const EXIT_CHANGED: u8 = 5;

/// The JSON document of `force-unlock` (see docs/cli.md).
#[derive(Debug, Serialize)]
struct Outcome<'a> {
    /// Where: the server and topology.
    server: &'a Server,
    name: &'a str,
    kind: Option<Kind>,
    /// Whether a lock was deleted (its waiters were sent the unlock message).
    unlocked: bool,
    /// `false` when the operator answered no at the prompt.
    confirmed: bool,
    /// The holders (hash fields) the operator was shown, and the only ones it may remove.
    holders: &'a [String],
    /// Whether others than `holders` held the lock at the delete (nothing changed then).
    changed: bool,
}

/// What `force-unlock` was asked for.
pub struct Request<'a> {
    pub name: &'a str,
    pub yes: bool,
    /// `--owner FIELD`: remove the lock only while this holder has it.
    pub owner: Option<&'a str>,
    /// `--audit-log FILE`: where audit lines are appended, besides stderr.
    pub audit_log: Option<&'a Path>,
    pub json: bool,
}

/// `force-unlock NAME [--owner FIELD] [--yes] [--audit-log FILE]`; `Ok`: the exit code.
pub async fn run(target: &Target, req: &Request<'_>) -> Result<u8> {
    let name = req.name;
    let found = inspect::inspect(target, name).await?;
    let report = |kind, unlocked, confirmed, holders: &[String], changed, message: &str| {
        let outcome = Outcome {
            server: &target.server,
            name,
            kind,
            unlocked,
            confirmed,
            holders,
            changed,
        };
        report(outcome, req.json, message)
    };
    let Some(kind) = found.kind else {
        report(
            None,
            false,
            true,
            &[],
            false,
            "not locked: nothing to unlock",
        )?;
        return Ok(0);
    };
    if !kind.is_lock() {
        return Err(Failure(if kind == Kind::Unknown {
            format!(
                "`{name}` is a {} that does not look like a lock; left alone",
                found.redis_type.as_deref().unwrap_or("key")
            )
        } else {
            format!(
                "`{name}` is a {}, not a lock: force-unlock leaves it alone",
                kind.as_str().replace('_', " ")
            )
        }));
    }
    let fields = holder_fields(target, name).await?;
    if let Some(owner) = req.owner {
        if !fields.iter().any(|f| f == owner) {
            let message = format!(
                "not held by {owner} (held by {}): nothing changed",
                fields.join(", ")
            );
            report(Some(kind), false, true, &fields, true, &message)?;
            return Ok(EXIT_CHANGED);
        }
    }
    if !req.yes && !confirm(target, &found, &fields)? {
        report(
            Some(kind),
            false,
            false,
            &fields,
            false,
            "aborted: nothing changed",
        )?;
        return Ok(EXIT_ABORTED);
    }
    let (outcome, code, message) = match force_unlock(target, &found, kind, &fields).await? {
        ForceUnlock::Deleted => ("removed", 0, "unlocked (waiters notified)"),
        ForceUnlock::HeldByOthers => (
            "refused: held by others now",
            EXIT_CHANGED,
            "held by others than the holders shown now: nothing changed",
        ),
        _ => (
            "nothing: released meanwhile",
            0,
            "nothing to unlock (it was released meanwhile)",
        ),
    };
    let deleted = code == 0 && outcome == "removed";
    if deleted || code == EXIT_CHANGED {
        audit(target, req, kind, &found, &fields, outcome)?;
    }
    report(
        Some(kind),
        deleted,
        true,
        &fields,
        code == EXIT_CHANGED,
        message,
    )?;
    Ok(code)
}

/// The lock's holders as hash fields (`<uuid>:<id>`, a writer's with `:write`; not `mode`).
async fn holder_fields(target: &Target, name: &str) -> Result<Vec<String>> {
    let mut conn = target.conn();
    let fields: Vec<String> = redis::cmd("HKEYS").arg(name).query_async(&mut conn).await?;
    let mut fields: Vec<String> = fields.into_iter().filter(|f| f != "mode").collect();
    fields.sort();
    Ok(fields)
}

/// The audit line of a removal (or of a refusal because the holders changed): what was
/// removed, and from what (the holders shown, with their roles and counts, and the TTL).
fn audit(
    target: &Target,
    req: &Request<'_>,
    kind: Kind,
    found: &Inspection,
    fields: &[String],
    outcome: &str,
) -> Result<()> {
    let holders: Vec<String> = found
        .holders
        .iter()
        .map(|h| format!("{}({} x{})", h.owner, h.role, h.count))
        .collect();
    let change = Audit {
        command: "force-unlock",
        target: req.name,
        kind: kind.as_str(),
        details: vec![
            ("outcome", outcome.to_owned()),
            ("fields", format!("[{}]", fields.join(","))),
            ("holders", format!("[{}]", holders.join(","))),
            ("ttl_ms", found.ttl_ms.unwrap_or(-2).to_string()),
        ],
    };
    change::audit(target, req.audit_log, change)
}

/// The library's force-unlock of `kind` (for a read-write lock, the side its `mode` names),
/// only while the holders `fields` still hold it.
async fn force_unlock(
    target: &Target,
    found: &Inspection,
    kind: Kind,
    fields: &[String],
) -> Result<ForceUnlock> {
    let client = &target.client;
    let name = found.name.as_str();
    Ok(match kind {
        Kind::Reentrant => client.get_lock(name).force_unlock_held_by(fields).await?,
        Kind::Fair => {
            client
                .get_fair_lock(name)
                .force_unlock_held_by(fields)
                .await?
        }
        Kind::Fenced => {
            client
                .get_fenced_lock(name)
                .force_unlock_held_by(fields)
                .await?
        }
        Kind::ReadWrite => {
            let rw = client.get_read_write_lock(name);
            match found.mode.as_deref() {
                Some("write") => rw.write_lock().force_unlock_held_by(fields).await?,
                _ => rw.read_lock().force_unlock_held_by(fields).await?,
            }
        }
        Kind::PermitSemaphore
        | Kind::Semaphore
        | Kind::CountDownLatch
        | Kind::SemaphoreOrLatch
        | Kind::RateLimiter
        | Kind::Unknown => ForceUnlock::NotLocked,
    })
}

/// Shows the server and each holder (field, hold count, the key's TTL, its connections when
/// known) on stderr, asks `y/N`, reads the answer from stdin (end of input is no).
fn confirm(target: &Target, found: &Inspection, fields: &[String]) -> Result<bool> {
    let kind = found.kind.map(Kind::as_str).unwrap_or("lock");
    let ttl = match found.ttl_ms {
        Some(ms) if ms >= 0 => format!("{ms} ms left"),
        Some(-1) => "no expiry".to_owned(),
        _ => "gone".to_owned(),
    };
    let mut shown = vec![format!("{kind} lock `{}` ({ttl}), held by:", found.name)];
    for h in &found.holders {
        let conn = match h.connections.first() {
            Some(c) => format!("conn {} {}", c.addr, c.name),
            None => "(no connection named with its client id)".to_owned(),
        };
        shown.push(format!("  {} {} x{}  {conn}", h.owner, h.role, h.count));
    }
    let question = format!(
        "force-unlock it, only while these {} holder(s) still hold it?",
        fields.len()
    );
    change::confirm(target, &shown, &question)
}

fn report(outcome: Outcome<'_>, json: bool, message: &str) -> Result<()> {
    if json {
        output::print_json(&outcome)
    } else {
        output::line(&format!("{}: {message}", outcome.name))
    }
}
