//! Non-reentrant locks (Redisson 4.4+'s `getNonReentrantLock` / `getNonReentrantFairLock`):
//! the RLock's and the fair lock's data, a second acquire by the holder refused with nothing
//! changed (count, lease, queue), other owners waiting as usual. Java's side of the same names:
//! `java::non_reentrant`.

use std::collections::HashMap;
use std::time::Duration;

use crate::support::redisson::{queue_key, timeout_key};
use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{LockError, LockKind, LockOwner};

/// Generous bound for anything event-driven.
const WAIT: Duration = Duration::from_secs(10);

/// The holder's three ways of acquiring again are refused with `AlreadyHeld` naming the lock
/// and the holder's field, and none of them touches the hash: the count stays 1 and the PTTL
/// only runs down (a refused acquire that re-applied the lease would move it up).
async fn refused_three_ways<K: LockKind>(
    raw: &mut MultiplexedConnection,
    lock: &redisson_lock::Lock<K>,
    field: &str,
) {
    let name = lock.name().to_owned();
    let expected = HashMap::from([(field.to_owned(), 1)]);
    let before = pttl(raw, &name).await;
    let errors = [
        lock.lock().await.map(|_| ()).unwrap_err(),
        lock.try_lock().await.map(|_| ()).unwrap_err(),
        lock.try_lock_for(Duration::from_millis(200))
            .await
            .map(|_| ())
            .unwrap_err(),
    ];
    for e in errors {
        assert!(e.is_already_held(), "{e:?}");
        match &e {
            LockError::AlreadyHeld { name: n, field: f } => {
                assert_eq!((n.as_str(), f.as_str()), (name.as_str(), field));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(fields(raw, &name).await, expected, "the count changed");
    let after = pttl(raw, &name).await;
    assert!(
        after <= before && after > 0,
        "a refused acquire touched the lease: {before} -> {after}"
    );
    assert_eq!(lock.hold_count().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_cannot_take_a_non_reentrant_lock_twice() {
    let (_server, client, mut raw) = fixture().await;
    let name = "nr:self";
    let lock = client.get_non_reentrant_lock(name);
    let f = field(&client, lock.owner());
    // A fixed lease shorter than the watchdog's: a refused acquire re-applying any lease
    // would raise the PTTL.
    let guard = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    assert_eq!(key_type(&mut raw, name).await, "hash");
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(f.clone(), 1)])
    );
    refused_three_ways(&mut raw, &lock, &f).await;
    // Another handle of the same owner is the same holder (Java: another RLock object on the
    // same thread).
    let again = client.get_non_reentrant_lock(name);
    assert!(again.try_lock().await.unwrap_err().is_already_held());
    // The guard still holds it, once: one unlock frees the lock.
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    assert!(!raw.exists::<_, bool>(name).await.unwrap());
    // Free again: the owner may take it once more.
    let g = lock.try_lock().await.unwrap().expect("free lock not taken");
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_owners_wait_for_a_non_reentrant_lock() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    let name = "nr:contend";
    let lock = client.get_non_reentrant_lock(name);
    let guard = lock.lock().await.unwrap();
    // Another owner of this client and another client: held, not refused.
    let mine = lock.with_owner(LockOwner::new(99));
    assert!(mine.try_lock().await.unwrap().is_none());
    let theirs = other.get_non_reentrant_lock(name);
    assert!(theirs.try_lock().await.unwrap().is_none());
    let waiter = tokio::spawn(async move { theirs.lock().await });
    // Give the waiter time to park, then release: it gets the lock.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "took a held lock");
    guard.unlock().await.unwrap();
    let got = tokio::time::timeout(WAIT, waiter)
        .await
        .expect("the waiter was not woken")
        .unwrap()
        .unwrap();
    let held = fields(&mut raw, name).await;
    assert_eq!(held, HashMap::from([(field(&other, got.owner()), 1)]));
    // An RLock of the same name is excluded too (same data).
    assert!(client.get_lock(name).try_lock().await.unwrap().is_none());
    got.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_cannot_take_a_non_reentrant_fair_lock_twice() {
    let (_server, client, mut raw) = fixture().await;
    let name = "nrf:self";
    let lock = client.get_non_reentrant_fair_lock(name);
    let f = field(&client, lock.owner());
    let guard = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(f.clone(), 1)])
    );

    // A waiter queued behind the holder.
    let waiter_lock = lock.with_owner(LockOwner::new(2));
    let wf = field(&client, waiter_lock.owner());
    let waiter = tokio::spawn(async move {
        let g = waiter_lock.lock().await.unwrap();
        g.unlock().await.unwrap();
    });
    let queued = eventually(WAIT, || async {
        let mut raw = raw.clone();
        let q: Vec<String> = raw.lrange(queue_key(name), 0, -1).await.unwrap();
        q == [wf.clone()]
    })
    .await;
    assert!(queued, "the waiter never queued");
    let deadline: Option<f64> = raw.zscore(timeout_key(name), &wf).await.unwrap();

    refused_three_ways(&mut raw, &lock, &f).await;
    // The refusals left the queue alone: the holder did not join it, the waiter's deadline
    // did not move.
    let q: Vec<String> = raw.lrange(queue_key(name), 0, -1).await.unwrap();
    assert_eq!(q, [wf.as_str()]);
    let after: Option<f64> = raw.zscore(timeout_key(name), &wf).await.unwrap();
    assert_eq!(after, deadline);
    let mine: Option<f64> = raw.zscore(timeout_key(name), &f).await.unwrap();
    assert_eq!(mine, None, "the holder queued");

    guard.unlock().await.unwrap();
    tokio::time::timeout(WAIT, waiter)
        .await
        .expect("the queued waiter was not served")
        .unwrap();
    assert!(!raw.exists::<_, bool>(name).await.unwrap());
    assert!(!raw.exists::<_, bool>(queue_key(name)).await.unwrap());
}
