//! Write commands for Redisson's synchronizers, through the crate's public API: a semaphore's
//! permits, a permit-expirable semaphore's permits and one permit by id, a count-down latch,
//! a rate limiter's window.
//!
//! Each reads the key first and refuses another kind (a lock, another synchronizer), shows what
//! is there now and asks (unless `--yes`; no or no input: exit 4, nothing changed), then
//! changes it and writes one audit line naming the value before and after (`change`).

use std::path::PathBuf;

use clap::Subcommand;
use serde::Serialize;

use crate::change::{self, Audit, EXIT_ABORTED};
use crate::inspect::{self, Inspection, Kind};
use crate::output;
use crate::server::Server;
use crate::target::Target;
use crate::{Failure, Result};

/// The flags every write command takes.
#[derive(Debug, clap::Args)]
pub struct Confirm {
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Append the audit line of the change to FILE too (it always goes to stderr).
    #[arg(long, value_name = "FILE", env = "REDISSON_LOCK_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum SemaphoreAction {
    /// Make N permits available: sets a new semaphore; an existing one is drained, then given
    /// N (two steps: a release between them adds to N).
    Set {
        name: String,
        permits: i32,
        #[command(flatten)]
        confirm: Confirm,
    },
    /// Add N permits (a negative N takes them away).
    Add {
        name: String,
        #[arg(allow_negative_numbers = true)]
        permits: i32,
        #[command(flatten)]
        confirm: Confirm,
    },
}

#[derive(Debug, Subcommand)]
pub enum PermitAction {
    /// Set the total number of permits (taken ones included), as Redisson's setPermits.
    Set {
        name: String,
        permits: i32,
        #[command(flatten)]
        confirm: Confirm,
    },
    /// Add N permits (a negative N takes them away).
    Add {
        name: String,
        #[arg(allow_negative_numbers = true)]
        permits: i32,
        #[command(flatten)]
        confirm: Confirm,
    },
    /// Release the permit with this id (32 hex digits, as `inspect` shows it).
    Release {
        name: String,
        id: String,
        #[command(flatten)]
        confirm: Confirm,
    },
}

#[derive(Debug, Subcommand)]
pub enum LatchAction {
    /// Count down by one (at zero, the latch is deleted and its waiters woken).
    CountDown {
        name: String,
        #[command(flatten)]
        confirm: Confirm,
    },
    /// Delete the latch (its waiters are woken).
    Delete {
        name: String,
        #[command(flatten)]
        confirm: Confirm,
    },
}

#[derive(Debug, Subcommand)]
pub enum RateLimiterAction {
    /// Start a fresh window with the same configuration (Redisson's setRate): the permits
    /// taken in the current window are forgotten. OVERALL limiters only.
    Reset {
        name: String,
        #[command(flatten)]
        confirm: Confirm,
    },
    /// Delete the rate limiter (Redisson's delete): its configuration and the OVERALL window;
    /// until it is configured again, clients' acquires fail with a rate-limiter error.
    Delete {
        name: String,
        #[command(flatten)]
        confirm: Confirm,
    },
}

/// The JSON document of every write command (see docs/cli.md).
#[derive(Debug, Serialize)]
struct Outcome<'a> {
    /// Where: the server and topology.
    server: &'a Server,
    name: &'a str,
    kind: &'static str,
    action: &'static str,
    /// `false` when the prompt was answered no (nothing changed).
    confirmed: bool,
    /// Whether something changed.
    changed: bool,
    /// Before the change: the count read (as `count`); `null`: no such key.
    before: Option<i64>,
    /// After the change: available permits (semaphores, rate limiter), or the latch's count.
    count: Option<i64>,
}

/// One write command on one key: what it is, and how it reports.
struct Write<'a> {
    target: &'a Target,
    json: bool,
    name: &'a str,
    /// The synchronizer's kind in the JSON (`semaphore`, `permit_semaphore`, ...).
    kind: &'static str,
    action: &'static str,
    confirm: &'a Confirm,
}

