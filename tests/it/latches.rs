//! Latch keys. Our lock releases write no unlock latch at all (a retry after a lost reply trims
//! to the owner's known count instead, docs/protocol.md "Unlock retries"); the deleter of
//! `src/latches.rs` is left to the semaphore's receipts, under a rate it cannot follow (issue 10,
//! defect 5): its queue stays bounded (memory), the overflow is left to the receipts' own PX,
//! and everything it queued is deleted.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::LockOwner;

async fn keys_like(raw: &mut redis::aio::MultiplexedConnection, pattern: &str) -> usize {
    let mut keys: Vec<String> = Vec::new();
    let mut iter: redis::AsyncIter<String> = raw.scan_match(pattern).await.unwrap();
    while let Some(k) = iter.next_item().await {
        keys.push(k.unwrap());
    }
    keys.len()
}

/// Every keyspace event on a key matching `pattern` (keyspace notifications on).
async fn keyspace_events(
    server: &TestServer,
    pattern: &str,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    use futures_util::StreamExt;
    let mut raw = server.conn().await;
    config_set(&mut raw, "notify-keyspace-events", "KA").await;
    let mut pubsub = server.raw().get_async_pubsub().await.unwrap();
    pubsub
        .psubscribe(format!("__keyspace@0__:{pattern}"))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = pubsub.into_on_message();
        while let Some(msg) = stream.next().await {
            let event: String = msg.get_payload().unwrap_or_default();
            if tx
                .send(format!("{} {event}", msg.get_channel_name()))
                .is_err()
            {
                break;
            }
        }
    });
    rx
}

/// A burst of releases of every lock kind, re-entrant and final, from many tasks: not one
/// `redisson_unlock_latch*` key is ever written (watched by keyspace notifications, and
/// scanned for afterwards), and every lock is free at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_never_write_an_unlock_latch() {
    let server = TestServer::start();
    let mut events = keyspace_events(&server, "redisson_unlock_latch*").await;
    let client = server.client().await;
    let mut raw = server.conn().await;

    concurrently(16, |t| {
        let client = client.clone();
        async move {
            let owner = LockOwner::new(t as u64);
            for i in 0..20 {
                let name = format!("latchfree:{}", i % 4);
                macro_rules! twice {
                    ($lock:expr) => {{
                        let lock = $lock.with_owner(owner);
                        let (outer, inner) = held_twice(&lock).await;
                        inner.unlock().await.unwrap();
                        outer.unlock().await.unwrap();
                    }};
                }
                twice!(client.get_lock(format!("{name}:lock")));
                twice!(client.get_fenced_lock(format!("{name}:fenced")));
                twice!(client.get_spin_lock(format!("{name}:spin")));
                twice!(client.get_fair_lock(format!("{name}:fair")));
                let rw = client.get_read_write_lock(format!("{name}:rw"));
                twice!(rw.read_lock());
                twice!(rw.write_lock());
                // Owner-style releases too (Redisson's `unlock()`).
                let lock = client.get_lock(format!("{name}:owner")).with_owner(owner);
                lock.lock().await.unwrap().detach();
                lock.unlock().await.unwrap();
            }
        }
    })
    .await;
    assert_eq!(keys_like(&mut raw, "redisson_unlock_latch*").await, 0);
    assert_eq!(
        keys_like(&mut raw, "latchfree:*").await,
        0,
        "a lock was left held"
    );
    // The watch works: a latch written by hand (as Java's unlock would) is seen.
    let _: () = raw
        .set_ex("redisson_unlock_latch:{latchfree:0:lock}:probe", 1, 10)
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("keyspace notifications not delivered")
        .unwrap();
    assert!(
        first.contains(":probe "),
        "a release wrote an unlock latch: {first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receipt_queue_stays_bounded_and_queued_receipts_are_deleted() {
    const QUEUE: usize = 8;
    let server = TestServer::start();
    // The client's own timeouts and retries: a receipt lives its PX (a minute at least)
    // whatever they are, and a 200 ms response timeout failed acquires on a loaded machine.
    let client = server.client_with(|c| c.with_latch_queue(QUEUE)).await;
    let raw = server.conn().await;

    let done = Arc::new(AtomicBool::new(false));
    let max_pending = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (client, done, max_pending) = (client.clone(), done.clone(), max_pending.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                max_pending.fetch_max(client.stats().pending_latch_deletions, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        })
    };
    concurrently(64, |t| {
        let client = client.clone();
        async move {
            let s = client.get_semaphore(format!("receipts:{t}"));
            assert!(s.try_set_permits(1).await.unwrap());
            for _ in 0..50 {
                s.acquire().await.unwrap();
                s.release().await.unwrap();
            }
        }
    })
    .await;
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();

    let stats = client.stats();
    assert!(
        max_pending.load(Ordering::Relaxed) <= QUEUE,
        "the queue grew past its bound: {}",
        max_pending.load(Ordering::Relaxed)
    );
    assert!(
        stats.dropped_latch_deletions > 0,
        "6,400 receipts never overflowed a queue of {QUEUE}: the test did not drive the deleter past its rate"
    );
    // What was queued is deleted; only the dropped ones wait for their PX.
    let dropped = usize::try_from(stats.dropped_latch_deletions).unwrap();
    let drained = eventually(Duration::from_secs(15), || {
        let mut raw = raw.clone();
        async move { keys_like(&mut raw, "redisson_semaphore_latch*").await <= dropped }
    })
    .await;
    assert!(drained, "queued receipts were not deleted");
    assert_eq!(client.stats().pending_latch_deletions, 0);
}

#[tokio::test]
async fn a_zero_latch_queue_is_an_invalid_argument() {
    let server = TestServer::start();
    let err = redisson_lock::Client::with_config(server.config().with_latch_queue(0))
        .await
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
}
