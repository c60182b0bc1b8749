//! Write commands for Redisson's synchronizers, through the crate's public API: a semaphore's
//! permits, a permit-expirable semaphore's permits and one permit by id, a count-down latch,
//! a rate limiter's window.

use clap::Subcommand;
use serde::Serialize;

use crate::output;
use crate::server::Server;
use crate::target::Target;
use crate::{Failure, Result};

#[derive(Debug, Subcommand)]
pub enum SemaphoreAction {
    /// Make N permits available: sets a new semaphore; an existing one is drained, then given
    /// N (two steps: a release between them adds to N).
    Set { name: String, permits: i32 },
    /// Add N permits (a negative N takes them away).
    Add {
        name: String,
        #[arg(allow_negative_numbers = true)]
        permits: i32,
    },
}

#[derive(Debug, Subcommand)]
pub enum PermitAction {
    /// Set the total number of permits (taken ones included), as Redisson's setPermits.
    Set { name: String, permits: i32 },
    /// Add N permits (a negative N takes them away).
    Add {
        name: String,
        #[arg(allow_negative_numbers = true)]
        permits: i32,
    },
    /// Release the permit with this id (32 hex digits, as `inspect` shows it).
    Release { name: String, id: String },
}

#[derive(Debug, Subcommand)]
pub enum LatchAction {
    /// Count down by one (at zero, the latch is deleted and its waiters woken).
    CountDown { name: String },
    /// Delete the latch (its waiters are woken).
    Delete { name: String },
}

#[derive(Debug, Subcommand)]
pub enum RateLimiterAction {
    /// Start a fresh window with the same configuration (Redisson's setRate): the permits
    /// taken in the current window are forgotten. OVERALL limiters only.
    Reset { name: String },
    /// Delete the rate limiter (Redisson's delete): its configuration and the OVERALL window;
    /// until it is configured again, clients' acquires fail with a rate-limiter error.
    Delete { name: String },
}

/// The JSON document of every write command (see docs/cli.md).
#[derive(Debug, Serialize)]
struct Outcome<'a> {
    /// Where: the server and topology.
    server: &'a Server,
    name: &'a str,
    kind: &'static str,
    action: &'static str,
    /// Whether something changed.
    changed: bool,
    /// After the change: available permits (semaphores, rate limiter), or the latch's count.
    count: Option<i64>,
}

fn report(outcome: Outcome<'_>, json: bool, message: &str) -> Result<u8> {
    if json {
        output::print_json(&outcome)?;
    } else {
        println!("{}: {message}", outcome.name);
    }
    Ok(0)
}

/// `semaphore set|add`.
pub async fn semaphore(target: &Target, action: SemaphoreAction, json: bool) -> Result<u8> {
    let (name, action, changed) = match action {
        SemaphoreAction::Set { name, permits } => {
            let sem = target.client.get_semaphore(&name);
            if !sem.try_set_permits(permits).await? {
                sem.drain_permits().await?;
                sem.add_permits(permits).await?;
            }
            (name, "set", true)
        }
        SemaphoreAction::Add { name, permits } => {
            target
                .client
                .get_semaphore(&name)
                .add_permits(permits)
                .await?;
            (name, "add", permits != 0)
        }
    };
    let count = target
        .client
        .get_semaphore(&name)
        .available_permits()
        .await?;
    let outcome = Outcome {
        server: &target.server,
        name: &name,
        kind: "semaphore",
        action,
        changed,
        count: Some(count),
    };
    report(outcome, json, &format!("{count} permit(s) available"))
}

/// `permit-semaphore set|add|release`.
pub async fn permit_semaphore(target: &Target, action: PermitAction, json: bool) -> Result<u8> {
    let (name, action, changed, message) = match action {
        PermitAction::Set { name, permits } => {
            let pes = target.client.get_permit_expirable_semaphore(&name);
            pes.set_permits(permits).await?;
            (name, "set", true, String::new())
        }
        PermitAction::Add { name, permits } => {
            let pes = target.client.get_permit_expirable_semaphore(&name);
            pes.add_permits(permits).await?;
            (name, "add", permits != 0, String::new())
        }
        PermitAction::Release { name, id } => {
            let id =
                redisson_lock::PermitId::parse(&id).map_err(|e| Failure(format!("`{id}`: {e}")))?;
            let pes = target.client.get_permit_expirable_semaphore(&name);
            let released = pes.try_release(&id).await?;
            let message = if released {
                format!("released permit {}; ", id.as_str())
            } else {
                format!("no permit {} (released or expired already); ", id.as_str())
            };
            (name, "release", released, message)
        }
    };
    let count = target
        .client
        .get_permit_expirable_semaphore(&name)
        .available_permits()
        .await?;
    let outcome = Outcome {
        server: &target.server,
        name: &name,
        kind: "permit_semaphore",
        action,
        changed,
        count: Some(count),
    };
    report(
        outcome,
        json,
        &format!("{message}{count} permit(s) available"),
    )
}

/// `latch count-down|delete`.
pub async fn latch(target: &Target, action: LatchAction, json: bool) -> Result<u8> {
    match action {
        LatchAction::CountDown { name } => {
            let latch = target.client.get_count_down_latch(&name);
            let before = latch.get_count().await?;
            latch.count_down().await?;
            let count = latch.get_count().await?;
            let outcome = Outcome {
                server: &target.server,
                name: &name,
                kind: "count_down_latch",
                action: "count_down",
                changed: before > 0,
                count: Some(count),
            };
            report(outcome, json, &format!("count {count}"))
        }
        LatchAction::Delete { name } => {
            let deleted = target.client.get_count_down_latch(&name).delete().await?;
            let outcome = Outcome {
                server: &target.server,
                name: &name,
                kind: "count_down_latch",
                action: "delete",
                changed: deleted,
                count: None,
            };
            let message = if deleted {
                "deleted (waiters woken)"
            } else {
                "no such latch"
            };
            report(outcome, json, message)
        }
    }
}

/// `rate-limiter reset|delete`.
pub async fn rate_limiter(target: &Target, action: RateLimiterAction, json: bool) -> Result<u8> {
    let name = match action {
        RateLimiterAction::Reset { name } => name,
        RateLimiterAction::Delete { name } => {
            let deleted = target.client.get_rate_limiter(&name).delete().await?;
            let outcome = Outcome {
                server: &target.server,
                name: &name,
                kind: "rate_limiter",
                action: "delete",
                changed: deleted,
                count: None,
            };
            let message = if deleted {
                "deleted"
            } else {
                "no such rate limiter"
            };
            return report(outcome, json, message);
        }
    };
    let limiter = target.client.get_rate_limiter(&name);
    let Some(config) = limiter.config().await? else {
        return Err(Failure(format!(
            "`{name}` is not a configured rate limiter"
        )));
    };
    if config.rate_type != redisson_lock::RateType::Overall {
        return Err(Failure(format!(
            "`{name}` is a PER_CLIENT rate limiter: each client's window is its own, and a reset \
             from here would start only this tool's"
        )));
    }
    limiter.set_rate(config).await?;
    let count = limiter.available_permits().await?;
    let outcome = Outcome {
        server: &target.server,
        name: &name,
        kind: "rate_limiter",
        action: "reset",
        changed: true,
        count: Some(count),
    };
    report(
        outcome,
        json,
        &format!("a fresh window: {count} permit(s) available"),
    )
}
