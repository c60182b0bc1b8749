//! Observability in one place: an info-level `tracing` span per operation, and metrics through
//! the [`metrics`](https://docs.rs/metrics) facade when the `metrics` feature is on (without it
//! the recording functions are empty and compile away). docs/observability.md shows a
//! Prometheus exporter and an OpenTelemetry pipeline wired to them.
//!
//! # Metrics
//!
//! Call [`describe`] once after installing a recorder: it gives every metric below its unit
//! and help text.
//!
//! | metric | type | unit | labels | what |
//! |---|---|---|---|---|
//! | `redisson_lock_acquire_wait_seconds` | histogram | seconds | `kind`, `outcome` | time from an acquire's call to its end; `outcome`: `acquired` (for a latch: it reached zero), `timeout`, `error`, or `cancelled` (the future was dropped mid-acquire or mid-wait) |
//! | `redisson_lock_hold_seconds` | histogram | seconds | `kind` | time a lock guard or a permit guard (`PermitGuard`) held its grant, recorded when it is released |
//! | `redisson_lock_releases_total` | counter | count | `kind`, `outcome` | releases (a lock's `unlock` or guard release, a semaphore's `release`, a latch's `count_down`); `outcome`: `released`, `still_held` (a re-entrant hold stays), `not_held`, `error` |
//! | `redisson_lock_permits_total` | counter | count | `kind`, `direction` | permits `acquired` and `released` by this process (semaphores and rate limiters) |
//! | `redisson_lock_waiters` | gauge | count | `kind` | waiters parked right now (on pub/sub, or sleeping between tries for the spin lock and the rate limiter) |
//! | `redisson_lock_leases_lost_total` | counter | count | `by`: `watchdog` or `release` | holds found gone while the client believed it held them |
//! | `redisson_lock_renewals_total` | counter | count | | holds renewed by the watchdog |
//! | `redisson_lock_watchdog_lag_seconds` | histogram | seconds | | how late each watchdog tick ran after it was due (a starved runtime shows here first) |
//! | `redisson_lock_renewal_slack_seconds` | histogram | seconds | | lease a lock hold had left when its renewal was confirmed (near zero: about to be lost) |
//! | `redisson_lock_holds_at_risk_total` | counter | count | `reason`: `failed` or `late` | times a watchdog hold (a lock hold or a `PermitGuard`'s permit) went at risk: a renewal failed, or none was confirmed for two renewal periods (counted once until a renewal is confirmed again) |
//! | `redisson_lock_script_errors_total` | counter | count | | lock scripts that failed (connection, server or reply errors) |
//! | `redisson_lock_retries_total` | counter | count | `op` | tries again after a transient failure; `op`: `acquire`, `release`, `settle`, `subscribe`, `give_back`, `write`, `shutdown`, `fencing` |
//! | `redisson_lock_subscriber_reconnects_total` | counter | count | | times the pub/sub subscriber connection was re-established (each wakes every waiter) |
//! | `redisson_lock_replica_sync_failures_total` | counter | count | `command`: `WAIT` or `WAITAOF`, `reason`: `unconfirmed` or `refused` | lock writes no replica (or fsync) confirmed in time, and sync commands the server refused |
//!
//! `kind` is one of the lock kinds (`lock`, `fair`, `spin`, `fenced`, `read`, `write`, ...) or
//! a synchronizer: `semaphore`, `permit_semaphore`, `latch`, `rate_limiter`.
//!
//! # Spans
//!
//! Each operation runs in one `INFO` span named after it: `redisson_lock.acquire`,
//! `redisson_lock.release`, `redisson_lock.unlock`, `redisson_lock.force_unlock`,
//! `redisson_lock.count_down` and `redisson_lock.await` (a latch's wait). Internal steps get no
//! spans of their own. The attributes follow OpenTelemetry's database conventions:
//!
//! | attribute | value |
//! |---|---|
//! | `db.system`, `db.system.name` | `redis` |
//! | `db.operation.name` | the operation: `acquire`, `release`, `unlock`, `force_unlock`, `count_down`, `await` |
//! | `db.redisson.kind` | the object's kind, as the metrics' `kind` label |
//! | `db.redisson.name` | the lock's or synchronizer's name (its Redis key) |
//! | `db.redisson.outcome` | how it ended: as the metrics' `outcome` labels, or `deleted`/`not_locked` for `force_unlock` |
//! | `server.address`, `server.port` | the server, on a standalone deployment (a cluster or Sentinel routes each command itself) |
//! | `error.type`, `otel.status_code` | on failure: the `LockError` variant, and `ERROR` |
//! | `otel.kind` | `client` |

