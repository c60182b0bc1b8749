//! Leases and the watchdog across the fence, with a 3 s watchdog lease on both sides: a
//! watchdog hold of one side outlives several lease periods while the other side waits; a fixed
//! lease of one side ends on time for the other; our re-entry lease rule never shortens a Java
//! hold.

use std::time::{Duration, Instant};

use redisson_lock::LockOwner;

use super::{peers, JavaPeer};
use crate::support::{exists, pttl, TestServer};

const WATCHDOG: Duration = Duration::from_secs(3);
/// About three watchdog leases.
const THREE_LEASES: Duration = Duration::from_millis(9_500);
const FIXED: Duration = Duration::from_secs(2);
/// Upper bound on how late after a fixed lease the other side gets the lock (generous).
const LATE: Duration = Duration::from_secs(10);
/// Clock tolerance between the test's and the server's view of a lease's start.
const SKEW: Duration = Duration::from_millis(50);

async fn setup() -> (TestServer, redisson_lock::Client, Vec<JavaPeer>) {
    let server = TestServer::start();
    let client = server
        .client_with(|c| c.with_watchdog_timeout(WATCHDOG))
        .await;
    let peers = peers(&server.url(), Some(WATCHDOG)).await;
    (server, client, peers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_holds_outlive_several_leases_for_the_other_side() {
    let (server, client, peers) = setup().await;
    let mut raw = server.conn().await;
    for peer in &peers {
        let v = peer.version();
        // Java's watchdog hold, a Rust waiter over ~3 leases.
        let name = format!("il:jwd:{v}");
        peer.lock("h", "lock", &name, None).await;
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));
        let got = lock.try_lock_for(THREE_LEASES).await.unwrap();
        assert!(got.is_none(), "{v}: the Java watchdog hold lapsed");
        assert!(exists(&mut raw, &name).await, "{v}");
        assert!(peer.bool("h", &format!("held lock {name}")).await, "{v}");
        peer.unlock("h", "lock", &name).await.unwrap();

        // Rust's watchdog hold, a Java waiter over ~3 leases.
        let name = format!("il:rwd:{v}");
        let guard = client
            .get_lock(&name)
            .with_owner(LockOwner::new(1))
            .lock()
            .await
            .unwrap();
        let cmd = format!("trylock lock {name} {} -1", THREE_LEASES.as_millis());
        assert!(
            !peer.bool("w", &cmd).await,
            "{v}: the Rust watchdog hold lapsed"
        );
        assert!(exists(&mut raw, &name).await, "{v}");
        assert!(!guard.is_lost(), "{v}");
        guard.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_ends_on_time_for_the_other_side() {
    let (_server, client, peers) = setup().await;
    for peer in &peers {
        let v = peer.version();
        // Java's fixed lease; Rust waits for it.
        let name = format!("il:jfix:{v}");
        let sent = Instant::now();
        peer.lock("h", "lock", &name, Some(FIXED)).await;
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));
        let g = lock.try_lock_for(FIXED + LATE).await.unwrap();
        let at = sent.elapsed();
        let g = g.unwrap_or_else(|| panic!("{v}: the Java lease never ended"));
        assert!(
            at + SKEW >= FIXED,
            "{v}: Rust took it {at:?} after a {FIXED:?} lease began"
        );
        assert!(at <= FIXED + LATE, "{v}: {at:?}");
        g.unlock().await.unwrap();

        // Rust's fixed lease; Java waits for it.
        let name = format!("il:rfix:{v}");
        let sent = Instant::now();
        let guard = client
            .get_lock(&name)
            .with_owner(LockOwner::new(1))
            .lock_with_lease(FIXED)
            .await
            .unwrap();
        let cmd = format!("trylock lock {name} {} -1", (FIXED + LATE).as_millis());
        assert!(
            peer.bool("w", &cmd).await,
            "{v}: the Rust lease never ended"
        );
        let at = sent.elapsed();
        assert!(
            at + SKEW >= FIXED,
            "{v}: Java took it {at:?} after a {FIXED:?} lease began"
        );
        assert!(at <= FIXED + LATE, "{v}: {at:?}");
        peer.unlock("w", "lock", &name).await.unwrap();
        drop(guard);
    }
}

/// Our rule: every script that sets a key's expiry covers every hold of the key (docs/locks.md,
/// "Re-entry and leases"). A Rust owner's short re-entrant read holds beside a Java read hold
/// with a long lease never cut the Java hold short; nor does a refused Rust acquire of a Java
/// RLock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_short_leases_never_shorten_a_java_hold() {
    let (server, client, peers) = setup().await;
    let mut raw = server.conn().await;
    let long = Duration::from_secs(30);
    for peer in &peers {
        let v = peer.version();
        // Read-write lock: Java reads for 30 s, Rust re-enters reads of 1 s and 300 ms.
        let name = format!("il:rw:{v}");
        peer.lock("r", "read", &name, Some(long)).await;
        let rw = client.get_read_write_lock(&name);
        let read = rw.read_lock().with_owner(LockOwner::new(1));
        let outer = read.lock_with_lease(Duration::from_secs(1)).await.unwrap();
        let inner = read
            .lock_with_lease(Duration::from_millis(300))
            .await
            .unwrap();
        let left = pttl(&mut raw, &name).await;
        assert!(
            left > 25_000,
            "{v}: after the Rust re-entry the key has {left} ms left"
        );
        inner.unlock().await.unwrap();
        outer.unlock().await.unwrap();
        let left = pttl(&mut raw, &name).await;
        assert!(
            left > 25_000,
            "{v}: the Java read hold's key has {left} ms left"
        );
        // Well past the Rust leases, the Java read hold is still there and excludes a writer.
        let write = rw.write_lock().with_owner(LockOwner::new(2));
        assert!(
            write
                .try_lock_for(Duration::from_secs(2))
                .await
                .unwrap()
                .is_none(),
            "{v}: a writer got in beside the Java read hold"
        );
        assert_eq!(
            peer.int("r", &format!("holdcount read {name}")).await,
            1,
            "{v}"
        );
        peer.unlock("r", "read", &name).await.unwrap();

        // RLock: a refused Rust acquire with a short lease leaves the Java hold's expiry alone.
        let name = format!("il:rl:{v}");
        peer.lock("h", "lock", &name, Some(long)).await;
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));
        let refused = lock
            .try_lock_with_lease(Duration::ZERO, Duration::from_millis(200))
            .await
            .unwrap();
        assert!(refused.is_none(), "{v}");
        let left = pttl(&mut raw, &name).await;
        assert!(left > 25_000, "{v}: the Java hold's key has {left} ms left");
        peer.unlock("h", "lock", &name).await.unwrap();
    }
}