impl Write<'_> {
    /// Reads the key; another kind than `accepted` is refused (exit 1), nothing changed.
    async fn look(&self, accepted: &[Option<Kind>]) -> Result<Inspection> {
        let found = inspect::read(self.target, self.name, true).await?;
        if accepted.contains(&found.kind) {
            return Ok(found);
        }
        let is = match found.kind {
            Some(k) if k.is_lock() => format!("{} lock", k.as_str()),
            Some(Kind::Unknown) => format!(
                "{} that is no synchronizer",
                found.redis_type.as_deref().unwrap_or("key")
            ),
            Some(k) => k.as_str().replace('_', " "),
            None => "missing key".to_owned(),
        };
        Err(Failure(format!(
            "`{}` is a {is}, not a {}: {} leaves it alone",
            self.name,
            self.kind.replace('_', " "),
            self.command()
        )))
    }

    /// `semaphore set`, ...: the command's words.
    fn command(&self) -> String {
        let family = match self.kind {
            "permit_semaphore" => "permit-semaphore",
            "count_down_latch" => "latch",
            "rate_limiter" => "rate-limiter",
            other => other,
        };
        format!("{family} {}", self.action.replace('_', "-"))
    }

    /// Asks, showing `now` (unless `--yes`); `false`: answered no, reported (exit 4).
    fn ask(&self, now: &str, question: &str, before: Option<i64>) -> Result<bool> {
        let shown = [format!(
            "{} `{}`: {now}",
            self.kind.replace('_', " "),
            self.name
        )];
        if self.confirm.yes || change::confirm(self.target, &shown, question)? {
            return Ok(true);
        }
        self.report(false, false, before, before, "aborted: nothing changed")?;
        Ok(false)
    }

    /// The audit line of a change: what it was before and what it is now.
    fn audit(&self, outcome: String, from: String, to: String) -> Result<()> {
        let command = self.command();
        let change = Audit {
            command: &command,
            target: self.name,
            kind: self.kind,
            details: vec![("outcome", outcome), ("from", from), ("to", to)],
        };
        change::audit(self.target, self.confirm.audit_log.as_deref(), change)
    }

    fn report(
        &self,
        confirmed: bool,
        changed: bool,
        before: Option<i64>,
        count: Option<i64>,
        message: &str,
    ) -> Result<()> {
        if self.json {
            output::print_json(&Outcome {
                server: &self.target.server,
                name: self.name,
                kind: self.kind,
                action: self.action,
                confirmed,
                changed,
                before,
                count,
            })
        } else {
            output::line(&format!("{}: {message}", self.name))
        }
    }
}

/// `N permit(s) available`, or `none` for a missing key.
fn permits(count: Option<i64>) -> String {
    count.map_or_else(|| "none".to_owned(), |c| format!("{c} permit(s) available"))
}

/// `semaphore set|add`.
pub async fn semaphore(target: &Target, action: SemaphoreAction, json: bool) -> Result<u8> {
    let (name, permits_arg, confirm, action) = match &action {
        SemaphoreAction::Set {
            name,
            permits,
            confirm,
        } => (name, *permits, confirm, "set"),
        SemaphoreAction::Add {
            name,
            permits,
            confirm,
        } => (name, *permits, confirm, "add"),
    };
    let w = Write {
        target,
        json,
        name,
        kind: "semaphore",
        action,
        confirm,
    };
    let found = w
        .look(&[None, Some(Kind::Semaphore), Some(Kind::SemaphoreOrLatch)])
        .await?;
    let before = found.count;
    let question = if action == "set" {
        format!("set it to {permits_arg} permit(s) available?")
    } else {
        format!("add {permits_arg} permit(s)?")
    };
    if !w.ask(&permits(before), &question, before)? {
        return Ok(EXIT_ABORTED);
    }
    let sem = target.client.get_semaphore(name);
    if action == "set" {
        if !sem.try_set_permits(permits_arg).await? {
            sem.drain_permits().await?;
            sem.add_permits(permits_arg).await?;
        }
    } else {
        sem.add_permits(permits_arg).await?;
    }
    let count = sem.available_permits().await?;
    let changed = before != Some(count) || (action == "add" && permits_arg != 0);
    if changed {
        let outcome = format!("{action} {permits_arg}");
        w.audit(outcome, permits(before), permits(Some(count)))?;
    }
    w.report(
        true,
        changed,
        before,
        Some(count),
        &format!("{count} permit(s) available"),
    )?;
    Ok(0)
}

