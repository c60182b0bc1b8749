//! Lock kinds: the per-kind scripts behind the one generic algorithm in [`Lock`](crate::Lock).
//!
//! A kind says which scripts acquire, release, trim and force-unlock it, how their replies
//! read, which channel its waiters wait on and what its release wakes. Everything else (owners,
//! waiting, leases, the watchdog, cancellation) is written once in `lock/engine/`.

mod fair;
mod fenced;
mod non_reentrant;
mod reentrant;
mod rw;
mod spin;

pub use fair::Fair;
pub use fenced::Fenced;
pub use non_reentrant::{NonReentrant, NonReentrantFair};
pub use reentrant::Reentrant;
pub use rw::{Read, Write};
pub(crate) use spin::Delays;
pub use spin::{Backoff, Spin};

use redis::Value;

pub use crate::scripts::Op;
use crate::scripts::{self, Call, Layout};

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
    pub(crate) fn script<'k>(
        lease_ms: u64,
        holds: impl Iterator<Item = (&'k str, &'k str, &'k Renewal)> + Clone,
    ) -> Call {
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

/// What sets a lock kind apart besides its scripts, as data: how its names are formed and how
/// its hash is laid out. The engine, the watchdog and the cluster check derive everything else
/// (channels, owner fields, trim and renewal scripts, related keys) from it.
#[derive(Clone, Copy, Debug)]
pub struct KindSpec {
    /// A short name for logs and metrics: `lock`, `fair`, `fenced`, `read`, `write`, `spin`,
    /// `non_reentrant`, `non_reentrant_fair`.
    pub name: &'static str,
    /// Channel prefix: `redisson_lock__channel`, or `redisson_rwlock` for both sides of a
    /// read-write lock.
    pub channel_prefix: &'static str,
    /// Appended to the owner's `<uuid>:<id>` (`:write` for the write side).
    pub field_suffix: &'static str,
    /// Each waiter waits on `<channel>:<field>` (the fair lock's queue) instead of the channel.
    pub per_waiter_channel: bool,
    /// How the hash is read when trimming and renewing (`lua/trim.lua`'s layout).
    pub layout: Layout,
    /// Acquisitions take a fencing token from `redisson_lock_token:{name}`.
    pub fencing_token: bool,
    /// The holder may take it again (its count goes up); `false` for the non-reentrant kinds,
    /// whose scripts refuse the holder.
    pub reentrant: bool,
}

/// The scripts of one lock kind: a small core (its [`KindSpec`], acquire and release) and
/// optional capabilities with defaults (leaving a wait queue, a kind-specific force-unlock or
/// "is locked"). Public only inside the crate (the module is private), which seals [`LockKind`].
pub trait RawLock: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// Names and layout.
    const SPEC: KindSpec;

    /// Script that takes (or re-enters) the lock. `enqueue`: the caller is prepared to wait.
    fn acquire_script(&self, op: &Op<'_>, enqueue: bool) -> Call;

    /// Script that releases one hold. Not idempotent by itself: after an unknown outcome the
    /// engine retries with the trim to the owner's known count instead (`lock/engine/release.rs`).
    fn release_script(&self, op: &Op<'_>) -> Call;

    /// Capability: a script run when a wait ends without the lock (timeout, error,
    /// cancellation), for kinds with a wait queue.
    fn cancel_script(&self, _op: &Op<'_>) -> Option<Call> {
        None
    }

    /// Capability: the script that deletes the lock whoever holds it (`seen` empty), or only
    /// while the holders `seen` names hold it (`scripts::holders_seen`); replies 1 deleted, 0
    /// not locked, -1 held by others.
    fn force_unlock_script(&self, op: &Op<'_>, seen: &str) -> Call {
        scripts::force_unlock(op.key, op.channel, op.publish, seen)
    }

    /// Capability: a script answering "is it locked" when `EXISTS` is not the answer.
    fn is_locked_script(&self, _key: &str) -> Option<Call> {
        None
    }

    /// Capability: waiters poll with this backoff instead of waiting on pub/sub, and nothing is
    /// published (the spin lock).
    fn backoff(&self) -> Option<&Backoff> {
        None
    }
}

/// Everything derived from a kind's [`KindSpec`].
pub(crate) trait KindExt: RawLock {
    /// Whether the kind's waiters wait on pub/sub and its releases publish.
    fn uses_pubsub(&self) -> bool {
        self.backoff().is_none()
    }

    /// The unlock channel for lock `name`.
    fn channel(&self, name: &str) -> String {
        crate::keys::prefix_name(Self::SPEC.channel_prefix, name)
    }

    /// The hash field for the owner's base field `<uuid>:<id>`.
    fn field(&self, mut base: String) -> String {
        base.push_str(Self::SPEC.field_suffix);
        base
    }

    /// The channel a waiter with `field` waits on.
    fn wait_channel(&self, channel: &str, field: &str) -> String {
        if Self::SPEC.per_waiter_channel {
            format!("{channel}:{field}")
        } else {
            channel.to_owned()
        }
    }

    /// The same owner's field on the other side of a read-write lock (`None` for every other
    /// kind): a read field's write field, a write field's read field.
    fn other_side(&self, field: &str) -> Option<String> {
        match Self::SPEC.layout {
            Layout::Read => Some(format!("{field}{}", Write::SPEC.field_suffix)),
            Layout::Write => field
                .strip_suffix(Self::SPEC.field_suffix)
                .map(str::to_owned),
            Layout::Plain | Layout::Fair => None,
        }
    }

    /// Reads the acquire script's reply.
    fn parse_acquire(&self, reply: &Value) -> Option<Acquire> {
        parse_acquire(reply)
    }

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
    fn trim_script(&self, op: &Op<'_>, target: u32) -> Call {
        let layout = Self::SPEC.layout;
        let extra = match layout {
            Layout::Fair => Some(crate::keys::prefix_name(
                crate::keys::FAIR_QUEUE_PREFIX,
                op.key,
            )),
            Layout::Read => Some(read_timeout_prefix(op.key, op.field)),
            Layout::Plain | Layout::Write => None,
        };
        scripts::trim(op, extra.as_deref(), target, layout)
    }

    /// How the watchdog renews a hold of `field` on `key`.
    fn renewal(&self, key: &str, field: &str) -> Renewal {
        match Self::SPEC.layout {
            Layout::Read => Renewal::Read {
                timeout_prefix: read_timeout_prefix(key, field),
            },
            _ => Renewal::Hash,
        }
    }

    /// Keys this kind's scripts touch besides the lock key and its channels.
    fn extra_keys(&self, name: &str, field: &str) -> Vec<String> {
        use crate::keys::{prefix_name, FAIR_QUEUE_PREFIX, FAIR_TIMEOUT_PREFIX, TOKEN_PREFIX};
        let mut keys = Vec::new();
        match Self::SPEC.layout {
            Layout::Fair => keys.extend([
                prefix_name(FAIR_QUEUE_PREFIX, name),
                prefix_name(FAIR_TIMEOUT_PREFIX, name),
            ]),
            Layout::Read => keys.extend([read_timeout_prefix(name, field), read_key_prefix(name)]),
            Layout::Plain | Layout::Write => {}
        }
        if Self::SPEC.fencing_token {
            keys.push(prefix_name(TOKEN_PREFIX, name));
        }
        keys
    }
}

impl<T: RawLock> KindExt for T {}

/// `{<name>}:<field>:rwlock_timeout` (Redisson's `getReadWriteTimeoutNamePrefix`).
pub(crate) fn read_timeout_prefix(key: &str, field: &str) -> String {
    let mut s = crate::keys::suffix_name(key, field);
    s.push_str(":rwlock_timeout");
    s
}

/// `{<name>}`, or `<name>` when the name contains `{` (Redisson's `getKeyPrefix`).
pub(crate) fn read_key_prefix(key: &str) -> String {
    if key.contains('{') {
        key.to_owned()
    } else {
        format!("{{{key}}}")
    }
}

/// Every key and channel a lock of `kind` called `name` touches besides the key itself. On a
/// cluster, a script may only touch keys of one hash slot, so they must all share the key's.
/// Our releases write no unlock latch, but Java's unlock of the same lock does: a name whose
/// latch falls in another slot is refused too, so that a Java client can use every lock we do.
pub(crate) fn related_keys<K: KindExt>(kind: &K, name: &str, field: &str) -> Vec<String> {
    let mut keys = vec![crate::keys::unlock_latch(
        name,
        "00000000000000000000000000000000",
    )];
    if kind.uses_pubsub() {
        let channel = kind.channel(name);
        keys.push(kind.wait_channel(&channel, field));
        keys.push(channel);
    }
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
/// The token comes as the counter's decimal string (`lua/fenced_lock.lua`: a Lua number would
/// round it above 2^53); an integer is read too.
pub(crate) fn parse_acquire(reply: &Value) -> Option<Acquire> {
    match reply {
        Value::Array(v) => match v.as_slice() {
            [Value::Int(c)] => Some(Acquire::Taken {
                count: u32::try_from(*c).ok()?,
                token: None,
            }),
            [Value::Int(c), t] => Some(Acquire::Taken {
                count: u32::try_from(*c).ok()?,
                token: Some(parse_token(t)?),
            }),
            _ => None,
        },
        Value::Int(ttl) => Some(Acquire::Held { ttl_ms: *ttl }),
        _ => None,
    }
}

/// A fencing token in a script's reply: a decimal string (exact over the whole i64 range) or an
/// integer.
fn parse_token(v: &Value) -> Option<i64> {
    match v {
        Value::Int(t) => Some(*t),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}
