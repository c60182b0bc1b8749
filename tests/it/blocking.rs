//! The blocking API from plain threads: owners are threads, guards release on drop, waiters
//! are woken by pub/sub, the watchdog renews while the thread does something else, and calls
//! from inside an async runtime are refused instead of panicking.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::support::*;
use redis::Commands;
use redisson_lock::blocking::Client;
use redisson_lock::{Config, LockError};

/// A fresh server and a blocking client of it.
fn blocking_fixture() -> (TestServer, Client) {
    let server = TestServer::start();
    let client = Client::connect(&server.url()).unwrap();
    (server, client)
}

#[test]
fn threads_are_owners_and_reentry_counts() {
    let (server, client) = blocking_fixture();
    let mut raw = server.raw().get_connection().unwrap();
    let lock = client.get_lock("blocking:owners");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    let field = format!("{}:{}", client.id(), outer.owner().id());
    let count: i64 = raw.hget("blocking:owners", &field).unwrap();
    assert_eq!(count, 2);
    // Another thread is another owner: it cannot take the lock, and does not hold it.
    let other = lock.clone();
    std::thread::spawn(move || {
        assert!(!other.is_held_by_current().unwrap());
        assert!(other.try_lock().unwrap().is_none());
        assert!(matches!(other.unlock(), Err(LockError::NotOwner { .. })));
    })
    .join()
    .unwrap();
    drop(inner);
    assert_eq!(lock.hold_count().unwrap(), 1);
    // Dropping the guard released synchronously: the key is gone when drop returns.
    drop(outer);
    let exists: bool = raw.exists("blocking:owners").unwrap();
    assert!(!exists);
}

#[test]
fn contending_threads_take_turns() {
    let (_server, client) = blocking_fixture();
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let lock = client.get_lock("blocking:turns");
            let (inside, most, start) = (inside.clone(), most.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for _ in 0..5 {
                    let guard = lock.lock().unwrap();
                    let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "two threads inside at once");
    assert!(!client.get_lock("blocking:turns").is_locked().unwrap());
}

/// A thread waiting in `lock()` is woken by another client's release (pub/sub), long before
/// the holder's lease would end.
#[test]
fn a_waiting_thread_is_woken_by_the_release() {
    let (server, holder) = blocking_fixture();
    let waiter = Client::connect(&server.url()).unwrap();
    let held = holder
        .get_lock("blocking:wake")
        .lock_with_lease(Duration::from_secs(120))
        .unwrap();
    let lock = waiter.get_lock("blocking:wake");
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let g = lock.try_lock_for(Duration::from_secs(60)).unwrap();
        tx.send(g.is_some()).unwrap();
        drop(g);
    });
    // Parked on pub/sub before the release.
    let mut raw = server.raw().get_connection().unwrap();
    let channel = crate::support::redisson::channel("blocking:wake");
    let parked = (0..600).any(|_| {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query(&mut raw)
            .unwrap();
        n >= 1 || {
            std::thread::sleep(Duration::from_millis(50));
            false
        }
    });
    assert!(parked, "the waiter never subscribed");
    held.unlock().unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(true));
    t.join().unwrap();
}

/// The watchdog renews a hold while the owning thread sleeps outside any blocking call.
#[test]
fn the_watchdog_renews_while_the_thread_sleeps() {
    let server = TestServer::start();
    let config = Config::new(server.url()).with_watchdog_timeout(Duration::from_millis(600));
    let client = Client::with_config(config).unwrap();
    let lock = client.get_lock("blocking:renewed");
    let guard = lock.lock().unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    assert!(lock.is_held_by_current().unwrap(), "lost without renewals");
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
}

/// Fenced tokens and the other kinds through the blocking facade.
#[test]
fn other_kinds_work_blocking() {
    let (_server, client) = blocking_fixture();
    let fenced = client.get_fenced_lock("blocking:fenced");
    let a = fenced.lock().unwrap();
    let b = fenced.lock().unwrap();
    assert!(b.token() > a.token());
    drop(b);
    drop(a);
    let rw = client.get_read_write_lock("blocking:rw");
    let r1 = rw.read_lock().lock().unwrap();
    let r2 = rw.read_lock().lock().unwrap();
    assert!(
        rw.write_lock().try_lock().unwrap().is_none(),
        "a writer beside readers"
    );
    drop((r1, r2));
    let w = rw
        .write_lock()
        .try_lock()
        .unwrap()
        .expect("free after the readers left");
    w.unlock().unwrap();
    let spin = client.get_spin_lock("blocking:spin");
    let g = spin.try_lock_for(Duration::from_secs(1)).unwrap().unwrap();
    assert!(spin.is_locked().unwrap());
    g.unlock().unwrap();
    let fair = client.get_fair_lock("blocking:fair");
    fair.lock().unwrap().unlock().unwrap();
    assert!(!fair.is_locked().unwrap());
}

