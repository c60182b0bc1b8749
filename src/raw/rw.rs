//! Redisson's RReadWriteLock: one hash with a `mode` field shared by a read and a write side.

use super::{read_key_prefix, read_timeout_prefix, KindSpec, Op, RawLock};
use crate::keys;
use crate::scripts::{self, Call, Layout};

/// The read side of a [`ReadWriteLock`](crate::ReadWriteLock): Redisson's `RedissonReadLock`.
///
/// Any number of owners may read at once; an owner holding the write side may also read
/// (downgrade); a reader may not upgrade to write while other readers hold (as in Redisson, that
/// waits). Each read hold has its own timeout key, so a dead reader's hold expires on its own.
///
/// Unlike Redisson, renewing (or undoing) one reader's holds never shortens the hash's TTL:
/// Redisson's renewal sets it to the renewer's lease, which can end another reader's longer
/// lease early and let a writer in once the renewer dies.
///
/// # Redisson compatibility
///
/// * Hash `<name>`: `mode` -> `read`, field `<uuid>:<id>` -> read hold count.
/// * Timeout keys `{<name>}:<uuid>:<id>:rwlock_timeout:<n>`, one per read hold, PX = lease.
/// * Channel `redisson_rwlock:{<name>}`; a read release that frees the lock publishes `0`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Read;

/// The write side of a [`ReadWriteLock`](crate::ReadWriteLock): Redisson's `RedissonWriteLock`.
///
/// Exclusive against readers and other writers; re-entrant. As in Redisson, a write re-entry adds
/// its lease to the remaining TTL.
///
/// # Redisson compatibility
///
/// * Hash `<name>`: `mode` -> `write`, field `<uuid>:<id>:write` -> write hold count.
/// * Channel `redisson_rwlock:{<name>}`; the final write release publishes `1`, which wakes every
///   waiter (all readers may enter).
#[derive(Clone, Copy, Debug, Default)]
pub struct Write;

/// `{<name>}:<field>:rwlock_timeout` (Redisson's `getReadWriteTimeoutNamePrefix`).
/// `{<name>}`, or `<name>` when the name contains `{` (Redisson's `getKeyPrefix`).
impl RawLock for Read {
    const SPEC: KindSpec = KindSpec {
        name: "read",
        channel_prefix: keys::RWLOCK_CHANNEL_PREFIX,
        field_suffix: "",
        per_waiter_channel: false,
        layout: Layout::Read,
        fencing_token: false,
        reentrant: true,
    };

    fn acquire_script(&self, op: &Op<'_>, _enqueue: bool) -> Call {
        let write_field = format!("{}:write", op.field);
        scripts::read_lock(
            op.key,
            &read_timeout_prefix(op.key, op.field),
            op.lease_ms,
            op.field,
            &write_field,
        )
    }

    fn release_script(&self, op: &Op<'_>) -> Call {
        scripts::read_unlock(
            op,
            &read_timeout_prefix(op.key, op.field),
            &read_key_prefix(op.key),
        )
    }

    fn force_unlock_script(&self, op: &Op<'_>, seen: &str) -> Call {
        scripts::rw_force_unlock(op.key, op.channel, "read", op.publish, seen)
    }

    fn is_locked_script(&self, key: &str) -> Option<Call> {
        Some(scripts::rw_is_locked(key, "read"))
    }
}

impl RawLock for Write {
    const SPEC: KindSpec = KindSpec {
        name: "write",
        channel_prefix: keys::RWLOCK_CHANNEL_PREFIX,
        field_suffix: ":write",
        per_waiter_channel: false,
        layout: Layout::Write,
        fencing_token: false,
        reentrant: true,
    };

    fn acquire_script(&self, op: &Op<'_>, _enqueue: bool) -> Call {
        scripts::write_lock(op.key, op.lease_ms, op.field)
    }

    fn release_script(&self, op: &Op<'_>) -> Call {
        scripts::write_unlock(op)
    }

    fn force_unlock_script(&self, op: &Op<'_>, seen: &str) -> Call {
        scripts::rw_force_unlock(op.key, op.channel, "write", op.publish, seen)
    }

    fn is_locked_script(&self, key: &str) -> Option<Call> {
        Some(scripts::rw_is_locked(key, "write"))
    }
}