/// `permit-semaphore set|add|release`.
pub async fn permit_semaphore(target: &Target, action: PermitAction, json: bool) -> Result<u8> {
    let (name, confirm, verb) = match &action {
        PermitAction::Set { name, confirm, .. } => (name, confirm, "set"),
        PermitAction::Add { name, confirm, .. } => (name, confirm, "add"),
        PermitAction::Release { name, confirm, .. } => (name, confirm, "release"),
    };
    let w = Write {
        target,
        json,
        name,
        kind: "permit_semaphore",
        action: verb,
        confirm,
    };
    let found = w
        .look(&[
            None,
            Some(Kind::PermitSemaphore),
            Some(Kind::Semaphore),
            Some(Kind::SemaphoreOrLatch),
        ])
        .await?;
    let before = found.count;
    let now = format!("{}, {} taken", permits(before), found.permits.len());
    let pes = target.client.get_permit_expirable_semaphore(name);
    let (question, outcome) = match &action {
        PermitAction::Set { permits: n, .. } => (
            format!("set the total to {n} permit(s), taken ones included?"),
            format!("set {n}"),
        ),
        PermitAction::Add { permits: n, .. } => (format!("add {n} permit(s)?"), format!("add {n}")),
        PermitAction::Release { id, .. } => {
            let id =
                redisson_lock::PermitId::parse(id).map_err(|e| Failure(format!("`{id}`: {e}")))?;
            let taken = found.permits.iter().find(|p| p.id == id.as_str());
            if taken.is_none() && found.permits.len() < 1000 {
                let message = format!(
                    "no permit {} (released or expired already); {}",
                    id.as_str(),
                    permits(before)
                );
                w.report(true, false, before, before, &message)?;
                return Ok(0);
            }
            let lease = match taken {
                Some(p) => p.lease_ms.map_or("no lease".to_owned(), output::remaining),
                None => "not among the first 1,000 read".to_owned(),
            };
            (
                format!("release permit {} (lease {lease})?", id.as_str()),
                format!("release {}", id.as_str()),
            )
        }
    };
    if !w.ask(&now, &question, before)? {
        return Ok(EXIT_ABORTED);
    }
    let (changed, message) = match &action {
        PermitAction::Set { permits: n, .. } => {
            pes.set_permits(*n).await?;
            (true, String::new())
        }
        PermitAction::Add { permits: n, .. } => {
            pes.add_permits(*n).await?;
            (*n != 0, String::new())
        }
        PermitAction::Release { id, .. } => {
            let id =
                redisson_lock::PermitId::parse(id).map_err(|e| Failure(format!("`{id}`: {e}")))?;
            if pes.try_release(&id).await? {
                (true, format!("released permit {}; ", id.as_str()))
            } else {
                let gone = format!("no permit {} (released or expired already); ", id.as_str());
                (false, gone)
            }
        }
    };
    let count = pes.available_permits().await?;
    if changed {
        w.audit(outcome, now, permits(Some(count)))?;
    }
    let message = format!("{message}{count} permit(s) available");
    w.report(true, changed, before, Some(count), &message)?;
    Ok(0)
}

