//! `Client::shutdown` (issue 22, item 6): every hold of the client is released at once, so a
//! waiter on another client gets the lock long before the holder's lease would have ended; the
//! client's own waits end with `ShutDown`, new acquires are refused before anything is sent,
//! and what could not be released is reported.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redisson_lock::{LockError, LockOwner};

use crate::support::redisson::{channel, tagged};
use crate::support::{channel_subscribers, eventually, field, parked_on, TestServer};

/// The holder's lease: a waiter not woken by the shutdown's release waits this long.
const LEASE: Duration = Duration::from_secs(60);
/// A woken waiter must have the lock within this bound after the shutdown began (generous: a
/// loaded 2-core machine; the point is "not after the lease").
const AT_ONCE: Duration = Duration::from_secs(15);
/// After the subscription shows, time for the waiter's post-subscribe attempt to fail and the
/// waiter to sleep on the message (so a release that publishes nothing cannot pass by luck).
const SETTLE: Duration = Duration::from_secs(1);

/// A shutdown must end (a hang fails the test instead of blocking it).
async fn bounded<T>(shutdown: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LEASE, shutdown)
        .await
        .expect("the shutdown did not end")
}

/// Waits for `n` subscribers on `channel`, then lets the waiters go to sleep.
async fn parked(server: &TestServer, channel: &str, n: i64) {
    assert!(
        channel_subscribers(server, channel, n).await,
        "no waiter parked on {channel}"
    );
    tokio::time::sleep(SETTLE).await;
}

/// A waiter on another client, parked behind a re-entered RLock (a fixed lease and a watchdog
/// re-entry), gets it at once when the holder's client shuts down; the holder's guards are
/// lost, its client refuses new acquires without sending anything, and a second shutdown
/// finds nothing left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_elsewhere_gets_a_reentered_lock_at_once() {
    let server = TestServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let mut raw = server.conn().await;
    let lock = a.get_lock("sd:r").with_owner(LockOwner::new(1));
    let outer = lock.lock_with_lease(LEASE).await.unwrap();
    let inner = lock.lock().await.unwrap();
    let other = a.get_lock("sd:other").lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);

    let waiter_lock = b.get_lock("sd:r");
    let waiter = tokio::spawn(async move {
        let guard = waiter_lock.lock().await.unwrap();
        let at = Instant::now();
        guard.unlock().await.unwrap();
        at
    });
    parked(&server, &channel("sd:r"), 1).await;

    let began = Instant::now();
    let report = bounded(a.shutdown()).await;
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.released, 2, "two (lock, owner) holds: {report:?}");
    let got = tokio::time::timeout(LEASE, waiter)
        .await
        .expect("the waiter was not woken by the shutdown")
        .unwrap();
    let after = got.saturating_duration_since(began);
    assert!(
        after < AT_ONCE,
        "the waiter took {after:?} after the shutdown (lease {LEASE:?})"
    );
    assert!(outer.is_lost() && inner.is_lost() && other.is_lost());
    assert!(!raw.exists::<_, bool>("sd:other").await.unwrap());
    assert!(a.is_shut_down());

    // Refused before anything is sent: no key, no subscription.
    let refused = a.get_lock("sd:new").try_lock_for(LEASE).await.unwrap_err();
    assert!(refused.is_shut_down(), "{refused:?}");
    assert!(!raw.exists::<_, bool>("sd:new").await.unwrap());
    let refused = a.get_semaphore("sd:sem").try_acquire().await.unwrap_err();
    assert!(matches!(refused, LockError::ShutDown), "{refused:?}");
    // The released guards have nothing left to release.
    assert!(inner.unlock().await.unwrap_err().is_lease_lost());
    let again = bounded(a.shutdown()).await;
    assert_eq!((again.released, again.unreleased.len()), (0, 0));
}

