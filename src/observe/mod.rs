//! Observability in one place: `tracing` spans (an internal span per operation, a child span
//! for the wait for a release, a client span per Redis round trip), and metrics through the
//! [`metrics`](https://docs.rs/metrics) facade when the `metrics` feature is on (without it
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
//! | `redisson_lock_hold_seconds` | histogram | seconds | `kind` | time a lock guard, a `MultiLockGuard` or a permit guard (`PermitGuard`) held its grant, recorded when it is released |
//! | `redisson_lock_holds` | gauge | count | `kind` | lock holds this process holds now (one per lock and owner, however often re-entered); updated on each watchdog tick |
//! | `redisson_lock_oldest_hold_seconds` | gauge | seconds | `kind` | age of the oldest of those holds (0 when none); updated on each watchdog tick |
//! | `redisson_lock_releases_total` | counter | count | `kind`, `outcome` | releases (a lock's `unlock` or guard release, a semaphore's `release`, a latch's `count_down`); `outcome`: `released`, `still_held` (a re-entrant hold stays), `not_held`, `error` |
//! | `redisson_lock_permits_total` | counter | count | `kind`, `direction` | permits `acquired` and `released` by this process (semaphores and rate limiters) |
//! | `redisson_lock_waiters` | gauge | count | `kind` | waiters parked right now (on pub/sub, or sleeping between tries for the spin lock and the rate limiter) |
//! | `redisson_lock_leases_lost_total` | counter | count | `kind`, `by`: `watchdog` or `release` | holds found gone while the client believed it held them |
//! | `redisson_lock_renewals_total` | counter | count | `kind` | holds renewed by the watchdog |
//! | `redisson_lock_watchdog_lag_seconds` | histogram | seconds | | how late each watchdog tick ran after it was due (a starved runtime shows here first; a tick is the client's, not a kind's) |
//! | `redisson_lock_renewal_slack_seconds` | histogram | seconds | `kind` | lease a lock hold had left when its renewal was confirmed (near zero: about to be lost) |
//! | `redisson_lock_holds_at_risk_total` | counter | count | `kind`, `reason`: `failed` or `late` | times a watchdog hold (a lock hold or a `PermitGuard`'s permit) went at risk: a renewal failed, or none was confirmed for two renewal periods (counted once until a renewal is confirmed again) |
//! | `redisson_lock_script_errors_total` | counter | count | `kind` | scripts that failed (connection, server or reply errors); a failed watchdog renewal script counts once for each kind it carried |
//! | `redisson_lock_retries_total` | counter | count | `kind`, `op` | tries again after a transient failure; `op`: `acquire`, `release`, `settle`, `subscribe`, `give_back`, `write`, `shutdown`, `fencing`, `latch_delete` |
//! | `redisson_lock_subscriber_reconnects_total` | counter | count | | times the pub/sub subscriber connection was re-established (each wakes every waiter; the connection is the client's, not a kind's) |
//! | `redisson_lock_replica_sync_failures_total` | counter | count | `command`: `WAIT` or `WAITAOF`, `reason`: `unconfirmed` or `refused` | lock writes no replica (or fsync) confirmed in time, and sync commands the server refused (the connection's, not a kind's) |
//!
//! `kind` is one of the lock kinds (`lock`, `fair`, `spin`, `fenced`, `read`, `write`, ...),
//! `multi` (a `MultiLock`, or another [`QuorumPolicy`](crate::QuorumPolicy)'s `KIND`) or
//! `redlock` (a `RedLock`; their members count under their own kinds as well), a synchronizer
//! (`semaphore`, `permit_semaphore`, `latch`, `rate_limiter`), `fenced_value` (a
//! `FencedValue`'s writes), or `none` for the retries of the shared subscriber (`op`:
//! `subscribe`), which serves every kind.
//!
//! The hold gauges are set on each watchdog tick (every `watchdog_timeout / 3`, 10 s by
//! default, whether or not anything is renewed), from the holds registry: one scan of it per
//! tick, nothing on the acquire or release path beyond two atomics of the hold. So they lag by
//! up to one tick (a hold released shows until the next one), which is ample for what they are
//! for: a lock stuck for minutes shows while it is stuck. They are the process's: the sum
//! (count) and the oldest (age) over every client in it. For the holds themselves, with
//! their names and owners, see [`Client::holds`](crate::Client::holds).
//!
//! # Spans
//!
//! Each operation runs in one `INFO` span named after it, of OpenTelemetry kind *internal*:
//! `redisson_lock.acquire`, `redisson_lock.release`, `redisson_lock.unlock`,
//! `redisson_lock.force_unlock`, `redisson_lock.count_down` and `redisson_lock.await` (a
//! latch's wait). Its attributes are the crate's own, under `redisson_lock.`:
//!
//! | attribute | value |
//! |---|---|
//! | `redisson_lock.operation` | the operation: `acquire`, `release`, `unlock`, `force_unlock`, `count_down`, `await` |
//! | `redisson_lock.kind` | the object's kind, as the metrics' `kind` label |
//! | `redisson_lock.name` | the lock's or synchronizer's name (its Redis key; a multi-lock's: its members' names joined by `,`) |
//! | `redisson_lock.outcome` | how it ended: as the metrics' `outcome` labels, or `deleted`/`not_locked` for `force_unlock` |
//! | `error.type`, `otel.status_code` | on failure: the `LockError` variant, and `ERROR` |
//! | `otel.kind` | `internal` |
//!
//! Below it:
//!
//! * `redisson_lock.wait` (`INFO`, internal, no attributes): the wait for a release, from
//!   the subscription (or the spin lock's first backoff) to the try that ends it. A
//!   contended acquire's time shows here, not as Redis latency.
//! * `EVALSHA` (`INFO`, OpenTelemetry kind *client*), one per script round trip, with
//!   OpenTelemetry's database attributes:
//!
//! | attribute | value |
//! |---|---|
//! | `db.system.name` | `redis` |
//! | `db.operation.name` | `EVALSHA` |
//! | `redisson_lock.script` | the script (its file in `lua/` without `.lua`: `lock`, `unlock`, `fair_lock`, `renew`, ...) |
//! | `server.address`, `server.port` | the server, on a standalone deployment (a cluster or Sentinel routes each command itself) |
//! | `error.type`, `otel.status_code` | on failure: redis-rs's error kind, and `ERROR` |
//! | `otel.kind` | `client` |
//!
//! Round trips outside an operation (the watchdog's renewals, a background release or trim,
//! `Client::shutdown`'s releases) are client spans without a parent. Plain commands (`GET`,
//! `PTTL`, pub/sub) get no span. No span, and none of its field values, is built unless a
//! subscriber is interested in it.

