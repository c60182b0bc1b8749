//! The lease watchdog: one task per client that renews every watchdog-mode hold every
//! `watchdog_timeout / 3`, in batches of `Config::watchdog_batch_size` holds per script
//! (Redisson's `lockWatchdogBatchSize`, 100 by default).
//!
//! * The task holds only a `Weak` to the client and is aborted when the client is dropped.
//! * A renewal that finds the owner field gone ends the hold's epoch: its guards report
//!   [`LockGuard::is_lost`](crate::LockGuard::is_lost) and `lost().await` resolves. So does a
//!   hold that could not be renewed for a whole lease (server unreachable): by then Redis has
//!   expired it, or will before anyone could be told.
//! * Before that, a hold whose renewal failed (an error, a timeout, an unexpected reply) is
//!   *at risk* ([`LockGuard::is_at_risk`](crate::LockGuard::is_at_risk)) until a renewal is
//!   confirmed again; a guard also finds its hold at risk on its own once no renewal was
//!   confirmed for two renewal periods (a renewal stuck in flight).
//! * Watched permits of permit-expirable semaphores (`PermitGuard`) are renewed on the same
//!   tick, one script per semaphore batch (`permits.rs`).
//! * Errors are logged and the task carries on; it never stops while holds exist.
//! * Failover awareness: when the command connection follows a failover to a new master
//!   (`Conn::topology_changed`), the pass runs at once, out of turn, so a hold the new master
//!   lacks is reported lost within about a second of the switch.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::Value;

use crate::config::millis;
use crate::holds::Hold;
use crate::keys::slot_of;
use crate::observe;
use crate::raw::Renewal;
use crate::shared::ClientInner;

mod permits;

pub(crate) async fn run(client: Weak<ClientInner>, wake: Arc<tokio::sync::Notify>) {
    // This task is spawned while the client is being built: until `with_config` wakes it once
    // the client is complete, `upgrade` would fail as if the client were gone, and end the task.
    wake.notified().await;
    // This client's part of the hold gauges, removed when the task ends (or is aborted).
    let gauges = observe::HoldsReport::new();
    // When the last pass began: the next one is due a period after that, or at `retry` after
    // a pass with a failed renewal.
    let mut last_pass: Option<Instant> = None;
    let mut retry: Option<Instant> = None;
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (period, idle, failover) = {
            let Some(c) = client.upgrade() else { return };
            // Bookkeeping of holds that ended while another reference was briefly alive.
            c.holds.sweep();
            // The hold gauges, once a period (and after each wake-up): a stuck hold shows
            // while it is stuck, at the cost of one scan of the holds per tick.
            gauges.report(|| c.holds.held_since());
            let period = c.config.watchdog_timeout() / 3;
            let failover = c.conn.topology_changed();
            (c.holds.any_watched().then_some(period), period, failover)
        };
        match period {
            // Idle until something is acquired in watchdog mode (sweeping now and then).
            None => {
                (last_pass, retry) = (None, None);
                let _ = tokio::time::timeout(idle, notified).await;
            }
            Some(period) => {
                let due = next_due(last_pass, period, Instant::now());
                let due = retry.map_or(due, |r| r.min(due));
                // A failover (failover awareness) cuts the wait short: every hold is checked
                // on the new master at once.
                let switched = async {
                    match &failover {
                        Some(f) => f.notified().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = tokio::time::sleep_until(due.into()) => {
                        observe::watchdog_lag(Instant::now().saturating_duration_since(due));
                    }
                    () = switched => {}
                }
                let Some(c) = client.upgrade() else { return };
                let began = Instant::now();
                last_pass = Some(began);
                // A renewal that failed (a new master not reachable yet after a failover, a
                // timeout) is tried again after [`RETRY`], not a whole period later: the pass a
                // failover triggers must not leave the verdict to the next regular tick.
                retry = renew_all(&c).await.then(|| began + RETRY.min(period));
            }
        }
    }
}

/// When the next renewal pass is due: one period after the previous pass *began* (one period
/// from `now` when there was none). Counting from the start keeps every hold's renewals at most
/// `max(period, pass time)` apart; counting from the end of the pass would add the pass's time
/// to each interval, and with many holds on a loaded host (100k holds: a pass of 2 s against a
/// 1 s period) that exceeds the lease and the holds expire while the watchdog renews them. A
/// pass longer than the period is followed by the next one at once.
fn next_due(last_pass: Option<Instant>, period: Duration, now: Instant) -> Instant {
    match last_pass {
        Some(began) => began + period,
        None => now + period,
    }
}

/// How soon a pass with a failed renewal is followed by another (at most a period).
const RETRY: Duration = Duration::from_secs(1);

/// One tick: renew every watched hold; report the ones that are gone. `true`: a lock renewal
/// failed (its holds are at risk, to be tried again).
pub(crate) async fn renew_all(client: &ClientInner) -> bool {
    tokio::join!(renew_holds(client), permits::renew(client)).0
}

/// Holds renewed by one script: the kind's renewal batch and, on a cluster, the hash slot.
type BatchKey = (u8, Option<u16>);