use std::future::Future;
use std::time::{Duration, Instant};

use tracing::field::Empty;
use tracing::{Instrument, Span};

/// Acquire wait-time histogram.
pub const ACQUIRE_WAIT: &str = "redisson_lock_acquire_wait_seconds";
/// Hold-time histogram.
pub const HOLD_TIME: &str = "redisson_lock_hold_seconds";
/// Release counter.
pub const RELEASES: &str = "redisson_lock_releases_total";
/// Permit counter (acquired, released).
pub const PERMITS: &str = "redisson_lock_permits_total";
/// Lost-lease counter.
pub const LEASES_LOST: &str = "redisson_lock_leases_lost_total";
/// Watchdog renewal counter.
pub const RENEWALS: &str = "redisson_lock_renewals_total";
/// Watchdog tick lateness histogram.
pub const WATCHDOG_LAG: &str = "redisson_lock_watchdog_lag_seconds";
/// Lease left at each confirmed renewal.
pub const RENEWAL_SLACK: &str = "redisson_lock_renewal_slack_seconds";
/// At-risk counter (a renewal failed or is late), by reason.
pub const HOLDS_AT_RISK: &str = "redisson_lock_holds_at_risk_total";
/// Script error counter.
pub const SCRIPT_ERRORS: &str = "redisson_lock_script_errors_total";
/// Parked-waiter gauge.
pub const WAITERS: &str = "redisson_lock_waiters";
/// Retry counter, by operation.
pub const RETRIES: &str = "redisson_lock_retries_total";
/// Subscriber reconnect counter.
pub const SUBSCRIBER_RECONNECTS: &str = "redisson_lock_subscriber_reconnects_total";
/// Replica sync failure counter.
pub const REPLICA_SYNC_FAILURES: &str = "redisson_lock_replica_sync_failures_total";

/// Describes every metric of this crate (unit and help text) to the installed recorder. Call it
/// once after installing the recorder; calling it again is harmless. Without the `metrics`
/// feature it does nothing.
///
/// # Examples
///
/// ```
/// // After installing a recorder (for example metrics-exporter-prometheus):
/// redisson_lock::observe::describe();
/// ```
pub fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_histogram!(
            ACQUIRE_WAIT,
            Unit::Seconds,
            "Time from an acquire's call to its end, by kind and outcome"
        );
        describe_histogram!(
            HOLD_TIME,
            Unit::Seconds,
            "Time a lock or permit guard held its grant"
        );
        describe_counter!(
            RELEASES,
            Unit::Count,
            "Releases (unlock, semaphore release, latch count down), by kind and outcome"
        );
        describe_counter!(
            PERMITS,
            Unit::Count,
            "Permits acquired and released by this process, by kind and direction"
        );
        describe_gauge!(WAITERS, Unit::Count, "Waiters parked right now");
        describe_counter!(
            LEASES_LOST,
            Unit::Count,
            "Holds found gone while the client believed it held them"
        );
        describe_counter!(RENEWALS, Unit::Count, "Holds renewed by the watchdog");
        describe_histogram!(
            WATCHDOG_LAG,
            Unit::Seconds,
            "How late each watchdog tick ran after it was due"
        );
        describe_histogram!(
            RENEWAL_SLACK,
            Unit::Seconds,
            "Lease a lock hold had left when its renewal was confirmed"
        );
        describe_counter!(
            HOLDS_AT_RISK,
            Unit::Count,
            "Times a watchdog hold went at risk (a renewal failed or is late), by reason"
        );
        describe_counter!(SCRIPT_ERRORS, Unit::Count, "Lock scripts that failed");
        describe_counter!(
            RETRIES,
            Unit::Count,
            "Tries again after a transient failure, by operation"
        );
        describe_counter!(
            SUBSCRIBER_RECONNECTS,
            Unit::Count,
            "Reconnections of the pub/sub subscriber connection"
        );
        describe_counter!(
            REPLICA_SYNC_FAILURES,
            Unit::Count,
            "Lock writes not confirmed by replicas (or fsync), and refused sync commands"
        );
    }
}

/// One operation on one object, for its span and metrics.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op<'a> {
    /// `acquire`, `release`, `unlock`, `force_unlock`, `count_down`, `await`.
    pub(crate) op: &'static str,
    /// The metrics' `kind` label.
    pub(crate) kind: &'static str,
    /// The object's name.
    pub(crate) name: &'a str,
    /// The server's URL, where one server is known (standalone).
    pub(crate) server: Option<&'a str>,
}

impl<'a> Op<'a> {
    pub(crate) fn new(
        op: &'static str,
        kind: &'static str,
        name: &'a str,
        server: Option<&'a str>,
    ) -> Self {
        Op {
            op,
            kind,
            name,
            server,
        }
    }

