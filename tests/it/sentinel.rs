//! Sentinel: a real master, a replica and 3 sentinels on loopback ports; a failover by killing
//! the master.

use std::time::{Duration, Instant};

use crate::support::cluster::{wait_until, TestSentinel, MASTER_NAME};
use crate::support::{finished, held_for_a_minute, subscribed};
use redis::Commands;
use redisson_lock::{Client, Config};

async fn client(s: &TestSentinel) -> Client {
    Client::with_config(
        Config::sentinel(s.sentinel_urls(), MASTER_NAME)
            .with_response_timeout(Duration::from_secs(1))
            .with_connection_timeout(Duration::from_secs(1))
            .with_retry_attempts(3),
    )
    .await
    .expect("client through sentinels")
}

/// Retries `op` until it succeeds or `within` passes (a failover takes a few seconds).
async fn retrying<T, F, Fut>(within: Duration, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, redisson_lock::LockError>>,
{
    let deadline = Instant::now() + within;
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                eprintln!("retrying after: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("still failing after {within:?}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_locks_survive_a_failover() {
    let mut s = TestSentinel::start();
    let a = client(&s).await;
    let b = client(&s).await;

    // Locks land on the master and replicate (replica sync on by default: WAIT 1).
    let g = a.get_lock("sn-1").lock().await.unwrap();
    let mut master = s.master.conn();
    let fields: Vec<String> = master.hkeys("sn-1").unwrap();
    assert!(fields[0].starts_with(a.id()));
    let mut replica = s.replica.conn();
    let replicated: bool = replica.exists("sn-1").unwrap();
    assert!(
        replicated,
        "WAIT made the replica confirm the lock before lock() returned"
    );
    g.unlock().await.unwrap();

    // A holder in `a` (long lease) and a waiter in `b`.
    let held = held_for_a_minute(&a.get_lock("sn-2")).await;
    let lock = b.get_lock("sn-2");
    let waiter = tokio::spawn(async move {
        let g = lock.lock().await?;
        g.unlock().await
    });
    assert!(subscribed(&b, 1).await);

    // Failover: kill the master; the sentinels promote the replica.
    let old = s.master.port;
    s.master.kill();
    assert!(
        wait_until(Duration::from_secs(60), || s
            .master_port()
            .is_some_and(|p| p != old)),
        "sentinels promoted the replica"
    );
    assert_eq!(s.master_port(), Some(s.replica.port));

    // Clients recover: the holder releases on the new master, which wakes the waiter (through
    // its resubscribed connection, or the wake-up that follows a resubscribe).
    let released = Instant::now();
    retrying(Duration::from_secs(30), || {
        let a = a.clone();
        async move { a.get_lock("sn-2").force_unlock().await.map(|_| ()) }
    })
    .await;
    drop(held);
    finished(
        waiter,
        Duration::from_secs(40),
        "waiter woke well before the 60 s lease",
    )
    .await;
    assert!(released.elapsed() < Duration::from_secs(50));

    // And new locks can be taken on the new master.
    let g = retrying(Duration::from_secs(30), || {
        let a = a.clone();
        async move { a.get_lock("sn-3").lock().await }
    })
    .await;
    let mut new_master = s.replica.conn();
    let exists: bool = new_master.exists("sn-3").unwrap();
    assert!(exists);
    g.unlock().await.unwrap();
}
