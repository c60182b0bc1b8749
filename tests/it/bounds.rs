//! Compile-time checks: the public types can cross tasks and threads, and the futures of the
//! main operations can be spawned on a multi-thread runtime.

use std::time::Duration;

use crate::support::with_client;
use redisson_lock::{Client, LockError, LockGuard, LockOwner, RLock, RLockGuard, Reentrant};

fn assert_send_sync_static<T: Send + Sync + 'static>() {}
fn assert_send<T: Send>(_: &T) {}

#[test]
fn public_types_are_send_sync_and_static() {
    assert_send_sync_static::<Client>();
    assert_send_sync_static::<RLock>();
    assert_send_sync_static::<LockGuard<Reentrant>>();
    assert_send_sync_static::<RLockGuard>();
    assert_send_sync_static::<LockError>();
    assert_send_sync_static::<LockOwner>();
    // LockError is a proper error type.
    fn is_error<E: std::error::Error + Send + Sync + 'static>() {}
    is_error::<LockError>();
}

/// The futures are checked with `assert_send` and, to be sure, spawned on a multi-thread
/// runtime (which only compiles for `Send + 'static` futures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_futures_are_send() {
    let (_server, client) = with_client().await;
    let lock = client.get_lock("bounds");

    let fut = lock.lock();
    assert_send(&fut);
    let guard = fut.await.unwrap();
    let fut = lock.try_lock_for(Duration::from_secs(1));
    assert_send(&fut);
    // The default owner is refused the re-entry (no waiting): the guard re-enters.
    assert!(fut.await.unwrap_err().is_reentry());
    let fut = guard.reenter();
    assert_send(&fut);
    let inner = fut.await.unwrap();
    let fut = inner.unlock();
    assert_send(&fut);
    fut.await.unwrap();
    let fut = guard.lost();
    assert_send(&fut);
    drop(fut);
    let fut = lock.unlock();
    assert_send(&fut);
    drop(fut);
    let fut = guard.unlock();
    assert_send(&fut);
    fut.await.unwrap();

    let l = lock.clone();
    let guard = tokio::spawn(async move { l.lock().await })
        .await
        .unwrap()
        .unwrap();
    let l = lock.clone();
    let none = tokio::spawn(async move { l.try_lock_for(Duration::from_millis(50)).await })
        .await
        .unwrap()
        .unwrap();
    assert!(none.is_none(), "another task entered a held lock");
    tokio::spawn(guard.unlock()).await.unwrap().unwrap();
    let l = lock.clone();
    let c = client.clone();
    tokio::spawn(async move {
        let g = l.lock_with_lease(Duration::from_secs(5)).await?;
        c.renew_now().await;
        assert!(l.is_locked().await?);
        g.unlock().await
    })
    .await
    .unwrap()
    .unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// Every parked waiter's task carries its `lock()` future, and a task that goes on to
/// `unlock()` carries the larger of the two for its whole life: both stay small (the
/// acquisition and the release are boxed inside; issue 11 item 4). They were 4,032 and 2,928
/// bytes before; the bounds leave room for compiler changes.
#[tokio::test]
async fn lock_and_unlock_futures_stay_small() {
    fn size<F: std::future::Future>(_: &F) -> usize {
        std::mem::size_of::<F>()
    }
    let (_server, client) = with_client().await;
    let lock = client.get_lock("small-futures");
    let f = lock.lock();
    assert!(size(&f) <= 1024, "lock(): {} bytes", size(&f));
    drop(f);
    let f = lock.try_lock_for(Duration::from_secs(1));
    assert!(size(&f) <= 1024, "try_lock_for(): {} bytes", size(&f));
    drop(f);
    let guard = lock.lock().await.unwrap();
    let f = guard.unlock();
    assert!(size(&f) <= 1024, "guard.unlock(): {} bytes", size(&f));
    f.await.unwrap();
    let f = lock.unlock();
    assert!(size(&f) <= 1024, "lock.unlock(): {} bytes", size(&f));
}
