//! Redisson's naming rules for the keys and channels that sit beside a lock.
//!
//! Related names must land in the lock's cluster slot, so Redisson wraps the lock name in a hash
//! tag unless the name already contains `{` anywhere (it does not check for a matching `}`).
//! We reproduce `RedissonObject.prefixName`/`suffixName` exactly.

/// Channel prefix of every Redisson lock (`LockPubSub`).
pub(crate) const LOCK_CHANNEL_PREFIX: &str = "redisson_lock__channel";
/// Channel prefix of read-write locks.
pub(crate) const RWLOCK_CHANNEL_PREFIX: &str = "redisson_rwlock";
/// Fencing token counter prefix (`RedissonFencedLock`).
pub(crate) const TOKEN_PREFIX: &str = "redisson_lock_token";
/// Fair lock queue prefix (`RedissonFairLock`).
pub(crate) const FAIR_QUEUE_PREFIX: &str = "redisson_lock_queue";
/// Fair lock waiter-deadline ZSET prefix.
pub(crate) const FAIR_TIMEOUT_PREFIX: &str = "redisson_lock_timeout";
/// Prefix of the unlock latch keys that make unlock retries idempotent (Redisson 3.24+).
pub(crate) const UNLOCK_LATCH_PREFIX: &str = "redisson_unlock_latch";

/// Channel prefix of `RSemaphore` and `RPermitExpirableSemaphore` (`redisson_sc:{name}`).
pub(crate) const SEMAPHORE_CHANNEL_PREFIX: &str = "redisson_sc";
/// Prefix of our semaphore request receipts (acquire/release made repeatable exactly once; Java
/// never reads them): `redisson_semaphore_latch:{name}:<request id>`.
pub(crate) const SEMAPHORE_RECEIPT_PREFIX: &str = "redisson_semaphore_latch";

/// `RCountDownLatch`'s channel: always `redisson_countdownlatch__channel__{<name>}`, braces
/// added even when the name has some (Redisson does not use `prefix_name` here).
pub(crate) fn count_down_latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A semaphore request's receipt: `redisson_semaphore_latch:{name}:<request id>`.
pub(crate) fn semaphore_receipt(name: &str, request_id: &str) -> String {
    let mut s = prefix_name(SEMAPHORE_RECEIPT_PREFIX, name);
    s.push(':');
    s.push_str(request_id);
    s
}

/// `prefix:{name}`, or `prefix:name` when `name` already contains `{`.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `{name}:suffix`, or `name:suffix` when `name` already contains `{`.
pub(crate) fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// The unlock latch of one unlock request: `redisson_unlock_latch:{name}:<request id>`.
pub(crate) fn unlock_latch(name: &str, request_id: &str) -> String {
    let mut s = prefix_name(UNLOCK_LATCH_PREFIX, name);
    s.push(':');
    s.push_str(request_id);
    s
}

/// Hash slots of a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// The Redis Cluster hash slot of a key: CRC16/XMODEM of its hash tag (the part between the
/// first `{` and the next `}` when non-empty) or of the whole key. The crate's one slot
/// function: the router sends by it, the batcher groups by it, the name checks compare it.
pub(crate) fn slot_of(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &b in tagged {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

/// Why a lock's or synchronizer's `name` is refused (nothing is ever sent for it): empty, or on a
/// cluster one of its `related` keys or channels in another hash slot than the name itself
/// (Redisson's naming rule puts the channel and latch of other names in another slot).
pub(crate) fn refusal<'a>(
    name: &str,
    cluster: bool,
    related: impl IntoIterator<Item = &'a str>,
) -> Option<&'static str> {
    if name.is_empty() {
        return Some("the name must not be empty");
    }
    let slot = slot_of(name.as_bytes());
    let split = cluster && related.into_iter().any(|k| slot_of(k.as_bytes()) != slot);
    split.then_some(
        "on a Redis Cluster the name must keep its related keys in its hash slot: use a name \
         without `{` `}` or with one non-empty hash tag, e.g. `{orders}:42` (Redisson's naming \
         rule puts the channel and latch of other names in another slot)",
    )
}

/// A fresh unlock request id: 16 random bytes as 32 lowercase hex characters (Redisson's
/// `ServiceManager.generateId`), here a random UUID in its simple form.
pub(crate) fn request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock_channel(name: &str) -> String {
        prefix_name(LOCK_CHANNEL_PREFIX, name)
    }

    #[test]
    fn prefix_and_suffix_follow_redisson() {
        assert_eq!(lock_channel("myLock"), "redisson_lock__channel:{myLock}");
        assert_eq!(
            lock_channel("{user1}:lock"),
            "redisson_lock__channel:{user1}:lock"
        );
        // Redisson only tests for `{`, not for a matching `}`.
        assert_eq!(lock_channel("a{b"), "redisson_lock__channel:a{b");
        assert_eq!(suffix_name("n", "timeout"), "{n}:timeout");
        assert_eq!(suffix_name("{n}x", "timeout"), "{n}x:timeout");
        assert_eq!(unlock_latch("n", "ab"), "redisson_unlock_latch:{n}:ab");
    }

    #[test]
    fn hash_slots_match_redis() {
        use redis::cluster_routing::Slot;
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(
            slot_of(b"myLock"),
            slot_of(b"redisson_lock__channel:{myLock}")
        );
        assert_eq!(slot_of(b"{user1}:lock"), slot_of(b"user1"));
        // An empty tag is no tag: the whole key counts.
        assert_ne!(slot_of(b"{}x"), slot_of(b""));
        // The same slots as redis-rs's.
        let named = (0..5000).map(|n| format!("redisson_lock__channel:{{name-{n}}}"));
        let odd = ["{user1000}.following", "a{}b", "x{y", "lock:{tag}:1", ""].map(String::from);
        for key in named.chain(odd) {
            assert_eq!(
                Slot::new(slot_of(key.as_bytes())),
                Some(Slot::for_key(&key)),
                "{key}"
            );
        }
    }

    #[test]
    fn request_ids_are_32_hex() {
        let a = request_id();
        let b = request_id();
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
