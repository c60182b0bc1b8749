//! A client's and a runtime's life around held locks: a client dropped without `shutdown()`, a
//! task aborted while it holds, a guard dropped after its runtime shut down, and `shutdown()`
//! with acquires in flight. Another process must get the lock no later than the lease, nothing
//! may panic or hang.

use std::any::Any;
use std::time::Duration;

use redisson_lock::{Client, Lock, LockError, LockKind, RLockGuard};

use super::*;
use crate::support::{fixture_with_other, TestServer};

/// A short watchdog lease, so a hold nobody releases expires soon.
const SHORT_LEASE: Duration = Duration::from_millis(1500);

/// A service: its client and the lock it holds, dropped together (no `shutdown()`).
struct Service {
    _guard: Box<dyn Any + Send>,
    _client: Client,
}

async fn take<K: LockKind>(lock: Lock<K>) -> Box<dyn Any + Send> {
    Box::new(lock.lock().await.unwrap())
}

/// The holder's service dropped as a whole: its guard's drop releases the hold, so another
/// client gets it well before the 30-second lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_dropped_with_its_guard_releases_the_lock() {
    let (server, _client, raw, other) = fixture_with_other().await;
    for kind in Kind::EXCLUSIVE {
        let name = kind.name("pat:life:service");
        let client = server.client().await;
        let guard = with_kind!(kind, client, name.clone(), |lock| take(lock).await);
        drop(Service {
            _guard: guard,
            _client: client,
        });
        let got = with_kind!(kind, other, name.clone(), |lock| lock
            .try_lock_for(WAIT)
            .await
            .unwrap()
            .map(drop));
        assert!(
            got.is_some(),
            "{kind:?}: the dropped service's hold was not released"
        );
        assert_freed(&raw, &name).await;
    }
}

/// A hold kept past its guard (`detach`, Redisson-style code that never unlocked), then the
/// client dropped without `shutdown()`: the watchdog stops with the client, so the hold
/// expires with its lease and another client gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_dropped_without_shutdown_lets_its_holds_expire() {
    let (server, _client, raw, other) = fixture_with_other().await;
    for kind in Kind::EXCLUSIVE {
        let name = kind.name("pat:life:dropped");
        let client = server
            .client_with(|c| c.with_watchdog_timeout(SHORT_LEASE))
            .await;
        with_kind!(kind, client, name.clone(), |lock| lock
            .lock()
            .await
            .unwrap()
            .detach());
        drop(client);
        let got = with_kind!(kind, other, name.clone(), |lock| lock
            .try_lock_for(WAIT)
            .await
            .unwrap()
            .map(drop));
        assert!(
            got.is_some(),
            "{kind:?}: the dropped client's hold was renewed on"
        );
        assert_freed(&raw, &name).await;
    }
}

/// A request task aborted while it holds (its guard dropped by the abort): the lock is released
/// for the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_aborted_while_holding_releases_the_lock() {
    let (_server, client, raw, other) = fixture_with_other().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:life:abort");
        for _ in 0..iterations().min(10) {
            let (held_tx, held_rx) = tokio::sync::oneshot::channel();
            let task = with_kind!(kind, client, name.clone(), |lock| tokio::spawn(
                async move {
                    let _guard = lock.lock().await.unwrap();
                    held_tx.send(()).unwrap();
                    std::future::pending::<()>().await;
                }
            ));
            held_rx.await.unwrap();
            task.abort();
            assert!(task.await.unwrap_err().is_cancelled());
            // A writer of another client needs even a reader's hold gone.
            let conflicting = if kind == Kind::Read {
                Kind::Write
            } else {
                kind
            };
            let got = with_kind!(conflicting, other, name.clone(), |lock| lock
                .try_lock_for(WAIT)
                .await
                .unwrap()
                .map(drop));
            assert!(
                got.is_some(),
                "{kind:?}: the aborted task's hold was not released"
            );
        }
        assert_freed(&raw, &name).await;
    }
}

