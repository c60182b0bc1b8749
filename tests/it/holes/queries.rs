//! Query results checked against what Redis holds (issue 23, area 6): `remain_time_to_live`
//! against `PTTL` on every lock kind, for a sub-second, a seconds and a minutes lease (and the
//! watchdog's), `hold_count` and `is_locked` against the hash, the synchronizers' counts against
//! their keys, and a permit's lease against its score. A query that answers in the wrong unit,
//! from the wrong key, truncated or rounded, fails here; the shape alone would not.

use std::time::{Duration, Instant};

use crate::support::redisson::{now_ms, pes_timeouts, unhex};
use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{Lock, LockKind, LockTtl};

/// The leases every kind is checked with: sub-second, seconds, minutes.
const LEASES: [Duration; 3] = [
    Duration::from_millis(900),
    Duration::from_millis(7_300),
    Duration::from_secs(300),
];

/// Rounding between Redis's PTTL and the query's (both integer milliseconds of the same key).
const SLACK_MS: i64 = 2;

/// `remain_time_to_live` lies between two `PTTL`s read just before and just after it.
async fn ttl_is_bracketed<K: LockKind>(
    lock: &Lock<K>,
    raw: &mut MultiplexedConnection,
    what: &str,
) {
    let name = lock.name().to_owned();
    let before = pttl(raw, &name).await;
    let answer = lock.remain_time_to_live().await.unwrap();
    let after = pttl(raw, &name).await;
    assert!(
        before > 0 && after > 0,
        "{what}: the key expired under the test"
    );
    let LockTtl::Expires(left) = answer else {
        panic!("{what}: {answer:?} while Redis says PTTL {before}");
    };
    let left = left.as_millis() as i64;
    assert!(
        after - SLACK_MS <= left && left <= before + SLACK_MS,
        "{what}: remain_time_to_live {left} ms, PTTL {before} -> {after} ms"
    );
}

/// Every kind, every lease: the TTL query matches PTTL, the key's TTL is the lease (within what
/// the acquire itself took), and `hold_count` / `is_locked` match the hash.
async fn check_kind<K: LockKind>(lock: Lock<K>, raw: &mut MultiplexedConnection, kind: &str) {
    let name = lock.name().to_owned();
    assert_eq!(
        lock.remain_time_to_live().await.unwrap(),
        LockTtl::NotLocked,
        "{kind}"
    );
    assert!(!lock.is_locked().await.unwrap(), "{kind}");
    assert_eq!(lock.hold_count().await.unwrap(), 0, "{kind}");
    for lease in LEASES {
        let what = format!("{kind}, lease {lease:?}");
        let sent = Instant::now();
        let guard = lock.lock_with_lease(lease).await.unwrap();
        assert_eq!(guard.lease(), Some(lease), "{what}");
        let ttl = pttl(raw, &name).await;
        let since_sent = sent.elapsed().as_millis() as i64;
        let lease_ms = lease.as_millis() as i64;
        // The script set the lease after the acquire was sent and before PTTL was read: the TTL
        // is the lease less at most the time since the send (a 1 ms rounding either way).
        assert!(
            ttl <= lease_ms && ttl >= lease_ms - since_sent - 1,
            "{what}: PTTL {ttl} ms, {since_sent} ms after the acquire was sent"
        );
        ttl_is_bracketed(&lock, raw, &what).await;
        assert!(lock.is_locked().await.unwrap(), "{what}");
        assert_eq!(lock.hold_count().await.unwrap(), 1, "{what}");
        // A re-entry with the same lease: the count follows the hash.
        {
            let again = guard.reenter_with_lease(lease).await.unwrap();
            assert_eq!(lock.hold_count().await.unwrap(), 2, "{what}");
            ttl_is_bracketed(&lock, raw, &what).await;
            again.unlock().await.unwrap();
        }
        assert_eq!(lock.hold_count().await.unwrap(), 1, "{what}");
        guard.unlock().await.unwrap();
        assert_eq!(
            lock.remain_time_to_live().await.unwrap(),
            LockTtl::NotLocked,
            "{what}"
        );
        assert!(!lock.is_locked().await.unwrap(), "{what}");
    }
    // The watchdog lease: what the client's config says, and PTTL again.
    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.lease(), None, "{kind}");
    ttl_is_bracketed(&lock, raw, &format!("{kind}, watchdog")).await;
    let ttl = pttl(raw, &name).await;
    assert!(ttl > 20_000 && ttl <= 30_000, "{kind}: watchdog PTTL {ttl}");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_queries_match_what_redis_holds_on_every_kind() {
    let (_server, client, mut raw) = fixture().await;
    check_kind(client.get_lock("q:lock"), &mut raw, "lock").await;
    check_kind(client.get_fair_lock("q:fair"), &mut raw, "fair").await;
    check_kind(client.get_fenced_lock("q:fenced"), &mut raw, "fenced").await;
    check_kind(client.get_spin_lock("q:spin"), &mut raw, "spin").await;
    let rw = client.get_read_write_lock("q:rw");
    check_kind(rw.read_lock(), &mut raw, "read").await;
    check_kind(rw.write_lock(), &mut raw, "write").await;
}

