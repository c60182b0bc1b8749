//! Regression tests for bugs found after they landed.
mod support;

use std::time::Duration;

use redisson_lock::{Client, Config};
use support::TestServer;

/// `try_lock_for(Duration::MAX)` and huge leases used to panic on `Instant + Duration`
/// overflow (found by the MultiLock work).
#[tokio::test]
async fn huge_waits_and_leases_do_not_panic() {
    let server = TestServer::start();
    let client = server.client().await;
    let lock = client.get_lock("huge");
    let g = lock
        .try_lock_for(Duration::MAX)
        .await
        .unwrap()
        .expect("free lock");
    g.unlock().await.unwrap();
    let err = lock.lock_with_lease(Duration::MAX).await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let err = lock
        .try_lock_with_lease(Duration::MAX, Duration::MAX)
        .await
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let g = lock
        .lock_with_lease(Duration::from_secs(365 * 24 * 3600))
        .await
        .unwrap();
    g.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    let err = Client::with_config(Config::new(server.url()).with_watchdog_timeout(Duration::MAX))
        .await
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
}