/// `latch count-down|delete`.
pub async fn latch(target: &Target, action: LatchAction, json: bool) -> Result<u8> {
    let (name, confirm, verb) = match &action {
        LatchAction::CountDown { name, confirm } => (name, confirm, "count_down"),
        LatchAction::Delete { name, confirm } => (name, confirm, "delete"),
    };
    let w = Write {
        target,
        json,
        name,
        kind: "count_down_latch",
        action: verb,
        confirm,
    };
    let found = w
        .look(&[
            None,
            Some(Kind::CountDownLatch),
            Some(Kind::SemaphoreOrLatch),
        ])
        .await?;
    let before = found.count;
    let count = |c: Option<i64>| c.map_or_else(|| "none".to_owned(), |c| format!("count {c}"));
    let latch = target.client.get_count_down_latch(name);
    if verb == "delete" {
        if before.is_none() {
            w.report(true, false, None, None, "no such latch")?;
            return Ok(0);
        }
        if !w.ask(&count(before), "delete it (its waiters are woken)?", before)? {
            return Ok(EXIT_ABORTED);
        }
        let deleted = latch.delete().await?;
        if deleted {
            w.audit("deleted".into(), count(before), "none".into())?;
        }
        let message = if deleted {
            "deleted (waiters woken)"
        } else {
            "no such latch"
        };
        w.report(true, deleted, before, None, message)?;
        return Ok(0);
    }
    let Some(b) = before.filter(|b| *b > 0) else {
        w.report(
            true,
            false,
            before,
            Some(0),
            "count 0: nothing to count down",
        )?;
        return Ok(0);
    };
    let question = if b == 1 {
        "count it down to 0 (the latch is deleted, its waiters woken)?".to_owned()
    } else {
        format!("count it down to {}?", b - 1)
    };
    if !w.ask(&count(before), &question, before)? {
        return Ok(EXIT_ABORTED);
    }
    latch.count_down().await?;
    let after = latch.get_count().await?;
    w.audit("count down".into(), count(before), count(Some(after)))?;
    w.report(true, true, before, Some(after), &format!("count {after}"))?;
    Ok(0)
}

/// `rate-limiter reset|delete`.
pub async fn rate_limiter(target: &Target, action: RateLimiterAction, json: bool) -> Result<u8> {
    let (name, confirm, verb) = match &action {
        RateLimiterAction::Reset { name, confirm } => (name, confirm, "reset"),
        RateLimiterAction::Delete { name, confirm } => (name, confirm, "delete"),
    };
    let w = Write {
        target,
        json,
        name,
        kind: "rate_limiter",
        action: verb,
        confirm,
    };
    let found = w.look(&[None, Some(Kind::RateLimiter)]).await?;
    let before = found.count;
    let now = match &found.value {
        Some(v) => format!(
            "rate {} per {} ms, {}, {} permit(s) left",
            v["rate"],
            v["interval_ms"],
            v["type"].as_str().unwrap_or("?"),
            before.map_or("-".to_owned(), |c| c.to_string())
        ),
        None => "none".to_owned(),
    };
    let limiter = target.client.get_rate_limiter(name);
    if verb == "delete" {
        if found.kind.is_none() {
            w.report(true, false, None, None, "no such rate limiter")?;
            return Ok(0);
        }
        let question = "delete it (clients' acquires fail until it is configured again)?";
        if !w.ask(&now, question, before)? {
            return Ok(EXIT_ABORTED);
        }
        let deleted = limiter.delete().await?;
        if deleted {
            w.audit("deleted".into(), now, "none".into())?;
        }
        let message = if deleted {
            "deleted"
        } else {
            "no such rate limiter"
        };
        w.report(true, deleted, before, None, message)?;
        return Ok(0);
    }
    if found.kind.is_none() {
        return Err(Failure(format!(
            "`{name}` is not a configured rate limiter"
        )));
    }
    let per_client = found
        .value
        .as_ref()
        .is_some_and(|v| v["type"] == "PER_CLIENT");
    if per_client {
        return Err(Failure(format!(
            "`{name}` is a PER_CLIENT rate limiter: each client's window is its own, and a reset \
             from here would start only this tool's"
        )));
    }
    let question = "start a fresh window (the permits taken in this one are forgotten)?";
    if !w.ask(&now, question, before)? {
        return Ok(EXIT_ABORTED);
    }
    let Some(config) = limiter.config().await? else {
        return Err(Failure(format!(
            "`{name}` is not a configured rate limiter"
        )));
    };
    limiter.set_rate(config).await?;
    let count = limiter.available_permits().await?;
    w.audit("reset".into(), now, permits(Some(count)))?;
    let message = format!("a fresh window: {count} permit(s) available");
    w.report(true, true, before, Some(count), &message)?;
    Ok(0)
}
