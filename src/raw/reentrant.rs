//! Redisson's RLock: a hash `<name>` with field `<uuid>:<id>` -> hold count.

use super::{KindSpec, Op, RawLock};
use crate::keys;
use crate::scripts::{self, Call, Layout};

/// The reentrant lock kind: Redisson's `RLock` (`RedissonLock`).
///
/// # Redisson compatibility
///
/// * Key `<name>`: a HASH, field `<client uuid>:<owner id>` -> hold count, PTTL = lease.
/// * Channel `redisson_lock__channel:{<name>}` (or `redisson_lock__channel:<name>` when the
///   name contains `{`), message `0` on the final release.
/// * Java's unlock writes an unlock latch `redisson_unlock_latch:{<name>}:<32 hex>`; ours does
///   not (nobody else reads it): our retry after a lost reply trims to the owner's known count
///   (docs/protocol.md, "Unlock retries").
#[derive(Clone, Copy, Debug, Default)]
pub struct Reentrant;

impl RawLock for Reentrant {
    const SPEC: KindSpec = KindSpec {
        name: "lock",
        channel_prefix: keys::LOCK_CHANNEL_PREFIX,
        field_suffix: "",
        per_waiter_channel: false,
        layout: Layout::Plain,
        fencing_token: false,
        reentrant: true,
    };

    fn acquire_script(&self, op: &Op<'_>, _enqueue: bool) -> Call {
        scripts::lock(op.key, op.lease_ms, op.field)
    }

    fn release_script(&self, op: &Op<'_>) -> Call {
        scripts::unlock(op)
    }
}
