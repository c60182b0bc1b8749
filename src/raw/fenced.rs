//! Redisson's RFencedLock: an RLock whose every acquisition takes a token from a counter.

use super::{KindSpec, Op, RawLock};
use crate::scripts::{Call, Layout};
use crate::{keys, scripts};

/// The fenced lock kind: Redisson's `RFencedLock` (`RedissonFencedLock`).
///
/// Every acquisition, re-entry included, increments the counter `redisson_lock_token:{<name>}`
/// in the same script and hands the new value to the guard
/// ([`LockGuard::token`](crate::LockGuard::token)). Tokens strictly increase across holders, so
/// a resource that remembers the highest token it has seen can reject a stale holder's write.
///
/// # Redisson compatibility
///
/// * Key `<name>`: the RLock hash (same fields, same lease), so RLock and RFencedLock on one name
///   exclude each other.
/// * Counter `redisson_lock_token:{<name>}`: a STRING, `INCR` per acquisition, no expiry.
/// * Channel `redisson_lock__channel:{<name>}`, message `0`; unlock as RLock.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fenced;

impl RawLock for Fenced {
    const SPEC: KindSpec = KindSpec {
        name: "fenced",
        channel_prefix: keys::LOCK_CHANNEL_PREFIX,
        field_suffix: "",
        per_waiter_channel: false,
        layout: Layout::Plain,
        fencing_token: true,
        reentrant: true,
    };

    fn acquire_script(&self, op: &Op<'_>, _enqueue: bool) -> Call {
        let token_key = keys::prefix_name(keys::TOKEN_PREFIX, op.key);
        scripts::fenced_lock(op.key, &token_key, op.lease_ms, op.field)
    }

    fn release_script(&self, op: &Op<'_>) -> Call {
        scripts::unlock(op)
    }
}