/// Renews every watched lock hold; `true` when a renewal failed.
async fn renew_holds(client: &ClientInner) -> bool {
    // Before the snapshot: a renewal confirmed for it vouches for no later instant.
    let started = Instant::now();
    let slots = client.holds.watched();
    if slots.is_empty() {
        return false;
    }
    let lease = client.config.watchdog_timeout();
    let lease_ms = millis(lease);
    // One script per batch of holds renewed the same way (the kind decides), and on a cluster
    // per hash slot: a script must touch one slot.
    let cluster = client.conn.is_cluster();
    let mut groups: std::collections::HashMap<BatchKey, Vec<(Arc<Hold>, u64)>> =
        std::collections::HashMap::new();
    for (h, epoch) in slots {
        let slot = cluster.then(|| slot_of(h.key.as_bytes()));
        groups
            .entry((h.renewal.batch(), slot))
            .or_default()
            .push((h, epoch));
    }
    let batch = client.config.watchdog_batch_size().max(1);
    let batches = groups.values().flat_map(|g| g.chunks(batch)).map(|pairs| {
        // The epochs of the snapshot (`Holds::watched`), never read again here.
        let (chunk, epochs): (Vec<Arc<Hold>>, Vec<u64>) = pairs.iter().cloned().unzip();
        let inv = Renewal::script(
            lease_ms,
            chunk.iter().map(|h| (&*h.key, &*h.field, &h.renewal)),
        );
        // Renewals are lock writes: synced like an acquire.
        let mut conn = client.conn.synced();
        async move {
            let reply: redis::RedisResult<Value> = inv.invoke_async(&mut conn).await;
            (chunk, epochs, reply)
        }
    });
    let mut failed = false;
    for (chunk, epochs, reply) in join_all(batches).await {
        match reply {
            Ok(Value::Array(results)) if results.len() == chunk.len() => {
                // Renewals counted per kind (a batch may carry several kinds).
                let mut renewed: Vec<(&'static str, u64)> = Vec::new();
                for ((slot, epoch), r) in chunk.iter().zip(epochs).zip(results) {
                    let kind = slot.kind.name;
                    if matches!(r, Value::Int(1)) {
                        observe::renewal_slack(
                            kind,
                            lease.saturating_sub(slot.renewed_at().elapsed()),
                        );
                        slot.renewed(started);
                        match renewed.iter_mut().find(|(k, _)| *k == kind) {
                            Some((_, n)) => *n += 1,
                            None => renewed.push((kind, 1)),
                        }
                    } else if slot.lose(epoch) {
                        observe::lease_lost(kind, "watchdog");
                        tracing::warn!(
                            lock = %slot.key, owner = %slot.field,
                            "lock lost: the watchdog found the hold gone"
                        );
                    }
                }
                for (kind, n) in renewed {
                    observe::renewed(kind, n);
                }
            }
            Ok(other) => {
                failed = true;
                script_errors(&chunk);
                tracing::warn!(reply = ?other, "unexpected reply to the lock renewal script");
                put_at_risk(&chunk, &epochs);
            }
            Err(e) => {
                failed = true;
                script_errors(&chunk);
                tracing::warn!(error = %e, locks = chunk.len(), "can't renew locks; will retry");
                put_at_risk(&chunk, &epochs);
                expire_unrenewed(&chunk, &epochs, lease);
            }
        }
    }
    failed
}

/// A renewal script failed: one script error for each kind it carried.
fn script_errors(chunk: &[Arc<Hold>]) {
    let mut kinds: Vec<&'static str> = chunk.iter().map(|h| h.kind.name).collect();
    kinds.sort_unstable();
    kinds.dedup();
    for kind in kinds {
        observe::script_error(kind);
    }
}

/// A renewal of these holds failed: each one still in the epoch it was sent for is at risk
/// until a renewal is confirmed.
fn put_at_risk(chunk: &[Arc<Hold>], epochs: &[u64]) {
    for (slot, &epoch) in chunk.iter().zip(epochs) {
        if slot.epoch() == epoch && slot.risk() {
            observe::at_risk(slot.kind.name, "failed");
            tracing::info!(
                lock = %slot.key, owner = %slot.field,
                "lock at risk: its renewal failed (the lease is still valid)"
            );
        }
    }
}

/// Holds not renewed for a whole lease are gone from Redis (or about to be): report them.
fn expire_unrenewed(chunk: &[Arc<Hold>], epochs: &[u64], lease: Duration) {
    let now = Instant::now();
    for (slot, &epoch) in chunk.iter().zip(epochs) {
        if now.duration_since(slot.renewed_at()) >= lease && slot.lose(epoch) {
            observe::lease_lost(slot.kind.name, "watchdog");
            tracing::warn!(
                lock = %slot.key, owner = %slot.field,
                "lock lost: not renewed for a whole lease (server unreachable)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass that outlasts the period: the next one is due at once, so a hold renewed early in
    /// the long pass is renewed again within `max(period, pass)`, well inside the lease.
    #[test]
    fn a_long_pass_is_followed_at_once() {
        let period = Duration::from_secs(1);
        let began = Instant::now();
        let pass = Duration::from_millis(2_100);
        let ended = began + pass;
        let due = next_due(Some(began), period, ended);
        assert!(
            due.saturating_duration_since(began) <= period.max(pass),
            "next pass due {:?} after the previous began",
            due - began
        );
        assert!(
            due <= ended,
            "a pass longer than the period is followed at once"
        );
        // A short pass: the next one a period after the previous began, not after it ended.
        let short = began + Duration::from_millis(300);
        assert_eq!(next_due(Some(began), period, short), began + period);
        // The first pass: a period from now.
        assert_eq!(next_due(None, period, ended), ended + period);
    }
}
