//! The Lua scripts in `lua/`, hashed once and called through typed functions so that the KEYS
//! and ARGV order of each script is written down in exactly one place.
//!
//! Scripts run by `EVALSHA`; on `NOSCRIPT` (after `SCRIPT FLUSH` or a restart) redis-rs loads
//! the script and retries once, which is safe because the script never ran.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation};

macro_rules! scripts {
    ($($name:ident => $file:literal,)*) => {
        $(pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../lua/", $file))));)*
        /// Every script with its file name (for the SHA pins).
        #[cfg(test)]
        pub(crate) fn all() -> Vec<(&'static str, &'static Script)> {
            vec![$(($file, &*$name)),*]
        }
    };
}

scripts! {
    LOCK => "lock.lua",
    UNLOCK => "unlock.lua",
    RENEW => "renew.lua",
    EXPIRE => "expire.lua",
    FORCE_UNLOCK => "force_unlock.lua",
    TRIM => "trim.lua",
    FENCED_LOCK => "fenced_lock.lua",
    FAIR_LOCK => "fair_lock.lua",
    FAIR_UNLOCK => "fair_unlock.lua",
    FAIR_CANCEL => "fair_cancel.lua",
    FAIR_FORCE_UNLOCK => "fair_force_unlock.lua",
    READ_LOCK => "read_lock.lua",
    READ_UNLOCK => "read_unlock.lua",
    READ_RENEW => "read_renew.lua",
    WRITE_LOCK => "write_lock.lua",
    WRITE_UNLOCK => "write_unlock.lua",
    RW_FORCE_UNLOCK => "rw_force_unlock.lua",
    RW_IS_LOCKED => "rw_is_locked.lua",
}

/// What a release sends beside its [`Op`]: its unlock latch (`redisson_unlock_latch:...`) and
/// how long the latch lives.
#[derive(Debug)]
pub struct Latch<'a> {
    /// The latch key.
    pub key: &'a str,
    /// Its PX: as long as the release may be retried.
    pub ttl_ms: u64,
}

/// The names and arguments of one operation.
#[derive(Debug)]
pub struct Op<'a> {
    /// The lock key.
    pub key: &'a str,
    /// The kind's unlock channel.
    pub channel: &'a str,
    /// The owner's hash field (already adjusted by the kind).
    pub field: &'a str,
    /// Lease in milliseconds.
    pub lease_ms: u64,
    /// Publish command.
    pub publish: &'a str,
    /// Epoch milliseconds (client clock), for kinds that need it.
    pub now_ms: u64,
    /// How long a queued waiter may be absent (fair lock), in milliseconds.
    pub wait_ms: u64,
}

/// `LockPubSub.UNLOCK_MESSAGE`: wakes one waiter per client.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// `LockPubSub.READ_UNLOCK_MESSAGE`: wakes every waiter (a write lock was released).
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

pub(crate) fn lock<'a>(key: &str, lease_ms: u64, field: &str) -> ScriptInvocation<'a> {
    let mut inv = LOCK.prepare_invoke();
    inv.key(key).arg(lease_ms).arg(field);
    inv
}

pub(crate) fn fenced_lock<'a>(
    key: &str,
    token_key: &str,
    lease_ms: u64,
    field: &str,
) -> ScriptInvocation<'a> {
    let mut inv = FENCED_LOCK.prepare_invoke();
    inv.key(key).key(token_key).arg(lease_ms).arg(field);
    inv
}

pub(crate) fn unlock<'a>(op: &Op<'_>, latch: &Latch<'_>) -> ScriptInvocation<'a> {
    let mut inv = UNLOCK.prepare_invoke();
    inv.key(op.key)
        .key(op.channel)
        .key(latch.key)
        .arg(UNLOCK_MESSAGE)
        .arg(op.lease_ms)
        .arg(op.field)
        .arg(op.publish)
        .arg(latch.ttl_ms);
    inv
}

pub(crate) fn renew<'a, 'k>(
    lease_ms: u64,
    locks: impl IntoIterator<Item = (&'k str, &'k str)>,
) -> ScriptInvocation<'a> {
    let mut inv = RENEW.prepare_invoke();
    inv.arg(lease_ms);
    for (key, field) in locks {
        inv.key(key).arg(field);
    }
    inv
}

/// Owner-checked exact `PEXPIRE` (see `lua/expire.lua`).
pub(crate) fn expire<'a>(key: &str, field: &str, expiry_ms: u64) -> ScriptInvocation<'a> {
    let mut inv = EXPIRE.prepare_invoke();
    inv.key(key).arg(expiry_ms).arg(field);
    inv
}

