//! A guard dropped instead of unlocked (issue 37): its release runs in the background, and as
//! far as its owner can tell the lock is released. The same task's next acquire waits for that
//! release instead of failing with `LockError::Reentry`, the hold count a Java client reads goes
//! 1, 0, 1 (never 2), and a release that cannot complete is never left counted as held. The
//! everyday loops over every kind are in `patterns::`; these are the edges.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redisson_lock::{Client, LockError, LockOwner};

use crate::support::*;

/// Generous bound for anything event-driven.
const WAIT: Duration = Duration::from_secs(10);

async fn hget(raw: &mut MultiplexedConnection, name: &str, field: &str) -> Option<i64> {
    redis::cmd("HGET")
        .arg(name)
        .arg(field)
        .query_async(raw)
        .await
        .unwrap()
}

/// The lock taken again right after its guard was dropped, by every way of acquiring: the
/// background release is waited for (a `try_lock` too), and Redis never sees a second hold.
#[tokio::test]
async fn every_acquire_after_a_dropped_guard_finds_it_released() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("dg:every");
    let field = field(&client, lock.owner());
    for round in 0..20 {
        drop(lock.lock().await.unwrap());
        let g = match round % 4 {
            0 => lock.lock().await.unwrap(),
            1 => lock.try_lock().await.unwrap().expect("free after the drop"),
            2 => lock.try_lock_for(WAIT).await.unwrap().expect("free"),
            _ => lock
                .try_lock_with_lease(Duration::ZERO, Duration::from_secs(30))
                .await
                .unwrap()
                .expect("free"),
        };
        assert_eq!(
            hget(&mut raw, "dg:every", &field).await,
            Some(1),
            "round {round}"
        );
        drop(g);
    }
    // A live guard is still refused, and the drop of the last one releases.
    let live = lock.lock().await.unwrap();
    assert!(matches!(
        lock.try_lock().await,
        Err(LockError::Reentry { .. })
    ));
    drop(live);
    assert!(eventually(WAIT, || async { !lock.is_locked().await.unwrap() }).await);
}

/// An explicit owner re-enters a hold it has; a hold whose only guard was dropped is not one:
/// the next acquire waits for the release instead of re-entering it (count 1, never 2).
#[tokio::test]
async fn an_explicit_owner_does_not_re_enter_a_dropped_hold() {
    let (_server, client, mut raw) = fixture().await;
    let owner = LockOwner::unique();
    let lock = client.get_lock("dg:explicit").with_owner(owner);
    let field = field(&client, owner);
    for _ in 0..20 {
        drop(lock.lock().await.unwrap());
        let g = lock.lock().await.unwrap();
        assert_eq!(hget(&mut raw, "dg:explicit", &field).await, Some(1));
        // A live hold is re-entered, as Redisson does.
        let inner = lock.lock().await.unwrap();
        assert_eq!(hget(&mut raw, "dg:explicit", &field).await, Some(2));
        drop(inner);
        drop(g);
    }
}

/// An `unlock()` refused for good (the key was replaced by a string: `WRONGTYPE`) returns its
/// error; the next acquire is not refused as a re-entry but reports the real problem, and once
/// the key is cleaned up the lock works again. Nothing is left counted as held.
#[tokio::test]
async fn after_an_unlock_refused_for_good_the_next_acquire_reports_the_real_error() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("dg:wrongtype");
    let guard = lock.lock().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("dg:wrongtype")
        .arg("not a hash")
        .query_async(&mut raw)
        .await
        .unwrap();
    let e = guard.unlock().await.unwrap_err();
    assert!(matches!(e, LockError::WrongType { .. }), "{e:?}");
    let e = lock.try_lock_for(WAIT).await.unwrap_err();
    assert!(matches!(e, LockError::WrongType { .. }), "{e:?}");
    let _: () = redis::cmd("DEL")
        .arg("dg:wrongtype")
        .query_async(&mut raw)
        .await
        .unwrap();
    let g = lock
        .try_lock_for(WAIT)
        .await
        .unwrap()
        .expect("free once cleaned");
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// An `unlock()` cut off by a dropped connection (the server paused, one attempt): the next
/// acquire neither re-enters nor is refused; once the server is back it takes the lock with a
/// count of 1. (The response timeout, 2 s, is what the pause lasts; 300 ms could fail the
/// calls around it on a loaded machine, as it did in a `latches::` test.)
#[tokio::test]
async fn after_an_unlock_that_timed_out_the_next_acquire_takes_it_once() {
    let server = TestServer::start();
    let client = server
        .client_with(|c| {
            c.with_response_timeout(Duration::from_secs(2))
                .with_retry_attempts(1)
        })
        .await;
    let mut raw = server.conn().await;
    let lock = client.get_lock("dg:timeout");
    let field = field(&client, lock.owner());
    let guard = lock.lock().await.unwrap();
    server.pause();
    let r = guard.unlock().await;
    server.resume();
    assert!(r.is_err(), "the unlock could not be answered: {r:?}");
    let g = lock
        .try_lock_for(WAIT)
        .await
        .unwrap()
        .expect("released or trimmed");
    assert_eq!(hget(&mut raw, "dg:timeout", &field).await, Some(1));
    g.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// A guard moved to a plain thread and dropped there (no runtime current) is released on the
/// client's runtime: another client gets the lock long before its 30 s lease would end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_on_a_plain_thread_is_released() {
    let (_server, [a, b]) = two_clients().await;
    let guard = a.get_lock("dg:thread").lock().await.unwrap();
    std::thread::spawn(move || drop(guard)).join().unwrap();
    let taken = b.get_lock("dg:thread").try_lock_for(WAIT).await.unwrap();
    assert!(taken.is_some(), "the plain thread's drop released the hold");
}

/// A guard that outlives its runtime (the client's too) is dropped without a panic, and its
/// hold expires with its lease; another client then takes the lock.
#[test]
fn a_guard_dropped_after_its_runtime_shut_down_expires_with_its_lease() {
    let server = TestServer::start();
    let url = server.url();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let guard = rt.block_on(async {
        let client = Client::connect(&url).await.unwrap();
        client
            .get_lock("dg:orphan")
            .lock_with_lease(Duration::from_secs(2))
            .await
            .unwrap()
    });
    drop(rt);
    drop(guard);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let other = Client::connect(&url).await.unwrap();
        let g = other
            .get_lock("dg:orphan")
            .try_lock_for(WAIT)
            .await
            .unwrap();
        assert!(g.is_some(), "the orphaned hold expired with its lease");
    });
}

/// Asked right after a drop, the lock's questions see it released (as `tokio::sync::Mutex`
/// would be): each waits for the owner's background release first.
#[tokio::test]
async fn questions_asked_right_after_a_drop_see_it_released() {
    let (_server, client) = with_client().await;
    let lock = client.get_lock("dg:questions");
    for _ in 0..20 {
        drop(lock.lock().await.unwrap());
        assert!(!lock.is_locked().await.unwrap());
        drop(lock.lock().await.unwrap());
        assert_eq!(lock.hold_count().await.unwrap(), 0);
        drop(lock.lock().await.unwrap());
        assert!(!lock.is_held_by_current().await.unwrap());
        drop(lock.lock().await.unwrap());
        assert_eq!(
            lock.remain_time_to_live().await.unwrap(),
            redisson_lock::LockTtl::NotLocked
        );
    }
}
