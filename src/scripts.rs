//! The Lua scripts in `lua/`, hashed once and called through typed functions so that the KEYS
//! and ARGV order of each script is written down in exactly one place.
//!
//! Scripts run by `EVALSHA`; on `NOSCRIPT` (after `SCRIPT FLUSH` or a restart) redis-rs loads
//! the script and retries once, which is safe because the script never ran.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation};

pub(crate) static LOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/lock.lua")));
pub(crate) static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/unlock.lua")));
pub(crate) static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/renew.lua")));
pub(crate) static FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/force_unlock.lua")));
pub(crate) static TRIM: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/trim.lua")));

/// The unlock message of RLock (`LockPubSub.UNLOCK_MESSAGE`): wakes one waiter per client.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

pub(crate) fn lock<'a>(key: &str, lease_ms: u64, field: &str) -> ScriptInvocation<'a> {
    let mut inv = LOCK.prepare_invoke();
    inv.key(key).arg(lease_ms).arg(field);
    inv
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn unlock<'a>(
    key: &str,
    channel: &str,
    latch: &str,
    message: &str,
    lease_ms: u64,
    field: &str,
    publish: &str,
    latch_ttl_ms: u64,
) -> ScriptInvocation<'a> {
    let mut inv = UNLOCK.prepare_invoke();
    inv.key(key)
        .key(channel)
        .key(latch)
        .arg(message)
        .arg(lease_ms)
        .arg(field)
        .arg(publish)
        .arg(latch_ttl_ms);
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

pub(crate) fn force_unlock<'a>(key: &str, channel: &str, publish: &str) -> ScriptInvocation<'a> {
    let mut inv = FORCE_UNLOCK.prepare_invoke();
    inv.key(key).key(channel).arg(UNLOCK_MESSAGE).arg(publish);
    inv
}

pub(crate) fn trim<'a>(
    key: &str,
    channel: &str,
    field: &str,
    target: u32,
    lease_ms: u64,
    publish: &str,
) -> ScriptInvocation<'a> {
    let mut inv = TRIM.prepare_invoke();
    inv.key(key)
        .key(channel)
        .arg(field)
        .arg(target)
        .arg(lease_ms)
        .arg(publish)
        .arg(UNLOCK_MESSAGE);
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins every script's SHA1: editing a Redisson-compatible script must be deliberate, and
    /// must come with a reviewed update of this table.
    #[test]
    fn script_hashes_are_pinned() {
        let pinned = [
            ("lock", &LOCK, "0b13298217aa66a6663ca8530ea763c3d434ae50"),
            ("unlock", &UNLOCK, "befa8dddca0ccedf9c31c23d191cc419a6344567"),
            ("renew", &RENEW, "9c5aa92ab0197ce75f9595adfd2094055ffb83ef"),
            ("force_unlock", &FORCE_UNLOCK, "8567bc3e6a6ccf19a9e2bb6181f42e884543edcb"),
            ("trim", &TRIM, "6626487fe3b0d390d9ec8f98e239ec5b5c5b0be6"),
        ];
        for (name, script, sha) in pinned {
            assert_eq!(script.get_hash(), sha, "lua/{name}.lua changed");
        }
    }
}