/// `locks`: (RW hash, owner's timeout prefix, read field).
pub(crate) fn read_renew<'a, 'k>(
    lease_ms: u64,
    locks: impl IntoIterator<Item = (&'k str, &'k str, &'k str)>,
) -> ScriptInvocation<'a> {
    let mut inv = READ_RENEW.prepare_invoke();
    inv.arg(lease_ms);
    for (key, prefix, field) in locks {
        inv.key(key).key(prefix).arg(field);
    }
    inv
}

pub(crate) fn force_unlock<'a>(key: &str, channel: &str, publish: &str) -> ScriptInvocation<'a> {
    let mut inv = FORCE_UNLOCK.prepare_invoke();
    inv.key(key).key(channel).arg(UNLOCK_MESSAGE).arg(publish);
    inv
}

/// Trim layouts (ARGV[6] of trim.lua).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A plain RLock hash (RLock, fenced).
    Plain,
    /// Fair lock: `extra_key` is the queue; a freed lock wakes its head on the head's channel.
    Fair,
    /// Read side: `extra_key` is the owner's `rwlock_timeout` prefix.
    Read,
    /// Write side of a read-write lock.
    Write,
}

/// `extra_key`: KEYS[3] of trim.lua (see [`Layout`]); the lock key when the layout needs none.
pub(crate) fn trim<'a>(
    op: &Op<'_>,
    extra_key: Option<&str>,
    target: u32,
    layout: Layout,
) -> ScriptInvocation<'a> {
    let (layout, message) = match layout {
        Layout::Plain => ("plain", UNLOCK_MESSAGE),
        Layout::Fair => ("fair", UNLOCK_MESSAGE),
        Layout::Read => ("read", UNLOCK_MESSAGE),
        Layout::Write => ("write", READ_UNLOCK_MESSAGE),
    };
    let mut inv = TRIM.prepare_invoke();
    inv.key(op.key)
        .key(op.channel)
        .key(extra_key.unwrap_or(op.key))
        .arg(op.field)
        .arg(target)
        .arg(op.lease_ms)
        .arg(op.publish)
        .arg(message)
        .arg(layout);
    inv
}

/// KEYS of every fair-lock script: lock, queue, deadlines.
pub(crate) struct FairKeys<'k> {
    pub(crate) lock: &'k str,
    pub(crate) queue: &'k str,
    pub(crate) timeouts: &'k str,
    pub(crate) channel: &'k str,
}

pub(crate) fn fair_lock<'a>(
    k: &FairKeys<'_>,
    lease_ms: u64,
    field: &str,
    wait_ms: u64,
    now_ms: u64,
    enqueue: bool,
) -> ScriptInvocation<'a> {
    let mut inv = FAIR_LOCK.prepare_invoke();
    inv.key(k.lock)
        .key(k.queue)
        .key(k.timeouts)
        .arg(lease_ms)
        .arg(field)
        .arg(wait_ms)
        .arg(now_ms)
        .arg(if enqueue { "1" } else { "0" });
    inv
}

pub(crate) fn fair_unlock<'a>(
    k: &FairKeys<'_>,
    op: &Op<'_>,
    latch: &Latch<'_>,
) -> ScriptInvocation<'a> {
    let mut inv = FAIR_UNLOCK.prepare_invoke();
    inv.key(k.lock)
        .key(k.queue)
        .key(k.timeouts)
        .key(k.channel)
        .key(latch.key)
        .arg(UNLOCK_MESSAGE)
        .arg(op.lease_ms)
        .arg(op.field)
        .arg(op.now_ms)
        .arg(op.publish)
        .arg(latch.ttl_ms);
    inv
}

pub(crate) fn fair_cancel<'a>(
    k: &FairKeys<'_>,
    field: &str,
    wait_ms: u64,
    publish: &str,
) -> ScriptInvocation<'a> {
    let mut inv = FAIR_CANCEL.prepare_invoke();
    inv.key(k.queue)
        .key(k.timeouts)
        .key(k.lock)
        .key(k.channel)
        .arg(field)
        .arg(wait_ms)
        .arg(publish)
        .arg(UNLOCK_MESSAGE);
    inv
}

pub(crate) fn fair_force_unlock<'a>(
    k: &FairKeys<'_>,
    now_ms: u64,
    publish: &str,
) -> ScriptInvocation<'a> {
    let mut inv = FAIR_FORCE_UNLOCK.prepare_invoke();
    inv.key(k.lock)
        .key(k.queue)
        .key(k.timeouts)
        .key(k.channel)
        .arg(UNLOCK_MESSAGE)
        .arg(now_ms)
        .arg(publish);
    inv
}

pub(crate) fn read_lock<'a>(
    key: &str,
    timeout_prefix: &str,
    lease_ms: u64,
    field: &str,
    write_field: &str,
) -> ScriptInvocation<'a> {
    let mut inv = READ_LOCK.prepare_invoke();
    inv.key(key)
        .key(timeout_prefix)
        .arg(lease_ms)
        .arg(field)
        .arg(write_field);
    inv
}

