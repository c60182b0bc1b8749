//! Redisson's RFairLock: an RLock granted in arrival order through a queue.

use super::{KindSpec, Op, RawLock};
use crate::keys;
use crate::scripts::{self, Call, FairKeys, Layout};

/// The fair lock kind: Redisson's `RFairLock` (`RedissonFairLock`).
///
/// Waiters queue in arrival order; each waits on its own channel and the release wakes only the
/// queue head. A waiter absent for longer than the fair-lock wait timeout
/// ([`Config::with_fair_lock_wait_timeout`](crate::Config::with_fair_lock_wait_timeout),
/// default 5 minutes as in Redisson) is dropped from the queue, so a dead waiter cannot block it
/// forever. A wait that times out or is cancelled leaves the queue.
///
/// Unlike Redisson, a queued waiter whose turn has not come sleeps at most until the head's
/// deadline (or the holder's lease, whichever is first; woken earlier by a message): it never
/// retries in a 0 ms loop while the lock is free, and it comes back in time to skip a dead head
/// even when the release message went to that dead head. A hold that a cancelled acquire took
/// is handed back with a wake-up on the queue head's channel, as an unlock does.
///
/// A waiter's channel stays subscribed for a second after a wait that ended with the lock: an
/// owner that waits again within it (a worker that takes the same fair lock in a loop) sends no
/// `SUBSCRIBE`/`UNSUBSCRIBE` and registers for its wake-up before its first try, so a contended
/// acquire costs two scripts (queue, take) instead of three plus the subscription.
///
/// # Redisson compatibility
///
/// * Key `<name>`: the RLock hash.
/// * Queue `redisson_lock_queue:{<name>}` (LIST of owner fields) and deadlines
///   `redisson_lock_timeout:{<name>}` (ZSET, epoch ms from the client clock, as Redisson).
/// * Per-waiter channel `redisson_lock__channel:{<name>}:<uuid>:<id>`, message `0`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fair;

pub(super) fn fair_keys<'k>(op: &'k Op<'_>, queue: &'k str, timeouts: &'k str) -> FairKeys<'k> {
    FairKeys {
        lock: op.key,
        queue,
        timeouts,
        channel: op.channel,
    }
}

pub(super) fn names(key: &str) -> (String, String) {
    (
        keys::prefix_name(keys::FAIR_QUEUE_PREFIX, key),
        keys::prefix_name(keys::FAIR_TIMEOUT_PREFIX, key),
    )
}

/// The fair acquire; `reentrant: false` for the non-reentrant fair lock.
pub(super) fn acquire(op: &Op<'_>, enqueue: bool, reentrant: bool) -> Call {
    let (queue, timeouts) = names(op.key);
    scripts::fair_lock(
        &fair_keys(op, &queue, &timeouts),
        op.lease_ms,
        op.field,
        (op.wait_ms, op.now_ms),
        enqueue,
        reentrant,
    )
}

impl RawLock for Fair {
    const SPEC: KindSpec = KindSpec {
        name: "fair",
        channel_prefix: keys::LOCK_CHANNEL_PREFIX,
        field_suffix: "",
        per_waiter_channel: true,
        layout: Layout::Fair,
        fencing_token: false,
        reentrant: true,
    };

    fn acquire_script(&self, op: &Op<'_>, enqueue: bool) -> Call {
        acquire(op, enqueue, true)
    }

    fn release_script(&self, op: &Op<'_>) -> Call {
        let (queue, timeouts) = names(op.key);
        scripts::fair_unlock(&fair_keys(op, &queue, &timeouts), op)
    }

    fn cancel_script(&self, op: &Op<'_>) -> Option<Call> {
        let (queue, timeouts) = names(op.key);
        Some(scripts::fair_cancel(
            &fair_keys(op, &queue, &timeouts),
            op.field,
            op.wait_ms,
            op.publish,
        ))
    }

    fn force_unlock_script(&self, op: &Op<'_>, seen: &str) -> Call {
        let (queue, timeouts) = names(op.key);
        let keys = fair_keys(op, &queue, &timeouts);
        scripts::fair_force_unlock(&keys, op.now_ms, op.publish, seen)
    }
}
