//! `Client::shutdown` (issue 22, item 6) against real Redisson: a Java waiter parked behind a
//! Rust hold gets the lock at once when the Rust client shuts down, not after the lease.

use std::time::Instant;

use redisson_lock::LockOwner;

use super::peers;
use super::wakeups::{parked, HOLDER_LEASE, WOKEN_WITHIN};
use crate::support::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_shutdown_wakes_java_waiters() {
    let server = TestServer::start();
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        // A client per peer: a shut-down client takes no more locks.
        let client = server.client().await;
        let name = format!("isd:{v}");
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));
        // Re-entered, with a fixed lease and a watchdog hold: one shutdown frees it.
        let _outer = lock.lock_with_lease(HOLDER_LEASE).await.unwrap();
        let _inner = lock.lock().await.unwrap();
        // Java waits up to 50 s: without the message it would wake at 50 s and fail.
        let waiter = peer.send("w", &format!("trylock lock {name} 50000 -1"));
        parked(&server, &name, 1).await;
        let began = Instant::now();
        let report = client.shutdown().await;
        assert_eq!(
            (report.released, report.unreleased.len()),
            (1, 0),
            "{v}: {report:?}"
        );
        assert_eq!(waiter.await, Ok("true".to_owned()), "{v}");
        let after = began.elapsed();
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Java waiter took {after:?} after the Rust shutdown (lease {HOLDER_LEASE:?})"
        );
        peer.unlock("w", "lock", &name).await.unwrap();
    }
}