pub(crate) fn read_unlock<'a>(
    op: &Op<'_>,
    timeout_prefix: &str,
    key_prefix: &str,
    latch: &Latch<'_>,
) -> ScriptInvocation<'a> {
    let mut inv = READ_UNLOCK.prepare_invoke();
    inv.key(op.key)
        .key(op.channel)
        .key(timeout_prefix)
        .key(key_prefix)
        .key(latch.key)
        .arg(UNLOCK_MESSAGE)
        .arg(op.field)
        .arg(op.publish)
        .arg(latch.ttl_ms);
    inv
}

pub(crate) fn write_lock<'a>(key: &str, lease_ms: u64, field: &str) -> ScriptInvocation<'a> {
    let mut inv = WRITE_LOCK.prepare_invoke();
    inv.key(key).arg(lease_ms).arg(field);
    inv
}

pub(crate) fn write_unlock<'a>(op: &Op<'_>, latch: &Latch<'_>) -> ScriptInvocation<'a> {
    let mut inv = WRITE_UNLOCK.prepare_invoke();
    inv.key(op.key)
        .key(op.channel)
        .key(latch.key)
        .arg(READ_UNLOCK_MESSAGE)
        .arg(op.lease_ms)
        .arg(op.field)
        .arg(op.publish)
        .arg(latch.ttl_ms);
    inv
}

/// `mode`: `read` or `write`.
pub(crate) fn rw_force_unlock<'a>(
    key: &str,
    channel: &str,
    mode: &str,
    publish: &str,
) -> ScriptInvocation<'a> {
    let message = if mode == "write" {
        READ_UNLOCK_MESSAGE
    } else {
        UNLOCK_MESSAGE
    };
    let mut inv = RW_FORCE_UNLOCK.prepare_invoke();
    inv.key(key)
        .key(channel)
        .arg(mode)
        .arg(message)
        .arg(publish);
    inv
}

pub(crate) fn rw_is_locked<'a>(key: &str, mode: &str) -> ScriptInvocation<'a> {
    let mut inv = RW_IS_LOCKED.prepare_invoke();
    inv.key(key).arg(mode);
    inv
}

#[cfg(test)]
mod tests {
    /// Pins every script's SHA1: editing a Redisson-compatible script must be deliberate, and
    /// must come with a reviewed update of this table (`sha1sum lua/*.lua`).
    #[test]
    fn script_hashes_are_pinned() {
        let pinned = [
            ("lock.lua", "0b13298217aa66a6663ca8530ea763c3d434ae50"),
            ("unlock.lua", "248f8a556e42da670c69fcc8394aff2475b98a9d"),
            ("renew.lua", "80e26ac9a2f45730c658795c90023a70d74d2bc2"),
            ("expire.lua", "6bc1abcab0c540f2360887099bc2ea72c836174c"),
            (
                "force_unlock.lua",
                "7b1b6c873f95a9764550700f7b83511c7db84e0c",
            ),
            ("trim.lua", "a4f0cb67604562e9f117cc8889610d9c0c6d0653"),
            (
                "fenced_lock.lua",
                "9025b303a578f9c7b7c98cf3a1e20ac62f7187fb",
            ),
            ("fair_lock.lua", "16090d33dbb39384259d44e739846299b3c2fc4c"),
            (
                "fair_unlock.lua",
                "1b4350c13814d60e6a6c4500592e5a5b1b11881d",
            ),
            (
                "fair_cancel.lua",
                "2950f02368ee38c790fe19590a88bf977d579f34",
            ),
            (
                "fair_force_unlock.lua",
                "a87c8e3b70588708d4e9805a66b17df62dced59f",
            ),
            ("read_lock.lua", "4a22ed1987246e76dc044257ffc9cb28ebdb0a84"),
            (
                "read_unlock.lua",
                "ac3fe3d49c04b269f7375595f95b4a0ddb8c7443",
            ),
            ("read_renew.lua", "95bbf059bf4239071d521a921be7f5512784acb2"),
            ("write_lock.lua", "0bf3dbdf9a0780bdc50e0bd1ef842a73b1ec9bc1"),
            (
                "write_unlock.lua",
                "eb2edcde2531a7569ebadea4c01a8a99db255e5b",
            ),
            (
                "rw_force_unlock.lua",
                "94e0f91b09faa4f2da742707396a974f7ade6449",
            ),
            (
                "rw_is_locked.lua",
                "56f8b893ed2242edfb42babb6d059423b0b89bea",
            ),
        ];
        let all = super::all();
        assert_eq!(all.len(), pinned.len(), "every script is pinned");
        for ((file, script), (pfile, sha)) in all.into_iter().zip(pinned) {
            assert_eq!(file, pfile);
            assert_eq!(script.get_hash(), sha, "lua/{file} changed");
        }
    }
}
