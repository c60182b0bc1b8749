//! Redisson's non-reentrant locks (4.4+): an RLock and an RFairLock whose holder cannot take
//! them a second time.

use super::{Fair, KindSpec, Op, RawLock};
use crate::keys;
use crate::scripts::{self, Call, Layout};

/// The non-reentrant lock kind: Redisson's `getNonReentrantLock` (`RedissonNonReentrantLock`,
/// Redisson 4.4+).
///
/// A second acquire by the owner that holds the lock fails with
/// [`LockError::AlreadyHeld`](crate::LockError::AlreadyHeld) (Java's
/// `IllegalMonitorStateException`) and changes nothing: the hold count stays 1, so one unlock
/// frees the lock. Other owners wait for it as for an [`RLock`](crate::RLock).
///
/// # Redisson compatibility
///
/// * The RLock's data: key `<name>`, a HASH, field `<client uuid>:<owner id>` -> `1`, PTTL =
///   lease; channel `redisson_lock__channel:{<name>}`, message `0` on release. An RLock and a
///   non-reentrant lock on one name exclude each other (an RLock handle of the holder re-enters
///   it, as in Java).
/// * The acquire script refuses the holder with the error `NON_REENTRANT_REACQUIRE`, Redisson's.
#[derive(Clone, Copy, Debug, Default)]
pub struct NonReentrant;

impl RawLock for NonReentrant {
    const SPEC: KindSpec = KindSpec {
        name: "non_reentrant",
        channel_prefix: keys::LOCK_CHANNEL_PREFIX,
        field_suffix: "",
        per_waiter_channel: false,
        layout: Layout::Plain,
        fencing_token: false,
        reentrant: false,
    };

    fn acquire_script(&self, op: &Op<'_>, _enqueue: bool) -> Call {
        scripts::nr_lock(op.key, op.lease_ms, op.field)
    }

    fn release_script(&self, op: &Op<'_>) -> Call {
        scripts::unlock(op)
    }
}

/// The non-reentrant fair lock kind: Redisson's `getNonReentrantFairLock`
/// (`RedissonNonReentrantFairLock`, Redisson 4.4+).
///
/// A [`FairLock`](crate::FairLock) (waiters served in arrival order, the same queue) whose
/// holder's second acquire fails with [`LockError::AlreadyHeld`](crate::LockError::AlreadyHeld)
/// and changes nothing, the queue included.
///
/// # Redisson compatibility
///
/// * The RFairLock's data: key `<name>` (field -> `1`), queue `redisson_lock_queue:{<name>}`,
///   deadlines `redisson_lock_timeout:{<name>}`, per-waiter channel
///   `redisson_lock__channel:{<name>}:<uuid>:<id>`.
/// * The acquire script refuses the holder with the error `NON_REENTRANT_REACQUIRE` after the
///   stale waiters are dropped and before the queue is joined, as Redisson's does.
#[derive(Clone, Copy, Debug, Default)]
pub struct NonReentrantFair;

impl RawLock for NonReentrantFair {
    const SPEC: KindSpec = KindSpec {
        name: "non_reentrant_fair",
        reentrant: false,
        ..Fair::SPEC
    };

    fn acquire_script(&self, op: &Op<'_>, enqueue: bool) -> Call {
        super::fair::acquire(op, enqueue, false)
    }

    fn release_script(&self, op: &Op<'_>) -> Call {
        Fair.release_script(op)
    }

    fn cancel_script(&self, op: &Op<'_>) -> Option<Call> {
        Fair.cancel_script(op)
    }

    fn force_unlock_script(&self, op: &Op<'_>, seen: &str) -> Call {
        Fair.force_unlock_script(op, seen)
    }
}
