//! forceUnlock of the fair and read-write locks across the fence: it frees the lock and wakes
//! the other side's waiters by message (the fair queue head on its own channel; every reader
//! after a write lock's, the writer after a read lock's), long before the holder's lease.

use std::time::{Duration, Instant};

use redisson_lock::LockOwner;

use super::fair::warm_fair;
use super::peers;
use super::sync_ops::{parked_on_latch, queue_is, rw_channel, scripts_at_least};
use super::wakeups::{HOLDER_LEASE, WOKEN_WITHIN};
use crate::support::redisson::reset_stats;
use crate::support::{channel_subscribers, exists_on, field, TestServer};

/// Readers woken at once by a write lock's forceUnlock.
const READERS: u64 = 3;

fn in_time(released: Instant, at: Instant, what: &str) {
    let after = at.saturating_duration_since(released);
    assert!(
        after < WOKEN_WITHIN,
        "{what}: woken {after:?} after the forceUnlock (lease {HOLDER_LEASE:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_force_unlock_wakes_the_other_sides_head() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // A Rust holder and a Java head; Rust force-unlocks.
        let name = format!("ifo:r2j:{v}");
        let lock = client.get_fair_lock(&name).with_owner(LockOwner::new(1));
        let _held = lock.lock_with_lease(HOLDER_LEASE).await.unwrap();
        let java = peer.field("w").await;
        let reply = peer.send("w", &format!("trylock fair {name} 50000 -1"));
        queue_is(&server, &name, std::slice::from_ref(&java)).await;
        parked_on_latch(&peer, "w", &v).await;
        let released = Instant::now();
        assert!(lock.force_unlock().await.unwrap(), "{v}");
        assert_eq!(reply.await, Ok("true".to_owned()), "{v}: the Java head");
        in_time(released, Instant::now(), &format!("{v} rust->java"));
        peer.unlock("w", "fair", &name).await.unwrap();

        // A Java holder and a Rust head; Java force-unlocks.
        let name = format!("ifo:j2r:{v}");
        peer.lock("h", "fair", &name, Some(HOLDER_LEASE)).await;
        let owner = LockOwner::new(2);
        warm_fair(&client, &name).await;
        reset_stats(&server).await;
        let waiter = tokio::spawn({
            let lock = client.get_fair_lock(&name).with_owner(owner);
            async move {
                let guard = lock.lock().await.unwrap();
                (Instant::now(), guard)
            }
        });
        queue_is(&server, &name, &[field(&client, owner)]).await;
        // It enqueued, subscribed and tried again: only a message can wake it now.
        scripts_at_least(&server, 2, &v).await;
        let released = Instant::now();
        assert!(peer.bool("f", &format!("forceunlock fair {name}")).await);
        let (at, guard) = tokio::time::timeout(HOLDER_LEASE, waiter)
            .await
            .unwrap_or_else(|_| panic!("{v}: the Rust head was not woken"))
            .unwrap();
        in_time(released, at, &format!("{v} java->rust"));
        guard.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rw_force_unlock_wakes_the_other_sides_waiters() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // A Rust writer; Java readers wait; Rust force-unlocks the write lock: every reader.
        let name = format!("irf:w:{v}");
        let rw = client.get_read_write_lock(&name);
        let _held = rw
            .write_lock()
            .with_owner(LockOwner::new(1))
            .lock_with_lease(HOLDER_LEASE)
            .await
            .unwrap();
        let owners: Vec<String> = (0..READERS).map(|i| format!("r{i}")).collect();
        for o in &owners {
            let warm = format!("{name}:warm");
            assert!(peer.try_lock(o, "read", &warm, Duration::ZERO, None).await);
            peer.unlock(o, "read", &warm).await.unwrap();
        }
        reset_stats(&server).await;
        let replies: Vec<_> = owners
            .iter()
            .map(|o| peer.send(o, &format!("trylock read {name} 50000 -1")))
            .collect();
        assert!(
            channel_subscribers(&server, &rw_channel(&name), 1).await,
            "{v}: the Java readers never subscribed"
        );
        scripts_at_least(&server, 2 * READERS, &v).await;
        for o in &owners {
            parked_on_latch(&peer, o, &v).await;
        }
        let released = Instant::now();
        assert!(rw.write_lock().force_unlock().await.unwrap(), "{v}");
        for (o, r) in owners.iter().zip(replies) {
            assert_eq!(r.await, Ok("true".to_owned()), "{v}: reader {o}");
        }
        in_time(released, Instant::now(), &format!("{v} rust->java readers"));
        for o in &owners {
            peer.unlock(o, "read", &name).await.unwrap();
        }

        // Java readers hold; a Rust writer waits; Java force-unlocks the read lock.
        let name = format!("irf:r:{v}");
        for o in &owners {
            peer.lock(o, "read", &name, Some(HOLDER_LEASE)).await;
        }
        let writer = client
            .get_read_write_lock(&name)
            .write_lock()
            .with_owner(LockOwner::new(2));
        reset_stats(&server).await;
        let waiter = tokio::spawn(async move {
            let guard = writer.lock().await.unwrap();
            (Instant::now(), guard)
        });
        assert!(
            channel_subscribers(&server, &rw_channel(&name), 1).await,
            "{v}: the Rust writer never subscribed"
        );
        scripts_at_least(&server, 2, &v).await;
        let released = Instant::now();
        assert!(peer.bool("f", &format!("forceunlock read {name}")).await);
        let (at, guard) = tokio::time::timeout(HOLDER_LEASE, waiter)
            .await
            .unwrap_or_else(|_| panic!("{v}: the Rust writer was not woken"))
            .unwrap();
        in_time(released, at, &format!("{v} java->rust writer"));
        guard.unlock().await.unwrap();
        assert!(!exists_on(&server, &name).await, "{v}");
    }
}
