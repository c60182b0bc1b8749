mod support;

use std::time::Duration;

use redis::AsyncCommands;
use support::*;

#[tokio::test]
async fn lock_reenter_unlock_roundtrip() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    let lock = client.get_lock("smoke");
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let fields: Vec<(String, i64)> = raw.hgetall("smoke").await.unwrap();
    assert_eq!(fields.len(), 1);
    assert!(fields[0].0.starts_with(client.id()));
    g2.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g1.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());

    // contention: another task waits, woken by pub/sub
    let held = lock.lock().await.unwrap();
    let l2 = lock.clone();
    let waiter = tokio::spawn(async move {
        let g = l2.lock().await.unwrap();
        g.unlock().await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    held.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
}
