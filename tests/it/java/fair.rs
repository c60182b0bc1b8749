//! The fair lock across the fence: wake-ups both ways on the queue head's own channel, a mixed
//! queue served in FIFO order, a Java waiter that times out leaves the queue, and one whose JVM
//! dies is evicted after its wait time so that the Rust waiter behind it goes ahead.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redisson_lock::{FairLock, LockOwner};
use tokio::sync::oneshot;

use super::sync_ops::{
    deadline, parked_on_latch, queue, queue_is, scripts_at_least, waiter_channel,
};
use super::wakeups::{HOLDER_LEASE, WOKEN_WITHIN};
use super::{peers, JavaErr};
use crate::support::redisson::reset_stats;
use crate::support::{channel_subscribers, field, fields, TestServer};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A Rust fair-lock waiter in its own task: reports when it has the lock, then holds it until
/// told to release.
struct RustWaiter {
    acquired: oneshot::Receiver<Instant>,
    release: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl RustWaiter {
    /// Starts waiting (up to `wait`) for `lock`.
    fn spawn(lock: FairLock, wait: Duration) -> RustWaiter {
        let (acq_tx, acquired) = oneshot::channel();
        let (release, rel_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let guard = lock
                .try_lock_for(wait)
                .await
                .unwrap()
                .expect("the Rust fair waiter timed out");
            let _ = acq_tx.send(Instant::now());
            let _ = rel_rx.await;
            guard.unlock().await.unwrap();
        });
        RustWaiter {
            acquired,
            release,
            task,
        }
    }

    /// When it got the lock (it must within `within`).
    async fn acquired(&mut self, within: Duration, what: &str) -> Instant {
        tokio::time::timeout(within, &mut self.acquired)
            .await
            .unwrap_or_else(|_| panic!("{what}: the Rust waiter did not get the lock"))
            .unwrap_or_else(|_| panic!("{what}: the Rust waiter failed"))
    }

    /// Releases the lock and waits for the task.
    async fn finish(self) {
        let _ = self.release.send(());
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the Rust waiter did not release")
            .unwrap();
    }
}

/// The lock hash has exactly one field: `field`.
async fn sole_holder(
    raw: &mut redis::aio::MultiplexedConnection,
    name: &str,
    field: &str,
    what: &str,
) {
    let holders: Vec<String> = fields(raw, name).await.into_keys().collect();
    assert_eq!(holders, [field], "{what}: the holders of {name}");
}