/// A foreign hold with no expiry reads as `NoExpiry`, one with a TTL set by hand (minutes, and
/// past 2^31 ms) as that TTL: the query reads the key's own PTTL, not something derived from
/// this client's leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_ttls_read_as_redis_holds_them() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("q:foreign");
    hold_as_java(&mut raw, "q:foreign", JAVA_FIELD).await;
    let _: () = raw.persist("q:foreign").await.unwrap();
    assert_eq!(lock.remain_time_to_live().await.unwrap(), LockTtl::NoExpiry);
    assert_eq!(
        lock.hold_count().await.unwrap(),
        0,
        "a foreign hold is not ours"
    );
    for ms in [450_i64, 61_000, 3_000_000_000] {
        let _: () = raw.pexpire("q:foreign", ms).await.unwrap();
        ttl_is_bracketed(&lock, &mut raw, &format!("foreign, PEXPIRE {ms}")).await;
    }
}

/// The synchronizers' queries read the numbers Redis holds, across values that a narrower
/// integer or a unit slip would change; a permit's lease is its score, lease after the acquire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronizer_queries_match_what_redis_holds() {
    let (_server, client, mut raw) = fixture().await;
    // Semaphore: the count is the key's value.
    let sem = client.get_semaphore("q:sem");
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert!(sem.try_set_permits(70_000).await.unwrap());
    let get = |raw: &mut MultiplexedConnection, key: &'static str| {
        let mut raw = raw.clone();
        async move {
            get_str(&mut raw, key)
                .await
                .unwrap()
                .parse::<i64>()
                .unwrap()
        }
    };
    assert_eq!(sem.available_permits().await.unwrap(), 70_000);
    sem.acquire_many(3).await.unwrap();
    assert_eq!(
        sem.available_permits().await.unwrap(),
        get(&mut raw, "q:sem").await
    );
    assert_eq!(get(&mut raw, "q:sem").await, 69_997);
    sem.add_permits(i32::MAX - 69_997).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), i64::from(i32::MAX));
    sem.add_permits(i32::MIN).await.unwrap();
    sem.add_permits(-5).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), -6);
    assert_eq!(get(&mut raw, "q:sem").await, -6);
    // Latch: the count is the key's value, past 2^32.
    let latch = client.get_count_down_latch("q:latch");
    assert_eq!(latch.get_count().await.unwrap(), 0);
    let big = (1_i64 << 33) + 7;
    assert!(latch.try_set_count(big).await.unwrap());
    latch.count_down().await.unwrap();
    assert_eq!(latch.get_count().await.unwrap(), big - 1);
    assert_eq!(get(&mut raw, "q:latch").await, big - 1);
    // Permit-expirable semaphore: available permits and each permit's lease end.
    let pes = client.get_permit_expirable_semaphore("q:pes");
    assert!(pes.try_set_permits(4).await.unwrap());
    for lease in LEASES {
        let before = now_ms();
        let id = pes.with_lease(lease).acquire().await.unwrap();
        let after = now_ms();
        let score: f64 = raw
            .zscore(pes_timeouts("q:pes"), unhex(id.as_str()))
            .await
            .unwrap();
        let (lo, hi) = (
            before + lease.as_millis() as u64,
            after + lease.as_millis() as u64,
        );
        assert!(
            (lo as f64..=hi as f64).contains(&score),
            "lease {lease:?}: the permit ends at {score}, not in [{lo}, {hi}]"
        );
        // A new lease counts from the update, in the same unit.
        let longer = lease * 2;
        let before = now_ms();
        assert!(pes.update_lease_time(&id, Some(longer)).await.unwrap());
        let after = now_ms();
        let score: f64 = raw
            .zscore(pes_timeouts("q:pes"), unhex(id.as_str()))
            .await
            .unwrap();
        let (lo, hi) = (
            before + longer.as_millis() as u64,
            after + longer.as_millis() as u64,
        );
        assert!(
            (lo as f64..=hi as f64).contains(&score),
            "updated lease {longer:?}: the permit ends at {score}, not in [{lo}, {hi}]"
        );
        assert_eq!(pes.available_permits().await.unwrap(), 3, "lease {lease:?}");
        assert_eq!(get(&mut raw, "q:pes").await, 3);
        pes.release(&id).await.unwrap();
        assert_eq!(pes.available_permits().await.unwrap(), 4);
    }
}