/// A blocking fenced holder whose lease ran out is refused by the fenced value once a later
/// holder (another thread) wrote through it; the later value stays.
#[test]
fn a_blocking_fenced_value_refuses_the_stale_holder() {
    let (_server, client) = blocking_fixture();
    let lock = client.get_fenced_lock("blocking:fenced-value");
    let value = client.get_fenced_value("blocking:fenced-value:balance");
    assert_eq!(value.key(), "blocking:fenced-value:balance");
    assert_eq!(
        value.fence_key(),
        "{blocking:fenced-value:balance}:redisson_lock_fence"
    );
    assert_eq!(value.as_async().key(), value.key());
    let stale = lock.lock_with_lease(Duration::from_millis(300)).unwrap();
    assert!(value.set(stale.token(), "100").unwrap());
    // The holder "pauses" past its lease; another thread (another owner) waits it out and writes.
    let (lock2, value2) = (lock.clone(), value.clone());
    let later = std::thread::spawn(move || {
        let guard = lock2.lock().unwrap();
        assert!(value2.set(guard.token(), "90").unwrap());
        let token = guard.token();
        guard.unlock().unwrap();
        token
    })
    .join()
    .unwrap();
    assert!(later > stale.token());
    assert!(
        !value.set(stale.token(), "110").unwrap(),
        "the stale holder's write was accepted"
    );
    assert_eq!(value.get().unwrap().as_deref(), Some(&b"90"[..]));
    assert_eq!(value.last_token().unwrap(), Some(later));
    assert!(matches!(stale.unlock(), Err(LockError::LeaseLost { .. })));
}

/// Called from inside a current-thread tokio runtime, the blocking API refuses (no nested
/// block_on panic, no blocked runtime), and dropping its handles there does not panic either.
#[test]
fn inside_a_current_thread_runtime_calls_are_refused_not_panicking() {
    let (_server, client) = blocking_fixture();
    let lock = client.get_lock("blocking:nested");
    let held = lock.lock().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (lock2, client2) = (lock.clone(), client.clone());
    rt.block_on(async move {
        assert!(matches!(
            lock2.try_lock(),
            Err(LockError::InvalidArgument(_))
        ));
        assert!(matches!(
            Client::connect("redis://127.0.0.1:1/"),
            Err(LockError::InvalidArgument(_))
        ));
        drop(lock2);
        drop(client2);
    });
    // The hold is untouched, and released normally from this thread.
    assert_eq!(lock.hold_count().unwrap(), 1);
    held.unlock().unwrap();
    // The last handles dropped inside a runtime: no panic.
    rt.block_on(async move {
        drop(lock);
        drop(client);
    });
}

/// From `spawn_blocking` on a multi-thread runtime (where tokio puts blocking code), and on one
/// of its workers, the blocking API works as on a plain thread; a guard dropped at the end of
/// its scope there is released, so the next iteration takes the lock again.
#[test]
fn inside_a_multi_thread_runtime_the_blocking_api_works() {
    let (_server, client) = blocking_fixture();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let lock = client.get_lock("blocking:spawn_blocking");
    let (l, c, l2) = (lock.clone(), client.clone(), lock.clone());
    rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            for _ in 0..20 {
                let _guard = l.lock().unwrap();
                assert_eq!(l.hold_count().unwrap(), 1);
            }
            // A client made there works too.
            drop(c);
        })
        .await
        .unwrap();
        // On a worker: `block_in_place` hands it over first.
        let l = l2;
        tokio::spawn(async move {
            let guard = l.lock().unwrap();
            assert!(!guard.is_lost());
            guard.unlock().unwrap();
        })
        .await
        .unwrap();
    });
    assert!(!lock.is_locked().unwrap());
}
