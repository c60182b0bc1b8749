//! `force-unlock NAME`: Redisson's `forceUnlock` for the detected kind, through the crate's own
//! `Lock::force_unlock` (the same delete and the same message on the same channel).

use std::io::{BufRead, Write};

use serde::Serialize;

use crate::inspect::{self, Inspection, Kind};
use crate::output;
use crate::target::Target;
use crate::{Failure, Result};

/// The JSON document of `force-unlock` (see docs/cli.md).
#[derive(Debug, Serialize)]
struct Outcome<'a> {
    name: &'a str,
    kind: Option<Kind>,
    /// Whether a lock was deleted (its waiters were sent the unlock message).
    unlocked: bool,
    /// `false` when the operator answered no at the prompt.
    confirmed: bool,
}

/// `force-unlock NAME [--yes]`.
pub async fn run(target: &Target, name: &str, yes: bool, json: bool) -> Result<()> {
    let found = inspect::read(target, name, false).await?;
    let Some(kind) = found.kind else {
        return report(
            name,
            None,
            false,
            true,
            json,
            "not locked: nothing to unlock",
        );
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
    if !yes && !confirm(&found)? {
        return report(
            name,
            Some(kind),
            false,
            false,
            json,
            "aborted: nothing changed",
        );
    }
    let unlocked = force_unlock(target, &found, kind).await?;
    let message = if unlocked {
        "unlocked (waiters notified)"
    } else {
        "nothing to unlock (it was released meanwhile)"
    };
    report(name, Some(kind), unlocked, true, json, message)
}

/// The library's force-unlock of `kind`; for a read-write lock, the side its `mode` names.
async fn force_unlock(target: &Target, found: &Inspection, kind: Kind) -> Result<bool> {
    let client = &target.client;
    let name = found.name.as_str();
    Ok(match kind {
        Kind::Reentrant => client.get_lock(name).force_unlock().await?,
        Kind::Fair => client.get_fair_lock(name).force_unlock().await?,
        Kind::Fenced => client.get_fenced_lock(name).force_unlock().await?,
        Kind::ReadWrite => {
            let rw = client.get_read_write_lock(name);
            match found.mode.as_deref() {
                Some("write") => rw.write_lock().force_unlock().await?,
                _ => rw.read_lock().force_unlock().await?,
            }
        }
        Kind::PermitSemaphore
        | Kind::Semaphore
        | Kind::CountDownLatch
        | Kind::SemaphoreOrLatch
        | Kind::RateLimiter
        | Kind::Unknown => false,
    })
}

/// Asks `y/N` on stderr, reads the answer from stdin (end of input is no).
fn confirm(found: &Inspection) -> Result<bool> {
    let kind = found.kind.map(Kind::as_str).unwrap_or("lock");
    eprint!(
        "force-unlock {kind} lock `{}` held by {} owner(s)? [y/N] ",
        found.name,
        found.holders.len()
    );
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let answer = answer.trim().to_ascii_lowercase();
    Ok(answer == "y" || answer == "yes")
}

fn report(
    name: &str,
    kind: Option<Kind>,
    unlocked: bool,
    confirmed: bool,
    json: bool,
    message: &str,
) -> Result<()> {
    if json {
        output::print_json(&Outcome {
            name,
            kind,
            unlocked,
            confirmed,
        })
    } else {
        println!("{name}: {message}");
        Ok(())
    }
}
