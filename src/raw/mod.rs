//! Lock kinds: the per-kind scripts behind the one generic algorithm in [`Lock`](crate::Lock).
//!
//! A kind says which scripts acquire, release, trim and force-unlock it, how their replies
//! read, which channel its waiters wait on and what its release wakes. Everything else (owners,
//! waiting, leases, the watchdog, cancellation) is written once in `lock.rs`.

mod fair;
mod fenced;
mod reentrant;
mod rw;

pub use fair::Fair;
pub use fenced::Fenced;
pub use reentrant::Reentrant;
pub use rw::{Read, Write};

use redis::{ScriptInvocation, Value};

pub use crate::scripts::Op;
use crate::scripts::{self, Latch, Layout};

/// What one acquire attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// Taken; the owner's hold count is now `count`; `token` for fenced locks.
    Taken {
        /// The owner's hold count after this acquisition.
        count: u32,
        /// The fencing token, for kinds that issue one.
        token: Option<i64>,
    },
    /// Held by someone else: wait at most `ttl_ms` (`-1`: until a message) before trying again.
    Held {
        /// Milliseconds to wait at most.
        ttl_ms: i64,
    },
}

/// What one release found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The last hold went; waiters were notified.
    Released,
    /// Holds remain (re-entered), lease re-applied.
    StillHeld,
    /// The owner held nothing.
    NotHeld,
}

/// How the watchdog renews a hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// `PEXPIRE` the hash while the field exists (RLock, fair, fenced, write).
    Hash,
    /// The read-lock renewal: the hash and the owner's `rwlock_timeout:<n>` keys.
    Read {
        /// `{<name>}:<field>:rwlock_timeout`.
        timeout_prefix: String,
    },
}

impl Renewal {
    /// Holds renewed by one script must share this batch number.
    pub(crate) fn batch(&self) -> u8 {
        match self {
            Renewal::Hash => 0,
            Renewal::Read { .. } => 1,
        }
    }

    /// The script that renews a batch of holds (`(key, field, renewal)`, all of one
    /// [`batch`](Renewal::batch)) to `lease_ms`; it replies one integer per hold: 1 renewed,
    /// 0 gone.
    pub(crate) fn script<'a, 'k>(
        lease_ms: u64,
        holds: impl Iterator<Item = (&'k str, &'k str, &'k Renewal)> + Clone,
    ) -> ScriptInvocation<'a> {
        let read = holds
            .clone()
            .next()
            .is_some_and(|(_, _, r)| matches!(r, Renewal::Read { .. }));
        if read {
            scripts::read_renew(
                lease_ms,
                holds.map(|(key, field, r)| match r {
                    Renewal::Read { timeout_prefix } => (key, timeout_prefix.as_str(), field),
                    Renewal::Hash => (key, "", field),
                }),
            )
        } else {
            scripts::renew(lease_ms, holds.map(|(key, field, _)| (key, field)))
        }
    }
}

/// The scripts of one lock kind. Public only inside the crate (the module is private), which
/// seals [`LockKind`].
pub trait RawLock: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// The unlock channel for lock `name`.
    fn channel(&self, name: &str) -> String {
        crate::keys::lock_channel(name)
    }

    /// The hash field for the owner's base field `<uuid>:<id>`.
    fn field(&self, base: String) -> String {
        base
    }

    /// The channel a waiter with `field` waits on (the fair lock gives each waiter its own).
    fn wait_channel(&self, channel: &str, _field: &str) -> String {
        channel.to_owned()
    }

    /// Script that takes (or re-enters) the lock. `enqueue`: the caller is prepared to wait.
    fn acquire_script<'a>(&self, op: &Op<'_>, enqueue: bool) -> ScriptInvocation<'a>;

    /// Reads the acquire script's reply.
    fn parse_acquire(&self, reply: &Value) -> Option<Acquire> {
        parse_acquire(reply)
    }

    /// Script that releases one hold, idempotent through `latch`.
    fn release_script<'a>(&self, op: &Op<'_>, latch: &Latch<'_>) -> ScriptInvocation<'a>;

    /// Reads the release script's reply.
    fn parse_release(&self, reply: &Value) -> Option<Release> {
        match reply {
            Value::Nil => Some(Release::NotHeld),
            Value::Int(0) => Some(Release::StillHeld),
            Value::Int(1) => Some(Release::Released),
            _ => None,
        }
    }

    /// Script that brings the owner's count down to `target` (see `lua/trim.lua`).
    fn trim_script<'a>(&self, op: &Op<'_>, target: u32) -> ScriptInvocation<'a> {
        scripts::trim(op, None, target, Layout::Plain)
    }

    /// Script run when a wait ends without the lock (timeout, error, cancellation).
    fn cancel_script<'a>(&self, _op: &Op<'_>) -> Option<ScriptInvocation<'a>> {
        None
    }

    /// Script that deletes the lock whoever holds it; replies 1 or 0.
    fn force_unlock_script<'a>(&self, op: &Op<'_>) -> ScriptInvocation<'a> {
        scripts::force_unlock(op.key, op.channel, op.publish)
    }

    /// Script answering "is it locked" when `EXISTS` is not the answer; replies 1 or 0.
    fn is_locked_script<'a>(&self, _key: &str) -> Option<ScriptInvocation<'a>> {
        None
    }

    /// Keys this kind's scripts touch besides the lock key, its channels and its unlock latch
    /// (fair queue, token counter, read timeouts), for lock `name` and owner `field`.
    fn extra_keys(&self, _name: &str, _field: &str) -> Vec<String> {
        Vec::new()
    }

    /// How the watchdog renews a hold of `field` on `key`.
    fn renewal(&self, _key: &str, _field: &str) -> Renewal {
        Renewal::Hash
    }
}

/// Every key and channel a lock of `kind` called `name` touches besides the key itself. On a
/// cluster, a script may only touch keys of one hash slot, so they must all share the key's.
pub(crate) fn related_keys<K: RawLock>(kind: &K, name: &str, field: &str) -> Vec<String> {
    let channel = kind.channel(name);
    let mut keys = vec![
        kind.wait_channel(&channel, field),
        channel,
        crate::keys::unlock_latch(name, "00000000000000000000000000000000"),
    ];
    keys.extend(kind.extra_keys(name, field));
    keys
}

/// A kind of lock (sealed: the kinds are the ones this crate implements).
///
/// [`RLock`](crate::RLock) is `Lock<Reentrant>`; [`FairLock`](crate::FairLock),
/// [`FencedLock`](crate::FencedLock) and the two sides of a
/// [`ReadWriteLock`](crate::ReadWriteLock) plug their scripts into the same algorithm.
pub trait LockKind: RawLock {}

impl<T: RawLock> LockKind for T {}

/// The common acquire reply: `{count}` or `{count, token}` when taken, an integer TTL otherwise.
pub(crate) fn parse_acquire(reply: &Value) -> Option<Acquire> {
    match reply {
        Value::Array(v) => match v.as_slice() {
            [Value::Int(c)] => Some(Acquire::Taken {
                count: u32::try_from(*c).ok()?,
                token: None,
            }),
            [Value::Int(c), Value::Int(t)] => Some(Acquire::Taken {
                count: u32::try_from(*c).ok()?,
                token: Some(*t),
            }),
            _ => None,
        },
        Value::Int(ttl) => Some(Acquire::Held { ttl_ms: *ttl }),
        _ => None,
    }
}
