//! RLock wake-ups by message, both ways: a Java unlock wakes a parked Rust waiter, a Rust unlock
//! wakes a parked Java waiter, long before the holder's lease would have ended.

use std::time::{Duration, Instant};

use redisson_lock::LockOwner;

use super::peers;
use crate::support::redisson::channel;
use crate::support::{channel_subscribers, TestServer};

/// The holder's lease: a waiter not woken by the message would sleep on until it ends.
pub const HOLDER_LEASE: Duration = Duration::from_secs(60);
/// A woken waiter must have the lock within this bound after the release.
pub const WOKEN_WITHIN: Duration = Duration::from_secs(20);

/// After the subscription shows, the time a waiter gets to make its attempt after subscribing
/// and go to sleep on the message. Not a timing claim: a correct crate passes without it; it
/// keeps a release that sends no (or a wrong) message from passing by luck, when it lands
/// between the waiter's SUBSCRIBE and its next attempt (seen with a cold JVM).
const SETTLE: Duration = Duration::from_secs(1);

/// Waits until `n` clients are subscribed to the lock's unlock channel (the waiter parked).
pub async fn parked(server: &TestServer, name: &str, n: i64) {
    assert!(
        channel_subscribers(server, &channel(name), n).await,
        "no waiter parked on {}",
        channel(name)
    );
    tokio::time::sleep(SETTLE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_unlock_wakes_a_rust_waiter() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("iw:j2r:{v}");
        peer.lock("h", "lock", &name, Some(HOLDER_LEASE)).await;
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));
        let waiter = tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            let at = Instant::now();
            guard.unlock().await.unwrap();
            at
        });
        parked(&server, &name, 1).await;
        let released = Instant::now();
        peer.unlock("h", "lock", &name).await.unwrap();
        let got = tokio::time::timeout(HOLDER_LEASE, waiter)
            .await
            .unwrap_or_else(|_| panic!("{v}: the Rust waiter was not woken"))
            .unwrap();
        let after = got.saturating_duration_since(released);
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Rust waiter took {after:?} after the Java unlock (lease {HOLDER_LEASE:?})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_unlock_wakes_a_java_waiter() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("iw:r2j:{v}");
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));
        let guard = lock.lock_with_lease(HOLDER_LEASE).await.unwrap();
        // Java waits up to 50 s: without the message it would wake at 50 s and fail.
        let waiter = peer.send("w", &format!("trylock lock {name} 50000 -1"));
        parked(&server, &name, 1).await;
        let released = Instant::now();
        guard.unlock().await.unwrap();
        assert_eq!(waiter.await, Ok("true".to_owned()), "{v}");
        let after = released.elapsed();
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Java waiter took {after:?} after the Rust unlock (lease {HOLDER_LEASE:?})"
        );
        peer.unlock("w", "lock", &name).await.unwrap();
    }
}