    fn span(&self) -> Span {
        // Parsed only when the span is enabled (field values are evaluated then only).
        let server = || self.server.and_then(host_port);
        // A span's name is static: one callsite per operation.
        macro_rules! span {
            ($name:literal) => {
                tracing::info_span!(
                    $name,
                    otel.kind = "client",
                    db.system = "redis",
                    db.system.name = "redis",
                    db.operation.name = self.op,
                    db.redisson.kind = self.kind,
                    db.redisson.name = self.name,
                    db.redisson.outcome = Empty,
                    server.address = server().map(|(h, _)| h),
                    server.port = server().map(|(_, p)| p),
                    error.type = Empty,
                    otel.status_code = Empty,
                )
            };
        }
        match self.op {
            "acquire" => span!("redisson_lock.acquire"),
            "release" => span!("redisson_lock.release"),
            "unlock" => span!("redisson_lock.unlock"),
            "force_unlock" => span!("redisson_lock.force_unlock"),
            "count_down" => span!("redisson_lock.count_down"),
            "await" => span!("redisson_lock.await"),
            _ => span!("redisson_lock.operation"),
        }
    }
}

/// Host and port of a `redis://[user:pass@]host[:port][/db]` URL (port 6379 by default).
fn host_port(url: &str) -> Option<(&str, u16)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let authority = rest.split(['/', '?']).next()?;
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => 6379,
    };
    Some((host, port))
}

/// How an acquire ended: taken, or the wait ran out.
pub(crate) trait Acquired {
    fn acquired(&self) -> bool;
}

impl Acquired for bool {
    fn acquired(&self) -> bool {
        *self
    }
}

impl<T> Acquired for Option<T> {
    fn acquired(&self) -> bool {
        self.is_some()
    }
}

/// The error's class for `error.type`: the variant's name from its debug form.
fn error_type(e: &impl std::fmt::Debug) -> String {
    let text = format!("{e:?}");
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    text[..end].to_owned()
}

/// An operation under way: its span, and what its drop records when the future is dropped
/// before the operation ended (`cancelled`).
struct Running {
    span: Span,
    kind: &'static str,
    acquire: bool,
    start: Instant,
    ended: bool,
}

impl Running {
    fn new(op: &Op<'_>, acquire: bool) -> Running {
        Running {
            span: op.span(),
            kind: op.kind,
            acquire,
            start: Instant::now(),
            ended: false,
        }
    }

