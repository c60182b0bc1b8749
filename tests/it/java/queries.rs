//! Queries and refusals across the fence: hold counts after re-entry, isLocked, isHeldByThread,
//! remainTimeToLive against PTTL; an unlock by the wrong side is refused and changes nothing;
//! forceUnlock from either side frees the lock and wakes the other side's waiter.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redisson_lock::{LockError, LockOwner, LockTtl};

use super::peers;
use super::wakeups::{parked, HOLDER_LEASE, WOKEN_WITHIN};
use crate::support::{fields, pttl, TestServer};

/// What the lock key holds: its fields and whether its PTTL is in `(before - 2 s, before]`.
async fn snapshot(raw: &mut MultiplexedConnection, name: &str) -> (Vec<(String, i64)>, i64) {
    let mut f: Vec<(String, i64)> = fields(raw, name).await.into_iter().collect();
    f.sort();
    (f, pttl(raw, name).await)
}

/// `after` is the same hash as `before`, with a PTTL that only ran down (no write touched it).
fn unchanged(before: &(Vec<(String, i64)>, i64), after: &(Vec<(String, i64)>, i64), what: &str) {
    assert_eq!(before.0, after.0, "{what}: the hash changed");
    assert!(
        after.1 <= before.1 && after.1 > before.1 - 2_000,
        "{what}: PTTL went from {} to {}",
        before.1,
        after.1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_hold_seen_and_refused_by_java() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("iq:rust:{v}");
        let owner = LockOwner::new(7);
        let lock = client.get_lock(&name).with_owner(owner);
        let outer = lock.lock_with_lease(HOLDER_LEASE).await.unwrap();
        let inner = lock.lock_with_lease(HOLDER_LEASE).await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 2, "{v}");

        let q = |op: &str| format!("{op} lock {name}");
        assert!(peer.bool("a", &q("islocked")).await, "{v}");
        assert_eq!(
            peer.int("a", &q("holdcount")).await,
            0,
            "{v}: Java's own count"
        );
        assert!(!peer.bool("a", &q("held")).await, "{v}");
        let tid = peer.tid("a").await;
        assert!(
            !peer.bool("a", &format!("heldby lock {name} {tid}")).await,
            "{v}"
        );
        // remainTimeToLive is a PTTL read between these two.
        let p1 = pttl(&mut raw, &name).await;
        let ttl = peer.int("a", &q("ttl")).await;
        let p2 = pttl(&mut raw, &name).await;
        assert!(
            p2 <= ttl && ttl <= p1,
            "{v}: Java ttl {ttl} not within [{p2}, {p1}]"
        );

        // A Java unlock of the Rust hold is refused and changes nothing.
        let before = snapshot(&mut raw, &name).await;
        let refused = peer.unlock("a", "lock", &name).await.unwrap_err();
        assert_eq!(
            refused.class, "IllegalMonitorStateException",
            "{v}: {refused:?}"
        );
        unchanged(&before, &snapshot(&mut raw, &name).await, &v);
        assert_eq!(lock.hold_count().await.unwrap(), 2, "{v}");

        inner.unlock().await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 1, "{v}");
        outer.unlock().await.unwrap();
        assert!(!peer.bool("a", &q("islocked")).await, "{v}");
        assert_eq!(peer.int("a", &q("ttl")).await, -2, "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_hold_seen_and_refused_by_rust() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("iq:java:{v}");
        peer.lock("a", "lock", &name, Some(HOLDER_LEASE)).await;
        peer.lock("a", "lock", &name, Some(HOLDER_LEASE)).await;
        assert_eq!(
            peer.int("a", &format!("holdcount lock {name}")).await,
            2,
            "{v}"
        );
        let tid = peer.tid("a").await;
        assert!(
            peer.bool("b", &format!("heldby lock {name} {tid}")).await,
            "{v}"
        );
        assert!(peer.bool("a", &format!("held lock {name}")).await, "{v}");
        assert_eq!(
            fields(&mut raw, &name).await.get(&peer.field("a").await),
            Some(&2),
            "{v}"
        );

        let owner = LockOwner::new(7);
        let lock = client.get_lock(&name).with_owner(owner);
        assert!(lock.is_locked().await.unwrap(), "{v}");
        assert_eq!(lock.hold_count().await.unwrap(), 0, "{v}");
        assert!(!lock.is_held_by(owner).await.unwrap(), "{v}");
        let p1 = pttl(&mut raw, &name).await;
        let ttl = lock.remain_time_to_live().await.unwrap();
        let p2 = pttl(&mut raw, &name).await;
        match ttl {
            LockTtl::Expires(d) => {
                let ms = d.as_millis() as i64;
                assert!(
                    p2 <= ms && ms <= p1,
                    "{v}: Rust ttl {ms} not within [{p2}, {p1}]"
                );
            }
            other => panic!("{v}: Rust ttl {other:?} of a Java hold with a lease"),
        }

        // A Rust unlock of the Java hold is refused and changes nothing.
        let before = snapshot(&mut raw, &name).await;
        let refused = lock.unlock().await.unwrap_err();
        assert!(
            matches!(refused, LockError::NotOwner { .. }),
            "{v}: {refused:?}"
        );
        unchanged(&before, &snapshot(&mut raw, &name).await, &v);
        assert_eq!(
            peer.int("a", &format!("holdcount lock {name}")).await,
            2,
            "{v}"
        );

        peer.unlock("a", "lock", &name).await.unwrap();
        assert_eq!(
            peer.int("a", &format!("holdcount lock {name}")).await,
            1,
            "{v}"
        );
        peer.unlock("a", "lock", &name).await.unwrap();
        assert!(!lock.is_locked().await.unwrap(), "{v}");
        assert_eq!(
            lock.remain_time_to_live().await.unwrap(),
            LockTtl::NotLocked,
            "{v}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_force_unlock_frees_a_java_hold_and_wakes_a_java_waiter() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("iq:rforce:{v}");
        peer.lock("h", "lock", &name, Some(HOLDER_LEASE)).await;
        let waiter = peer.send("w", &format!("trylock lock {name} 50000 -1"));
        parked(&server, &name, 1).await;
        let forced = Instant::now();
        assert!(client.get_lock(&name).force_unlock().await.unwrap(), "{v}");
        assert_eq!(waiter.await, Ok("true".to_owned()), "{v}");
        assert!(
            forced.elapsed() < WOKEN_WITHIN,
            "{v}: woken after {:?}",
            forced.elapsed()
        );
        // The old holder's hold is gone: its unlock is refused.
        let refused = peer.unlock("h", "lock", &name).await.unwrap_err();
        assert_eq!(refused.class, "IllegalMonitorStateException", "{v}");
        peer.unlock("w", "lock", &name).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_force_unlock_frees_a_rust_hold_and_wakes_a_rust_waiter() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("iq:jforce:{v}");
        let holder = client.get_lock(&name).with_owner(LockOwner::new(1));
        let guard = holder.lock_with_lease(HOLDER_LEASE).await.unwrap();
        let lock = client.get_lock(&name).with_owner(LockOwner::new(2));
        let waiter = tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(50)).await.unwrap();
            let at = Instant::now();
            (g, at)
        });
        parked(&server, &name, 1).await;
        let forced = Instant::now();
        assert!(
            peer.bool("a", &format!("forceunlock lock {name}")).await,
            "{v}"
        );
        let (g, at) = waiter.await.unwrap();
        let g = g.unwrap_or_else(|| panic!("{v}: the Rust waiter did not get the lock"));
        let after = at.saturating_duration_since(forced);
        assert!(after < WOKEN_WITHIN, "{v}: woken after {after:?}");
        // The old guard's hold is gone: its release says so.
        assert!(
            matches!(guard.unlock().await, Err(LockError::LeaseLost { .. })),
            "{v}"
        );
        g.unlock().await.unwrap();
    }
}
