//! Observability in one place: a `tracing` span for every lock operation (name, kind, outcome),
//! and metrics through the `metrics` facade when the `metrics` feature is on (without it, the
//! recording functions are empty and compile away).
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `redisson_lock_acquire_wait_seconds` | histogram | `kind`, `outcome` | time from the call to its end: `acquired`, `timeout` or `error` |
//! | `redisson_lock_hold_seconds` | histogram | `kind` | time a guard held its grant, recorded when it is released |
//! | `redisson_lock_leases_lost_total` | counter | `by`: `watchdog` or `release` | holds found gone while the client believed it held them |
//! | `redisson_lock_renewals_total` | counter | | holds renewed by the watchdog |
//! | `redisson_lock_script_errors_total` | counter | | lock scripts that failed (connection, server or reply errors) |
//! | `redisson_lock_waiters` | gauge | `kind` | waiters parked right now (on pub/sub, or polling for the spin lock) |

use std::future::Future;
use std::time::{Duration, Instant};

use tracing::Instrument;

/// Acquire wait-time histogram.
pub const ACQUIRE_WAIT: &str = "redisson_lock_acquire_wait_seconds";
/// Hold-time histogram.
pub const HOLD_TIME: &str = "redisson_lock_hold_seconds";
/// Lost-lease counter.
pub const LEASES_LOST: &str = "redisson_lock_leases_lost_total";
/// Watchdog renewal counter.
pub const RENEWALS: &str = "redisson_lock_renewals_total";
/// Script error counter.
pub const SCRIPT_ERRORS: &str = "redisson_lock_script_errors_total";
/// Parked-waiter gauge.
pub const WAITERS: &str = "redisson_lock_waiters";

/// Runs one lock operation inside a `redisson_lock` span carrying the operation, the kind and
/// the lock name; a debug event in the span reports its outcome and duration when it ends.
pub(crate) async fn traced<T, E: std::fmt::Display>(
    op: &'static str,
    kind: &'static str,
    lock: &str,
    fut: impl Future<Output = Result<T, E>>,
    outcome: impl FnOnce(&T) -> &'static str,
) -> Result<T, E> {
    let span = tracing::debug_span!("redisson_lock", op, kind, lock);
    let start = Instant::now();
    let r = fut.instrument(span.clone()).await;
    let elapsed_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    span.in_scope(|| match &r {
        Ok(v) => tracing::debug!(outcome = outcome(v), elapsed_us, "done"),
        Err(e) => tracing::debug!(outcome = "error", error = %e, elapsed_us, "done"),
    });
    r
}

/// An acquisition ended (`outcome`: `acquired`, `timeout` or `error`) after `waited`.
pub(crate) fn acquire_wait(kind: &'static str, outcome: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(ACQUIRE_WAIT, "kind" => kind, "outcome" => outcome)
        .record(waited.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, outcome, waited);
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

/// A lock script failed.
pub(crate) fn script_error() {
    #[cfg(feature = "metrics")]
    metrics::counter!(SCRIPT_ERRORS).increment(1);
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