/// The fair lock's queue head and a write waiter behind a read hold are woken at once too:
/// the shutdown's release publishes each kind's own message on the kind's own channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_and_read_write_waiters_elsewhere_are_woken_at_once() {
    let server = TestServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let _fair = a
        .get_fair_lock("sd:f")
        .lock_with_lease(LEASE)
        .await
        .unwrap();
    let rw = a.get_read_write_lock("sd:rw");
    let _read = rw.read_lock().lock_with_lease(LEASE).await.unwrap();

    let owner = LockOwner::new(7);
    let fair_waiter = b.get_fair_lock("sd:f").with_owner(owner);
    let fair_channel = format!("{}:{}", channel("sd:f"), field(&b, owner));
    let fair = parked_on(&server, &fair_channel, 1, async move {
        let guard = fair_waiter.lock().await?;
        let at = Instant::now();
        guard.unlock().await.map(|()| at)
    })
    .await;
    let writer = b.get_read_write_lock("sd:rw").write_lock();
    let rw_channel = format!("redisson_rwlock:{}", tagged("sd:rw"));
    let write = parked_on(&server, &rw_channel, 1, async move {
        let guard = writer.lock().await?;
        let at = Instant::now();
        guard.unlock().await.map(|()| at)
    })
    .await;
    tokio::time::sleep(SETTLE).await;

    let began = Instant::now();
    let report = bounded(a.shutdown()).await;
    assert_eq!(
        (report.released, report.unreleased.len()),
        (2, 0),
        "{report:?}"
    );
    for (what, task) in [("fair", fair), ("write", write)] {
        let at = tokio::time::timeout(LEASE, task)
            .await
            .unwrap_or_else(|_| panic!("the {what} waiter was not woken"))
            .unwrap()
            .unwrap();
        let after = at.saturating_duration_since(began);
        assert!(
            after < AT_ONCE,
            "the {what} waiter took {after:?} (lease {LEASE:?})"
        );
    }
}

/// The shutting-down client's own waits (a lock, a fair lock, a semaphore) end with
/// `ShutDown` at once, the fair waiter leaves the queue, and another client's hold is left
/// alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_clients_waits_end_and_other_holds_stay() {
    let server = TestServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let mut raw = server.conn().await;
    let held = b
        .get_lock("sd:held")
        .with_owner(LockOwner::new(2))
        .lock_with_lease(LEASE)
        .await
        .unwrap();
    let _fair_held = b
        .get_fair_lock("sd:fq")
        .lock_with_lease(LEASE)
        .await
        .unwrap();
    let sem = a.get_semaphore("sd:s");
    assert!(sem.try_set_permits(0).await.unwrap());

    let lock = a.get_lock("sd:held");
    let waiting = parked_on(&server, &channel("sd:held"), 1, async move {
        lock.try_lock_for(LEASE).await.map(|g| g.is_some())
    })
    .await;
    let owner = LockOwner::new(3);
    let fair = a.get_fair_lock("sd:fq").with_owner(owner);
    let fair_channel = format!("{}:{}", channel("sd:fq"), field(&a, owner));
    let fair_waiting = parked_on(&server, &fair_channel, 1, async move {
        fair.try_lock_for(LEASE).await.map(|g| g.is_some())
    })
    .await;
    let sem_waiting = parked_on(
        &server,
        &format!("redisson_sc:{}", tagged("sd:s")),
        1,
        async move { sem.try_acquire_for(LEASE).await },
    )
    .await;
    assert_eq!(
        raw.llen::<_, i64>("redisson_lock_queue:{sd:fq}")
            .await
            .unwrap(),
        1
    );
    tokio::time::sleep(SETTLE).await;

    let report = bounded(a.shutdown()).await;
    assert_eq!(
        (report.released, report.unreleased.len()),
        (0, 0),
        "{report:?}"
    );
    for (what, task) in [("lock", waiting), ("fair", fair_waiting)] {
        let ended = tokio::time::timeout(AT_ONCE, task)
            .await
            .unwrap_or_else(|_| panic!("the {what} wait did not end at the shutdown"))
            .unwrap();
        assert!(
            matches!(ended, Err(LockError::ShutDown)),
            "{what}: {ended:?}"
        );
    }
    let ended = tokio::time::timeout(AT_ONCE, sem_waiting)
        .await
        .expect("the semaphore wait did not end at the shutdown")
        .unwrap();
    assert!(
        matches!(ended, Err(LockError::ShutDown)),
        "semaphore: {ended:?}"
    );
    assert!(
        eventually(AT_ONCE, || async {
            server
                .conn()
                .await
                .llen::<_, i64>("redisson_lock_queue:{sd:fq}")
                .await
                .unwrap()
                == 0
        })
        .await,
        "the fair waiter did not leave the queue"
    );
    assert!(!held.is_lost());
    assert!(raw
        .hexists::<_, _, bool>("sd:held", field(&b, LockOwner::new(2)))
        .await
        .unwrap());
    held.unlock().await.unwrap();
}

