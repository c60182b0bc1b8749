//! The unlock-latch deleter under an unlock rate it cannot follow (issue 10, defect 5): its
//! queue stays bounded (memory), the overflow is left to the latches' own PX, and the number of
//! latch keys in Redis drains back to zero.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use redis::AsyncCommands;

async fn latch_keys(raw: &mut redis::aio::MultiplexedConnection) -> usize {
    let mut keys: Vec<String> = Vec::new();
    let mut iter: redis::AsyncIter<String> =
        raw.scan_match("redisson_unlock_latch*").await.unwrap();
    while let Some(k) = iter.next_item().await {
        keys.push(k.unwrap());
    }
    keys.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latch_queue_stays_bounded_and_overflowing_latches_expire() {
    const QUEUE: usize = 8;
    let server = TestServer::start();
    // Latch PX = (response timeout + 2 s) x attempts = 2.2 s.
    let client = server
        .client_with(|c| {
            c.with_latch_queue(QUEUE)
                .with_response_timeout(Duration::from_millis(200))
                .with_retry_attempts(1)
        })
        .await;
    let mut raw = server.conn().await;

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
    let tasks: Vec<_> = (0..64)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..100 {
                    let g = client
                        .get_lock(format!("latch:{t}:{i}"))
                        .lock()
                        .await
                        .unwrap();
                    g.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
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
        "6,400 unlocks never overflowed a queue of {QUEUE}: the test did not drive the deleter past its rate"
    );
    // Keys left behind are bounded by what the PX lets live, and all of them go.
    assert!(latch_keys(&mut raw).await <= 6_400);
    let drained = eventually(Duration::from_secs(15), || {
        let mut raw = raw.clone();
        async move { latch_keys(&mut raw).await == 0 }
    })
    .await;
    assert!(drained, "latch keys stayed after their PX");
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