/// Runs the crate's fair acquire script once (on another name), so that the script counts of
/// a parked waiter that follow hold no `NOSCRIPT` round.
pub async fn warm_fair(client: &redisson_lock::Client, name: &str) {
    let warm = client.get_fair_lock(format!("{name}:warm"));
    warm.try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

type JavaReply = Pin<Box<dyn Future<Output = Result<String, JavaErr>> + Send>>;

/// One waiter of the mixed queue.
enum Waiter {
    Java { owner: String, reply: JavaReply },
    Rust(RustWaiter),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_unlock_wakes_the_other_sides_queue_head() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // Java holds, a Rust waiter is the queue head: the Java unlock wakes it.
        let name = format!("ifw:j2r:{v}");
        peer.lock("h", "fair", &name, Some(HOLDER_LEASE)).await;
        let owner = LockOwner::new(1);
        let lock = client.get_fair_lock(&name).with_owner(owner);
        warm_fair(&client, &name).await;
        reset_stats(&server).await;
        let mut waiter = RustWaiter::spawn(lock, Duration::from_secs(100));
        let rust = field(&client, owner);
        queue_is(&server, &name, std::slice::from_ref(&rust)).await;
        assert!(
            channel_subscribers(&server, &waiter_channel(&name, &rust), 1).await,
            "{v}: the Rust waiter never subscribed to its own channel"
        );
        // It enqueued, subscribed and tried again: only a message can wake it now.
        scripts_at_least(&server, 2, &v).await;
        let released = Instant::now();
        peer.unlock("h", "fair", &name).await.unwrap();
        let after = waiter
            .acquired(HOLDER_LEASE, &v)
            .await
            .saturating_duration_since(released);
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Rust head took {after:?} after the Java unlock (lease {HOLDER_LEASE:?})"
        );
        waiter.finish().await;

        // Rust holds, a Java waiter is the queue head: the Rust unlock wakes it.
        let name = format!("ifw:r2j:{v}");
        let guard = client
            .get_fair_lock(&name)
            .with_owner(LockOwner::new(2))
            .lock_with_lease(HOLDER_LEASE)
            .await
            .unwrap();
        let java = peer.field("w").await;
        let reply = peer.send("w", &format!("trylock fair {name} 50000 -1"));
        queue_is(&server, &name, std::slice::from_ref(&java)).await;
        assert!(
            channel_subscribers(&server, &waiter_channel(&name, &java), 1).await,
            "{v}: the Java waiter never subscribed to its own channel"
        );
        parked_on_latch(&peer, "w", &v).await;
        let released = Instant::now();
        guard.unlock().await.unwrap();
        assert_eq!(reply.await, Ok("true".to_owned()), "{v}");
        let after = released.elapsed();
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Java head took {after:?} after the Rust unlock (lease {HOLDER_LEASE:?})"
        );
        peer.unlock("w", "fair", &name).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_queue_is_served_in_fifo_order() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("iff:{v}");
        let holder = client
            .get_fair_lock(&name)
            .with_owner(LockOwner::new(100))
            .lock_with_lease(HOLDER_LEASE)
            .await
            .unwrap();
        // Java, Rust, Java, Rust, Java, Rust: each enqueued once the one before is seen queued.
        let mut expected: Vec<String> = Vec::new();
        let mut waiters: Vec<(String, Waiter)> = Vec::new();
        for i in 0..6u64 {
            let (f, w) = if i % 2 == 0 {
                let owner = format!("q{i}");
                let f = peer.field(&owner).await;
                let reply = Box::pin(peer.send(&owner, &format!("trylock fair {name} 100000 -1")));
                (f, Waiter::Java { owner, reply })
            } else {
                let o = LockOwner::new(i);
                let lock = client.get_fair_lock(&name).with_owner(o);
                (
                    field(&client, o),
                    Waiter::Rust(RustWaiter::spawn(lock, Duration::from_secs(100))),
                )
            };
            expected.push(f.clone());
            queue_is(&server, &name, &expected).await;
            waiters.push((f, w));
        }
        holder.unlock().await.unwrap();
        // Each in turn must get the lock (and be the only holder) while the rest still wait.
        for (i, (f, w)) in waiters.into_iter().enumerate() {
            let what = format!("{v}: waiter {i} ({f})");
            match w {
                Waiter::Java { owner, reply } => {
                    let got = tokio::time::timeout(WOKEN_WITHIN, reply)
                        .await
                        .unwrap_or_else(|_| {
                            panic!("{what} was not served in turn; queue {expected:?}")
                        });
                    assert_eq!(got, Ok("true".to_owned()), "{what}");
                    sole_holder(&mut raw, &name, &f, &what).await;
                    assert_eq!(queue(&server, &name).await, expected[i + 1..], "{what}");
                    peer.unlock(&owner, "fair", &name).await.unwrap();
                }
                Waiter::Rust(mut r) => {
                    r.acquired(WOKEN_WITHIN, &what).await;
                    sole_holder(&mut raw, &name, &f, &what).await;
                    assert_eq!(queue(&server, &name).await, expected[i + 1..], "{what}");
                    r.finish().await;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_waiter_that_times_out_leaves_the_queue() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("ift:{v}");
        let holder = client
            .get_fair_lock(&name)
            .with_owner(LockOwner::new(100))
            .lock_with_lease(HOLDER_LEASE)
            .await
            .unwrap();
        let java = peer.field("w").await;
        let reply = peer.send("w", &format!("trylock fair {name} 3000 -1"));
        queue_is(&server, &name, std::slice::from_ref(&java)).await;
        let owner = LockOwner::new(1);
        let mut waiter = RustWaiter::spawn(
            client.get_fair_lock(&name).with_owner(owner),
            Duration::from_secs(100),
        );
        let rust = field(&client, owner);
        queue_is(&server, &name, &[java.clone(), rust.clone()]).await;
        assert_eq!(reply.await, Ok("false".to_owned()), "{v}: the Java wait");
        // Java's acquireFailed took it out of the queue and the deadlines.
        queue_is(&server, &name, std::slice::from_ref(&rust)).await;
        assert_eq!(deadline(&server, &name, &java).await, None, "{v}");
        // So the release goes to the Rust waiter, now the head, long before the Java entry's
        // deadline (the holder's 60 s lease plus 3 s) would have let it skip a stale head.
        let released = Instant::now();
        holder.unlock().await.unwrap();
        let after = waiter
            .acquired(HOLDER_LEASE, &v)
            .await
            .saturating_duration_since(released);
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Rust waiter took {after:?} after the release"
        );
        waiter.finish().await;
    }
}