    /// The operation ended: `outcome` in its span (and the error, if any).
    fn end<T, E: std::fmt::Debug>(&mut self, r: &Result<T, E>, outcome: &'static str) {
        self.ended = true;
        self.span.record("db.redisson.outcome", outcome);
        if let Err(e) = r {
            self.span.record("error.type", error_type(e));
            self.span.record("otel.status_code", "ERROR");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.span.record("db.redisson.outcome", "cancelled");
        if self.acquire {
            acquire_wait(self.kind, "cancelled", self.start.elapsed());
        }
    }
}

/// Runs an acquisition of `permits` (0 where permits mean nothing, as for a lock) in its span,
/// and records its wait and outcome: `acquired`, `timeout`, `error` or, when the future is
/// dropped first, `cancelled`.
pub(crate) async fn acquire<T: Acquired, E: std::fmt::Debug>(
    op: Op<'_>,
    permits: u64,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let mut running = Running::new(&op, true);
    let r = fut.instrument(running.span.clone()).await;
    let outcome = match &r {
        Ok(v) if v.acquired() => "acquired",
        Ok(_) => "timeout",
        Err(_) => "error",
    };
    running.end(&r, outcome);
    acquire_wait(op.kind, outcome, running.start.elapsed());
    if outcome == "acquired" {
        permits_moved(op.kind, "acquired", permits);
    }
    r
}

/// Runs a release of `permits` (0 for a lock) in its span and counts it by `outcome`
/// (`released`, `still_held`, `not_held`; `error` for a failure).
pub(crate) async fn release<T, E: std::fmt::Debug>(
    op: Op<'_>,
    permits: u64,
    fut: impl Future<Output = Result<T, E>>,
    outcome: impl FnOnce(&T) -> &'static str,
) -> Result<T, E> {
    let mut running = Running::new(&op, false);
    let r = fut.instrument(running.span.clone()).await;
    let outcome = match &r {
        Ok(v) => outcome(v),
        Err(_) => "error",
    };
    running.end(&r, outcome);
    #[cfg(feature = "metrics")]
    metrics::counter!(RELEASES, "kind" => op.kind, "outcome" => outcome).increment(1);
    if outcome == "released" {
        permits_moved(op.kind, "released", permits);
    }
    r
}

/// Runs any other operation in its span, with its `outcome`.
pub(crate) async fn traced<T, E: std::fmt::Debug>(
    op: Op<'_>,
    fut: impl Future<Output = Result<T, E>>,
    outcome: impl FnOnce(&T) -> &'static str,
) -> Result<T, E> {
    let mut running = Running::new(&op, false);
    let r = fut.instrument(running.span.clone()).await;
    let outcome = match &r {
        Ok(v) => outcome(v),
        Err(_) => "error",
    };
    running.end(&r, outcome);
    r
}

/// An acquisition ended (`outcome`: `acquired`, `timeout`, `error` or `cancelled`) after
/// `waited`.
pub(crate) fn acquire_wait(kind: &'static str, outcome: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(ACQUIRE_WAIT, "kind" => kind, "outcome" => outcome)
        .record(waited.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, outcome, waited);
}

fn permits_moved(kind: &'static str, direction: &'static str, permits: u64) {
    #[cfg(feature = "metrics")]
    if permits > 0 {
        metrics::counter!(PERMITS, "kind" => kind, "direction" => direction).increment(permits);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, direction, permits);
}

/// A guard released its grant after holding it for `held`.
pub(crate) fn hold_time(kind: &'static str, held: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(HOLD_TIME, "kind" => kind).record(held.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, held);
}

/// A hold the client believed it had was found gone, `by` the watchdog or a release.
pub(crate) fn lease_lost(by: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(LEASES_LOST, "by" => by).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = by;
}

/// The watchdog renewed `n` holds.
pub(crate) fn renewed(n: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(RENEWALS).increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

/// A watchdog tick ran `late` after it was due.
pub(crate) fn watchdog_lag(late: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(WATCHDOG_LAG).record(late.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = late;
}

/// A renewal was confirmed with `left` of the hold's previous lease to spare.
pub(crate) fn renewal_slack(left: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(RENEWAL_SLACK).record(left.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = left;
}

/// A watchdog hold went at risk: its renewal `failed`, or is `late`.
pub(crate) fn at_risk(reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(HOLDS_AT_RISK, "reason" => reason).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// A lock script failed.
pub(crate) fn script_error() {
    #[cfg(feature = "metrics")]
    metrics::counter!(SCRIPT_ERRORS).increment(1);
}

/// `op` tries again after a transient failure.
pub(crate) fn retry(op: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(RETRIES, "op" => op).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = op;
}

/// The subscriber connection is back after a disconnection.
pub(crate) fn subscriber_reconnected() {
    #[cfg(feature = "metrics")]
    metrics::counter!(SUBSCRIBER_RECONNECTS).increment(1);
}

/// A lock write's `command` (`WAIT`, `WAITAOF`) failed it: `unconfirmed` or `refused`.
pub(crate) fn replica_sync_failed(command: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(REPLICA_SYNC_FAILURES, "command" => command, "reason" => reason).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (command, reason);
}

/// One parked waiter, counted in the gauge while it lives.
#[derive(Debug)]
pub(crate) struct Parked(#[allow(dead_code)] &'static str);

impl Parked {
    pub(crate) fn new(kind: &'static str) -> Parked {
        #[cfg(feature = "metrics")]
        metrics::gauge!(WAITERS, "kind" => kind).increment(1.0);
        Parked(kind)
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!(WAITERS, "kind" => self.0).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_of_urls() {
        assert_eq!(host_port("redis://127.0.0.1/"), Some(("127.0.0.1", 6379)));
        assert_eq!(
            host_port("rediss://u:p@cache.local:6380/2"),
            Some(("cache.local", 6380))
        );
        assert_eq!(host_port("redis://:p@a@h:1"), Some(("h", 1)));
        assert_eq!(host_port("redis://[::1]:7000"), Some(("::1", 7000)));
        assert_eq!(host_port("redis://[::1]"), Some(("::1", 6379)));
        assert_eq!(host_port("redis:///"), None);
        assert_eq!(host_port("redis://h:notaport"), None);
        assert_eq!(host_port("valkey://h?protocol=resp3"), Some(("h", 6379)));
    }

    #[test]
    fn error_types_are_variant_names() {
        #[derive(Debug)]
        #[allow(dead_code)]
        enum E {
            Timeout { waited: u32 },
            Redis(String),
            Closed,
        }
        assert_eq!(error_type(&E::Timeout { waited: 1 }), "Timeout");
        assert_eq!(error_type(&E::Redis("x".into())), "Redis");
        assert_eq!(error_type(&E::Closed), "Closed");
    }
}
