//! RSpinLock: the RLock hash without pub/sub. Waiters poll with a backoff and never subscribe;
//! releases publish nothing; Java's own spin-lock scripts and ours share one hash.

use std::time::Duration;

use crate::support::redisson::{self, channel};
use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{Backoff, LockOwner, LockTtl};

/// Generous bound for anything event-driven (a poll that should find the lock free).
const WAIT: Duration = Duration::from_secs(20);

/// Java's spin-lock release (`SPIN_UNLOCK`, 30 s lease to re-apply, 10 s latch) of the hold
/// `field` of `name`, request id `request`: it must release the last hold (reply 1).
async fn java_spin_release(
    raw: &mut redis::aio::MultiplexedConnection,
    name: &str,
    request: &str,
    field: &str,
) {
    let released: Option<i64> = redis::Script::new(redisson::SPIN_UNLOCK)
        .key(name)
        .key(redisson::latch(name, request))
        .arg(30_000)
        .arg(field)
        .arg(10_000)
        .invoke_async(raw)
        .await
        .unwrap();
    assert_eq!(released, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_is_the_rlock_hash_and_reenters() {
    let (server, client, mut raw) = fixture().await;
    let lock = client.get_spin_lock("spin:layout");
    let (outer, inner) = held_twice(&lock).await;
    let f = field(&client, outer.owner());
    assert_eq!(
        fields(&mut raw, "spin:layout").await,
        [(f.clone(), 2)].into()
    );
    assert_eq!(key_type(&mut raw, "spin:layout").await, "hash");
    assert!(
        pttl(&mut raw, "spin:layout").await > 20_000,
        "watchdog lease"
    );
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    // An RLock of the same name is excluded by it (same hash), as in Redisson.
    let other = server.client().await;
    assert!(other
        .get_lock("spin:layout")
        .try_lock()
        .await
        .unwrap()
        .is_none());
    inner.unlock().await.unwrap();
    assert_eq!(fields(&mut raw, "spin:layout").await, [(f, 1)].into());
    outer.unlock().await.unwrap();
    assert!(!exists(&mut raw, "spin:layout").await);
}

/// A release, a re-entry release and a force-unlock publish nothing on the RLock channel: the
/// first message a listener sees after them is the one the test itself publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_publish_nothing() {
    let name = "spin:quiet";
    let (_server, client, mut raw, mut listener) = fixture_listening(&channel(name)).await;
    let lock = client.get_spin_lock(name);
    let (a, b) = held_twice(&lock).await;
    b.unlock().await.unwrap();
    a.unlock().await.unwrap();
    lock.lock().await.unwrap().detach();
    assert!(lock.force_unlock().await.unwrap());
    assert!(!exists(&mut raw, name).await);
    let _: i64 = raw.publish(channel(name), "marker").await.unwrap();
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("marker"));
}

/// A waiter polls: it never subscribes, and it takes the lock once the holder lets go, also
/// when the holder is a Java client whose key simply goes away (no message in either case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_poll_without_subscribing() {
    let name = "spin:poll";
    let (_server, holder, mut raw, waiter) = fixture_with_other().await;
    let held = holder.get_spin_lock(name).lock().await.unwrap();
    let lock =
        waiter.get_spin_lock_with(name, Backoff::constant(Duration::from_millis(5)).unwrap());
    let task =
        tokio::spawn(async move { lock.try_lock_for(WAIT).await.map(|g| g.map(|g| g.detach())) });
    // It is waiting (tried at least once: the poll found the lock held) ...
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!task.is_finished());
    assert_eq!(waiter.stats().subscribed_channels, 0);
    assert_eq!(numsub(&mut raw, &channel(name)).await, 0);
    // ... and gets the lock after the release, which published nothing.
    held.unlock().await.unwrap();
    let got = finished(task, WAIT, "the task did not finish in time").await;
    assert!(got.is_some(), "the waiter never found the lock free");

    // A Java holder: HSET + PEXPIRE; its release is Redisson's spin unlock script.
    let java = "java-uuid:7";
    let name = "spin:java";
    redis::Script::new(redisson::ACQUIRE)
        .key(name)
        .arg(60_000)
        .arg(java)
        .invoke_async::<Option<i64>>(&mut raw)
        .await
        .unwrap();
    let lock = waiter.get_spin_lock(name);
    let task =
        tokio::spawn(async move { lock.try_lock_for(WAIT).await.map(|g| g.map(|g| g.detach())) });
    java_spin_release(&mut raw, name, "0123456789abcdef0123456789abcdef", java).await;
    let got = finished(task, WAIT, "the task did not finish in time").await;
    assert!(got.is_some());
    // Java's unlock script releases our hold too (same hash, same field rule).
    let ours = fields(&mut raw, name).await;
    let (f, _) = ours.iter().next().expect("our hold");
    java_spin_release(&mut raw, name, "fedcba9876543210fedcba9876543210", f).await;
    assert!(!exists(&mut raw, name).await);
}

/// A bounded wait that never sees the lock free gives up and leaves the holder's hold alone;
/// a cancelled wait leaves nothing of the waiter behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_and_cancelled_waits_leave_nothing() {
    let name = "spin:bounded";
    let (_server, holder, mut raw, waiter) = fixture_with_other().await;
    let held = holder.get_spin_lock(name).lock().await.unwrap();
    let hf = field(&holder, held.owner());
    let lock = waiter.get_spin_lock(name);
    assert!(lock
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let task = tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(fields(&mut raw, name).await, [(hf, 1)].into());
    held.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
    let stats = waiter.stats();
    assert_eq!((stats.tracked_holds, stats.subscribed_channels), (0, 0));
}

/// The watchdog renews a spin hold like any other: held across several leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_renews_a_spin_hold() {
    let server = TestServer::start();
    let client = server
        .client_with(|c| c.with_watchdog_timeout(Duration::from_millis(600)))
        .await;
    let lock = client.get_spin_lock("spin:renewed");
    let guard = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(
        lock.is_held_by_current().await.unwrap(),
        "lost without renewals"
    );
    assert!(matches!(
        lock.remain_time_to_live().await.unwrap(),
        LockTtl::Expires(_)
    ));
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}

/// Unlock by an owner that holds nothing changes nothing; a key of another type is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_changes_nothing() {
    let (_server, client, mut raw) = fixture().await;
    let held = client.get_spin_lock("spin:bad").lock().await.unwrap();
    let stranger = client
        .get_spin_lock("spin:bad")
        .with_owner(LockOwner::new(424242));
    assert!(stranger.unlock().await.is_err());
    assert_eq!(fields(&mut raw, "spin:bad").await.len(), 1);
    held.unlock().await.unwrap();
    let _: () = raw.set("spin:string", "x").await.unwrap();
    assert!(client
        .get_spin_lock("spin:string")
        .try_lock()
        .await
        .is_err());
    let v: String = raw.get("spin:string").await.unwrap();
    assert_eq!(v, "x");
}
