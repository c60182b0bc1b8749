//! Redisson's RLock: a hash `<name>` with field `<uuid>:<id>` -> hold count.

use redis::ScriptInvocation;

use super::{Latch, Op, RawLock};
use crate::scripts;

/// The reentrant lock kind: Redisson's `RLock` (`RedissonLock`).
///
/// # Redisson compatibility
///
/// * Key `<name>`: a HASH, field `<client uuid>:<owner id>` -> hold count, PTTL = lease.
/// * Channel `redisson_lock__channel:{<name>}` (or `redisson_lock__channel:<name>` when the
///   name contains `{`), message `0` on the final release.
/// * Unlock latch `redisson_unlock_latch:{<name>}:<32 hex>` makes unlock retries idempotent.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reentrant;

impl RawLock for Reentrant {
    fn acquire_script<'a>(&self, op: &Op<'_>, _enqueue: bool) -> ScriptInvocation<'a> {
        scripts::lock(op.key, op.lease_ms, op.field)
    }

    fn release_script<'a>(&self, op: &Op<'_>, latch: &Latch<'_>) -> ScriptInvocation<'a> {
        scripts::unlock(op, latch)
    }
}