/// The holder's lease when the doomed Java waiter enqueues: its deadline is this lease plus its
/// wait time from then.
const SHORT_LEASE: Duration = Duration::from_secs(8);
/// The doomed Java waiter's wait time (its `threadWaitTime`).
const JAVA_WAIT: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_java_waiter_is_evicted_and_the_rust_waiter_behind_goes_ahead() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("ifd:{v}");
        let holder = client
            .get_fair_lock(&name)
            .with_owner(LockOwner::new(100))
            .lock_with_lease(SHORT_LEASE)
            .await
            .unwrap();
        let java = peer.field("w").await;
        let _reply = peer.send(
            "w",
            &format!("trylock fair {name} {} -1", JAVA_WAIT.as_millis()),
        );
        queue_is(&server, &name, std::slice::from_ref(&java)).await;
        // The JVM dies while it waits: its queue entry and deadline stay behind.
        peer.kill().await;
        let dead_until = deadline(&server, &name, &java)
            .await
            .unwrap_or_else(|| panic!("{v}: the dead waiter has no deadline"));
        let owner = LockOwner::new(1);
        let mut waiter = RustWaiter::spawn(
            client.get_fair_lock(&name).with_owner(owner),
            Duration::from_secs(100),
        );
        let rust = field(&client, owner);
        queue_is(&server, &name, &[java.clone(), rust.clone()]).await;
        // The release wakes only the dead head; the Rust waiter must come back by itself once
        // the dead head's deadline passes, and not before (FIFO).
        holder.unlock().await.unwrap();
        let bound = Duration::from_millis((dead_until - now_ms()).max(0) as u64) + WOKEN_WITHIN;
        waiter.acquired(bound, &v).await;
        let got_at = now_ms();
        assert!(
            got_at >= dead_until,
            "{v}: the Rust waiter skipped the dead head {} ms before its deadline",
            dead_until - got_at
        );
        sole_holder(&mut raw, &name, &rust, &v).await;
        assert!(queue(&server, &name).await.is_empty(), "{v}");
        assert_eq!(deadline(&server, &name, &java).await, None, "{v}");
        waiter.finish().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_waiters_that_time_out_or_are_dropped_leave_the_queue_for_java() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("ifc:{v}");
        peer.lock("h", "fair", &name, Some(HOLDER_LEASE)).await;
        // A Rust waiter that times out, one that is dropped while it waits, then Java.
        let (o1, o2) = (LockOwner::new(1), LockOwner::new(2));
        let (r1, r2) = (field(&client, o1), field(&client, o2));
        let timing_out = tokio::spawn({
            let lock = client.get_fair_lock(&name).with_owner(o1);
            async move { lock.try_lock_for(Duration::from_secs(3)).await }
        });
        queue_is(&server, &name, std::slice::from_ref(&r1)).await;
        let dropped = tokio::spawn({
            let lock = client.get_fair_lock(&name).with_owner(o2);
            async move { lock.lock().await }
        });
        queue_is(&server, &name, &[r1.clone(), r2.clone()]).await;
        let java = peer.field("w").await;
        let reply = peer.send("w", &format!("trylock fair {name} 50000 -1"));
        queue_is(&server, &name, &[r1.clone(), r2.clone(), java.clone()]).await;

        let timed_out = timing_out.await.unwrap().unwrap();
        assert!(timed_out.is_none(), "{v}: the Rust waiter got the lock");
        dropped.abort();
        assert!(dropped.await.unwrap_err().is_cancelled(), "{v}");
        // Both left the queue and the deadlines; Java is the head.
        queue_is(&server, &name, std::slice::from_ref(&java)).await;
        assert_eq!(deadline(&server, &name, &r1).await, None, "{v}");
        assert_eq!(deadline(&server, &name, &r2).await, None, "{v}");
        // The Java unlock wakes the Java head at once, not at the Rust entries' deadlines.
        let released = Instant::now();
        peer.unlock("h", "fair", &name).await.unwrap();
        assert_eq!(reply.await, Ok("true".to_owned()), "{v}: the Java head");
        let after = released.elapsed();
        assert!(
            after < WOKEN_WITHIN,
            "{v}: the Java head took {after:?} after the release"
        );
        peer.unlock("w", "fair", &name).await.unwrap();
    }
}