/// A hold the shutdown cannot release (the server refuses the script: this client's user lost
/// the right to run scripts) is reported with its name, owner field, count and the server's
/// error; it stays in Redis, to expire with its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_could_not_be_released_is_reported() {
    let server = TestServer::start();
    let a = server.client().await;
    let lock = a.get_lock("sd:stuck").with_owner(LockOwner::new(1));
    let _g1 = lock.lock_with_lease(LEASE).await.unwrap();
    let _g2 = lock.lock().await.unwrap();
    let expected_field = field(&a, LockOwner::new(1));
    let mut raw = server.conn().await;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("-@scripting")
        .query_async(&mut raw)
        .await
        .unwrap();

    let report = tokio::time::timeout(LEASE, a.shutdown())
        .await
        .expect("the shutdown did not give up on a refusing server");
    assert_eq!(report.released, 0, "{report:?}");
    assert!(!report.is_complete());
    let [stuck] = report.unreleased.as_slice() else {
        panic!("one hold unreleased expected: {report:?}");
    };
    assert_eq!((stuck.name.as_str(), stuck.holds), ("sd:stuck", 2));
    assert_eq!(stuck.holder, expected_field);
    assert!(
        stuck.error.to_string().to_lowercase().contains("noperm"),
        "{:?}",
        stuck.error
    );
    let count: i64 = raw.hget("sd:stuck", &expected_field).await.unwrap();
    assert_eq!(count, 2, "the hold stays until its lease ends");
    let ttl: i64 = raw.pttl("sd:stuck").await.unwrap();
    assert!(ttl > 0, "it still expires with its lease: {ttl}");
}

/// Permit-expirable semaphore permits this client took and did not release (with a lease and
/// without) are given back: a waiter on another client gets one at once. A permit released
/// before the shutdown is not released again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_clients_permits_are_given_back() {
    let server = TestServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let mut raw = server.conn().await;
    let slots = a.get_permit_expirable_semaphore("sd:pes");
    assert!(slots.try_set_permits(3).await.unwrap());
    let released = slots.with_lease(LEASE).acquire().await.unwrap();
    slots.release(&released).await.unwrap();
    let _leased = slots.with_lease(LEASE).acquire().await.unwrap();
    let _forever = slots.acquire().await.unwrap();
    let _third = slots.with_lease(LEASE).acquire().await.unwrap();
    assert_eq!(slots.available_permits().await.unwrap(), 0);

    let other = b.get_permit_expirable_semaphore("sd:pes");
    let channel = format!("redisson_sc:{}", tagged("sd:pes"));
    let waiting = parked_on(&server, &channel, 1, async move {
        let id = other.with_lease(LEASE).try_acquire_for(LEASE).await?;
        Ok::<_, LockError>((Instant::now(), id))
    })
    .await;
    tokio::time::sleep(SETTLE).await;

    let began = Instant::now();
    let report = bounded(a.shutdown()).await;
    assert_eq!(
        (
            report.released,
            report.permits_released,
            report.unreleased.len()
        ),
        (0, 3, 0),
        "{report:?}"
    );
    let (at, id) = tokio::time::timeout(LEASE, waiting)
        .await
        .expect("the permit waiter was not woken by the shutdown")
        .unwrap()
        .unwrap();
    assert!(id.is_some());
    let after = at.saturating_duration_since(began);
    assert!(
        after < AT_ONCE,
        "the permit waiter took {after:?} (lease {LEASE:?})"
    );
    let taken: i64 = raw.zcard("{sd:pes}:timeout").await.unwrap();
    assert_eq!(taken, 1, "only the other client's permit is out");
    let available: i64 = raw.get("sd:pes").await.unwrap();
    assert_eq!(available, 2);
}