/// Builds a runtime of `flavor`, connects and locks in it, and hands the guard out; the
/// runtime is then dropped.
fn lock_in_a_runtime(server: &TestServer, name: &str, multi: bool) -> (Client, RLockGuard) {
    let rt = match multi {
        true => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        false => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .unwrap();
    let config = server.config().with_watchdog_timeout(SHORT_LEASE);
    let (client, guard) = rt.block_on(async {
        let client = Client::with_config(config).await.unwrap();
        let guard = client.get_lock(name).lock().await.unwrap();
        (client, guard)
    });
    drop(rt);
    (client, guard)
}

/// A guard that outlived its runtime, dropped on a plain thread and inside another runtime: no
/// panic; the hold expires with its lease and another client gets it.
#[test]
fn a_guard_dropped_after_its_runtime_shut_down() {
    let server = TestServer::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let other = rt.block_on(server.client());
    for (round, multi) in [false, true, false, true].into_iter().enumerate() {
        let name = format!("pat:life:runtime:{round}");
        let (client, guard) = lock_in_a_runtime(&server, &name, multi);
        match round {
            0 | 1 => drop(guard),
            _ => rt.block_on(async move { drop(guard) }),
        }
        drop(client);
        let got = rt.block_on(async {
            other
                .get_lock(name.as_str())
                .try_lock_for(WAIT)
                .await
                .unwrap()
                .map(drop)
        });
        assert!(
            got.is_some(),
            "round {round}: the orphaned hold never expired"
        );
    }
}

/// `client.shutdown()` while tasks wait for locks another client holds, and while one task
/// holds a lock: the waits end with `ShutDown`, nothing hangs, the hold is given back at once
/// (the other client's waiter gets it before its lease), and later acquires are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_acquires_in_flight() {
    let (_server, client, raw, other) = fixture_with_other().await;
    let mut holders: Vec<Box<dyn Any + Send>> = Vec::new();
    let mut waiters = Vec::new();
    for kind in Kind::ALL {
        let name = kind.name("pat:life:shutdown");
        let against = if kind == Kind::Read {
            Kind::Write
        } else {
            kind
        };
        holders.push(with_kind!(against, other, name.clone(), |lock| {
            Box::new(lock.lock_with_lease(Duration::from_secs(60)).await.unwrap())
                as Box<dyn Any + Send>
        }));
        for _ in 0..2 {
            waiters.push(with_kind!(kind, client, name.clone(), |lock| tokio::spawn(
                async move { lock.lock().await.map(drop) }
            )));
        }
    }
    // One hold of this client, in a task working under it.
    let mine = client.get_lock("pat:life:shutdown:mine");
    let guard = mine.lock().await.unwrap();
    // Parked (or polling, the spin locks): every channel but the spin lock's subscribed.
    let _ = subscribed_at_least(&client, Kind::ALL.len() - 1).await;
    let report = tokio::time::timeout(WAIT, client.shutdown())
        .await
        .expect("shutdown hung");
    assert!(report.is_complete(), "{report:?}");
    for w in waiters {
        let r = tokio::time::timeout(WAIT, w)
            .await
            .expect("a waiter hung past shutdown")
            .unwrap();
        let e = r.expect_err("a waiter took a lock another client holds");
        assert!(e.is_shut_down(), "{e:?}");
    }
    assert!(guard.is_lost());
    let e = guard.unlock().await.unwrap_err();
    assert!(e.is_lease_lost(), "{e:?}");
    let taken = other
        .get_lock("pat:life:shutdown:mine")
        .try_lock_for(WAIT)
        .await
        .unwrap();
    assert!(
        taken.is_some(),
        "the shut-down client's hold was not given back"
    );
    drop(taken);
    let later: Result<_, LockError> = mine.lock().await;
    assert!(later.unwrap_err().is_shut_down());
    drop(holders);
    assert_freed(&raw, "pat:life:shutdown:mine").await;
}