use std::time::Duration;

mod holds;
mod span;

pub(crate) use holds::HoldsReport;
pub(crate) use span::{acquire, release, round_trip, round_trip_failed, traced, waiting, Op};

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
/// Gauge of the holds held now, by kind.
pub const HOLDS: &str = "redisson_lock_holds";
/// Gauge of the oldest hold's age, by kind.
pub const OLDEST_HOLD: &str = "redisson_lock_oldest_hold_seconds";
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
        describe_gauge!(
            HOLDS,
            Unit::Count,
            "Lock holds this process holds now, by kind (updated each watchdog tick)"
        );
        describe_gauge!(
            OLDEST_HOLD,
            Unit::Seconds,
            "Age of the oldest lock hold this process holds now, by kind (updated each watchdog tick)"
        );
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

/// An acquisition ended (`outcome`: `acquired`, `timeout`, `error` or `cancelled`) after
/// `waited`.
pub(crate) fn acquire_wait(kind: &'static str, outcome: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(ACQUIRE_WAIT, "kind" => kind, "outcome" => outcome)
        .record(waited.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, outcome, waited);
}

pub(crate) fn permits_moved(kind: &'static str, direction: &'static str, permits: u64) {
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

/// A hold of `kind` the client believed it had was found gone, `by` the watchdog or a release.
pub(crate) fn lease_lost(kind: &'static str, by: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(LEASES_LOST, "kind" => kind, "by" => by).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, by);
}

/// The watchdog renewed `n` holds of `kind`.
pub(crate) fn renewed(kind: &'static str, n: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(RENEWALS, "kind" => kind).increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, n);
}

/// A watchdog tick ran `late` after it was due.
pub(crate) fn watchdog_lag(late: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(WATCHDOG_LAG).record(late.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = late;
}

/// A renewal of a hold of `kind` was confirmed with `left` of its previous lease to spare.
pub(crate) fn renewal_slack(kind: &'static str, left: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(RENEWAL_SLACK, "kind" => kind).record(left.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, left);
}

/// A watchdog hold of `kind` went at risk: its renewal `failed`, or is `late`.
pub(crate) fn at_risk(kind: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(HOLDS_AT_RISK, "kind" => kind, "reason" => reason).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, reason);
}

/// A script on an object of `kind` failed.
pub(crate) fn script_error(kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(SCRIPT_ERRORS, "kind" => kind).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// `op` on an object of `kind` tries again after a transient failure.
pub(crate) fn retry(kind: &'static str, op: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(RETRIES, "kind" => kind, "op" => op).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, op);
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
