//! Read-write lock wake-ups across the fence: a write release wakes EVERY parked reader of the
//! other side (several Java reader threads by a Rust write release, several Rust readers by a
//! Java write release), long before the writer's lease would have ended.

use std::time::{Duration, Instant};

use redisson_lock::LockOwner;

use super::peers;
use super::sync_ops::{parked_on_latch, rw_channel, scripts_at_least};
use super::wakeups::{HOLDER_LEASE, WOKEN_WITHIN};
use crate::support::redisson::reset_stats;
use crate::support::{channel_subscribers, TestServer};

/// Readers on each side.
const READERS: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_write_release_wakes_every_java_reader() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("irw:r2j:{v}");
        let writer = client
            .get_read_write_lock(&name)
            .write_lock()
            .with_owner(LockOwner::new(1))
            .lock_with_lease(HOLDER_LEASE)
            .await
            .unwrap();
        let mut owners = Vec::new();
        for i in 0..READERS {
            let owner = format!("r{i}");
            // Warm-up on another name: the thread and Redisson's script cache exist before the
            // count starts.
            let warm = format!("{name}:warm");
            assert!(
                peer.try_lock(&owner, "read", &warm, Duration::ZERO, None)
                    .await
            );
            peer.unlock(&owner, "read", &warm).await.unwrap();
            owners.push(owner);
        }
        reset_stats(&server).await;
        // Each waits up to 50 s: one not woken by the message sleeps on the writer's 60 s TTL.
        let replies: Vec<_> = owners
            .iter()
            .map(|o| peer.send(o, &format!("trylock read {name} 50000 -1")))
            .collect();
        assert!(
            channel_subscribers(&server, &rw_channel(&name), 1).await,
            "{v}: the Java readers never subscribed"
        );
        // Each reader tried, subscribed and tried again, and sleeps on Redisson's latch.
        scripts_at_least(&server, 2 * READERS, &v).await;
        for o in &owners {
            parked_on_latch(&peer, o, &v).await;
        }
        let released = Instant::now();
        writer.unlock().await.unwrap();
        for (o, r) in owners.iter().zip(replies) {
            assert_eq!(r.await, Ok("true".to_owned()), "{v}: reader {o}");
        }
        let after = released.elapsed();
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Java readers took {after:?} after the Rust write release"
        );
        // All of them hold the read lock at once: `mode` plus one field per reader.
        let len: i64 = redis::cmd("HLEN")
            .arg(&name)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert_eq!(len, 1 + READERS as i64, "{v}");
        let mode: String = redis::cmd("HGET")
            .arg(&name)
            .arg("mode")
            .query_async(&mut raw)
            .await
            .unwrap();
        assert_eq!(mode, "read", "{v}");
        for o in &owners {
            peer.unlock(o, "read", &name).await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_write_release_wakes_every_rust_reader() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("irw:j2r:{v}");
        peer.lock("h", "write", &name, Some(HOLDER_LEASE)).await;
        // Warm-up on another name: the read acquire script is in the server's cache.
        let warm = client
            .get_read_write_lock(format!("{name}:warm"))
            .read_lock();
        warm.try_lock()
            .await
            .unwrap()
            .unwrap()
            .unlock()
            .await
            .unwrap();
        reset_stats(&server).await;
        let readers: Vec<_> = (1..=READERS)
            .map(|i| {
                let lock = client
                    .get_read_write_lock(&name)
                    .read_lock()
                    .with_owner(LockOwner::new(i));
                tokio::spawn(async move {
                    let guard = lock
                        .try_lock_for(Duration::from_secs(50))
                        .await
                        .unwrap()
                        .expect("the Rust reader timed out");
                    (Instant::now(), guard)
                })
            })
            .collect();
        assert!(
            channel_subscribers(&server, &rw_channel(&name), 1).await,
            "{v}: the Rust readers never subscribed"
        );
        scripts_at_least(&server, 2 * READERS, &v).await;
        let released = Instant::now();
        peer.unlock("h", "write", &name).await.unwrap();
        let mut guards = Vec::new();
        for (i, r) in readers.into_iter().enumerate() {
            let (at, guard) = tokio::time::timeout(HOLDER_LEASE, r)
                .await
                .unwrap_or_else(|_| panic!("{v}: Rust reader {i} was not woken"))
                .unwrap();
            let after = at.saturating_duration_since(released);
            assert!(
                after < WOKEN_WITHIN,
                "{v}: Rust reader {i} took {after:?} after the Java write release"
            );
            guards.push(guard);
        }
        // Java sees the read lock taken by all of them.
        assert!(
            peer.bool("h", &format!("islocked read {name}")).await,
            "{v}"
        );
        for g in guards {
            g.unlock().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_read_release_wakes_the_other_sides_writer() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // Java readers hold; a Rust writer waits; the last Java read release wakes it.
        let name = format!("irw:jr2rw:{v}");
        let owners: Vec<String> = (0..READERS).map(|i| format!("r{i}")).collect();
        for o in &owners {
            peer.lock(o, "read", &name, Some(HOLDER_LEASE)).await;
        }
        let warm = client
            .get_read_write_lock(format!("{name}:warm"))
            .write_lock();
        warm.try_lock()
            .await
            .unwrap()
            .unwrap()
            .unlock()
            .await
            .unwrap();
        reset_stats(&server).await;
        let writer = client
            .get_read_write_lock(&name)
            .write_lock()
            .with_owner(LockOwner::new(1));
        let waiter = tokio::spawn(async move {
            let guard = writer
                .try_lock_for(Duration::from_secs(50))
                .await
                .unwrap()
                .expect("the Rust writer timed out");
            (Instant::now(), guard)
        });
        assert!(
            channel_subscribers(&server, &rw_channel(&name), 1).await,
            "{v}: the Rust writer never subscribed"
        );
        scripts_at_least(&server, 2, &v).await;
        let (last, others) = owners.split_last().unwrap();
        for o in others {
            peer.unlock(o, "read", &name).await.unwrap();
        }
        let released = Instant::now();
        peer.unlock(last, "read", &name).await.unwrap();
        let (at, guard) = tokio::time::timeout(HOLDER_LEASE, waiter)
            .await
            .unwrap_or_else(|_| panic!("{v}: the Rust writer was not woken"))
            .unwrap();
        let after = at.saturating_duration_since(released);
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Rust writer took {after:?} after the last Java read release"
        );
        guard.unlock().await.unwrap();

        // Rust readers hold; a Java writer waits; the last Rust read release wakes it.
        let name = format!("irw:rr2jw:{v}");
        let mut guards = Vec::new();
        for i in 1..=READERS {
            let reader = client
                .get_read_write_lock(&name)
                .read_lock()
                .with_owner(LockOwner::new(i));
            guards.push(reader.lock_with_lease(HOLDER_LEASE).await.unwrap());
        }
        let warm = format!("{name}:warm");
        assert!(
            peer.try_lock("w", "write", &warm, Duration::ZERO, None)
                .await
        );
        peer.unlock("w", "write", &warm).await.unwrap();
        reset_stats(&server).await;
        let reply = peer.send("w", &format!("trylock write {name} 50000 -1"));
        assert!(
            channel_subscribers(&server, &rw_channel(&name), 1).await,
            "{v}: the Java writer never subscribed"
        );
        scripts_at_least(&server, 2, &v).await;
        let last = guards.pop().unwrap();
        for g in guards {
            g.unlock().await.unwrap();
        }
        let released = Instant::now();
        last.unlock().await.unwrap();
        assert_eq!(reply.await, Ok("true".to_owned()), "{v}: the Java writer");
        let after = released.elapsed();
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Java writer took {after:?} after the last Rust read release"
        );
        peer.unlock("w", "write", &name).await.unwrap();
    }
}
