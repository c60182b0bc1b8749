//! Redisson's RLock: a hash `<name>` with field `<uuid>:<id>` -> hold count.

use redis::{ScriptInvocation, Value};

use super::{Acquire, Names, RawLock, Release};
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
    fn acquire_script<'a>(
        &self,
        names: &Names<'_>,
        field: &str,
        lease_ms: u64,
    ) -> ScriptInvocation<'a> {
        scripts::lock(names.key, lease_ms, field)
    }

    fn parse_acquire(&self, reply: &Value) -> Option<Acquire> {
        match reply {
            Value::Array(v) => match v.as_slice() {
                [Value::Int(c)] => Some(Acquire::Taken {
                    count: u32::try_from(*c).ok()?,
                }),
                _ => None,
            },
            Value::Int(ttl) => Some(Acquire::Held { ttl_ms: *ttl }),
            _ => None,
        }
    }

    fn release_script<'a>(
        &self,
        names: &Names<'_>,
        field: &str,
        lease_ms: u64,
        latch: &str,
        latch_ttl_ms: u64,
        publish: &str,
    ) -> ScriptInvocation<'a> {
        scripts::unlock(
            names.key,
            names.channel,
            latch,
            scripts::UNLOCK_MESSAGE,
            lease_ms,
            field,
            publish,
            latch_ttl_ms,
        )
    }

    fn parse_release(&self, reply: &Value) -> Option<Release> {
        match reply {
            Value::Nil => Some(Release::NotHeld),
            Value::Int(0) => Some(Release::StillHeld),
            Value::Int(1) => Some(Release::Released),
            _ => None,
        }
    }
}
