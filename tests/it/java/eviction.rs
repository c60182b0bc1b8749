//! Eviction across the fence: a lock hash that `maxmemory` evicts under a Java holder, or under
//! a Rust holder with a Java client next in line (`crate::eviction` has the Rust-only cases).
//! Redisson has no `lost()`: what it owes is that its renewal does not bring the hash back,
//! that its holder reads the loss (`isHeldByCurrentThread`, an `unlock` that throws) and that
//! its release leaves the next holder's lock alone; a stale Java token is refused by the
//! fenced resource.

use std::time::Duration;

use redisson_lock::{Client, Config};

use super::peers;
use crate::eviction::{evict_until_lost, LEASE};
use crate::support::TestServer;

/// A server evicting by `policy`, a client with [`LEASE`], and a raw connection.
async fn evicting(policy: &str) -> (TestServer, Client, redis::aio::MultiplexedConnection) {
    let server = TestServer::start_with(&["--maxmemory-policy", policy]);
    let config = Config::new(server.url()).with_watchdog_timeout(LEASE);
    let client = Client::with_config(config).await.unwrap();
    let raw = server.conn().await;
    (server, client, raw)
}

/// Resolves once `key` is gone (the eviction's end, for a holder without `lost()`).
async fn gone(mut raw: redis::aio::MultiplexedConnection, key: &str) {
    loop {
        let exists: bool = redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut raw)
            .await
            .unwrap();
        if !exists {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `allkeys-lru` evicts a Java watchdog holder's RLock: Redisson's renewal does not bring it
/// back (a renewal period later it is still gone), the Rust client takes it, and the Java
/// holder reads the loss and its `unlock` throws without touching the Rust lock. Then the other
/// way: a Rust holder evicted is told, Java takes the lock, and the Rust release fails with
/// `LeaseLost` and spares Java's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_lock_is_never_an_unnoticed_double_grant_across_the_fence() {
    let (server, client, mut raw) = evicting("allkeys-lru").await;
    for peer in peers(&server.url(), Some(LEASE)).await {
        let v = peer.version().to_owned();
        let name = format!("evicted:java:{v}");
        peer.lock("h", "lock", &name, None).await;
        assert!(peer.bool("h", &format!("held lock {name}")).await, "{v}");
        evict_until_lost(&mut raw, false, gone(server.conn().await, &name)).await;
        // A renewal period and more: Redisson's renewal found the field gone and wrote nothing.
        tokio::time::sleep(LEASE).await;
        let back: bool = redis::cmd("EXISTS")
            .arg(&name)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(
            !back,
            "{v}: Redisson's renewal brought the evicted hash back"
        );
        let taken = client
            .get_lock(&name)
            .try_lock_for(Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{v}: the evicted lock is free for the Rust client"));
        assert!(!peer.bool("h", &format!("held lock {name}")).await, "{v}");
        let e = peer.unlock("h", "lock", &name).await.unwrap_err();
        assert_eq!(e.class, "IllegalMonitorStateException", "{v}: {e:?}");
        let rust = client.get_lock(&name);
        assert!(
            rust.is_held_by_current().await.unwrap(),
            "{v}: Java's release took it"
        );
        taken.unlock().await.unwrap();

        // A Rust holder evicted; Java takes the lock next.
        let name = format!("evicted:rust:{v}");
        let held = client.get_lock(&name).lock().await.unwrap();
        evict_until_lost(&mut raw, false, held.lost()).await;
        assert!(
            peer.try_lock("n", "lock", &name, Duration::from_secs(30), None)
                .await,
            "{v}"
        );
        let e = held.unlock().await.unwrap_err();
        assert!(e.is_lease_lost(), "{v}: {e:?}");
        assert!(
            peer.bool("n", &format!("held lock {name}")).await,
            "{v}: Rust's release took Java's lock"
        );
        peer.unlock("n", "lock", &name).await.unwrap();
    }
}

/// `volatile-lru` evicts a Java fenced holder's hash (never the token counter, which has no
/// TTL): the Rust client takes the lock with a greater token, and the fenced resource refuses a
/// write with the Java holder's stale token after the new holder's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_java_fenced_holder_is_refused_by_the_resource() {
    let (server, client, mut raw) = evicting("volatile-lru").await;
    for peer in peers(&server.url(), Some(LEASE)).await {
        let v = peer.version().to_owned();
        let name = format!("evicted:jfenced:{v}");
        let resource = client.get_fenced_value(format!("evicted:jresource:{v}"));
        let stale: i64 = peer.lock("h", "fenced", &name, None).await.parse().unwrap();
        assert!(resource.set(stale, "java").await.unwrap(), "{v}");
        evict_until_lost(&mut raw, true, gone(server.conn().await, &name)).await;
        let next = client
            .get_fenced_lock(&name)
            .try_lock_for(Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{v}: the evicted lock is free for the Rust client"));
        assert!(next.token() > stale, "{v}: the token counter was evicted");
        assert!(resource.set(next.token(), "rust").await.unwrap(), "{v}");
        assert!(
            !resource.set(stale, "java, stale").await.unwrap(),
            "{v}: stale write taken"
        );
        assert_eq!(
            resource.get().await.unwrap().as_deref(),
            Some(&b"rust"[..]),
            "{v}"
        );
        let e = peer.unlock("h", "fenced", &name).await.unwrap_err();
        assert_eq!(e.class, "IllegalMonitorStateException", "{v}: {e:?}");
        next.unlock().await.unwrap();
    }
}
