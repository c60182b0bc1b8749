//! The blocking API (`redisson_lock::blocking`) the way synchronous code uses it: scoped guards
//! in loops on plain threads (released synchronously at the end of the scope), the same loop in
//! `spawn_blocking` closures on a multi-thread runtime, a thread re-entering as Java's does,
//! and the refusal inside a current-thread runtime.

use std::time::Duration;

use redisson_lock::blocking::{Client as BlockingClient, Lock};
use redisson_lock::{LockError, LockKind};

use super::*;
use crate::support::TestServer;

/// The hold count of `field` on `name`, read on a plain connection.
fn count_sync(server: &TestServer, name: &str, field: &str) -> i64 {
    let mut conn = server.raw().get_connection().unwrap();
    let n: Option<i64> = redis::cmd("HGET")
        .arg(name)
        .arg(field)
        .query(&mut conn)
        .unwrap();
    n.unwrap_or(0)
}

fn exists_sync(server: &TestServer, name: &str) -> bool {
    let mut conn = server.raw().get_connection().unwrap();
    redis::cmd("EXISTS").arg(name).query(&mut conn).unwrap()
}

/// A thread's loop: `{ let _g = lock.lock()?; ... }`, every other time through `try_lock_for`.
fn thread_loop<K: LockKind>(
    kind: Kind,
    lock: &Lock<K>,
    server: &TestServer,
    section: &Occupancy,
) -> Result<(), LockError> {
    for i in 0..iterations() {
        let guard = match i % 2 {
            0 => lock.lock()?,
            _ => lock
                .try_lock_for(WAIT)?
                .unwrap_or_else(|| panic!("{kind:?}: no guard within {WAIT:?}")),
        };
        let _inside = (kind != Kind::Read).then(|| section.enter(lock.name()));
        let field = kind.field(lock.as_async().client(), guard.owner());
        let n = count_sync(server, lock.name(), &field);
        assert_eq!(n, 1, "{kind:?}: the thread's field counts {n} holds");
    }
    Ok(())
}

#[test]
fn blocking_scoped_guard_loop_on_plain_threads() {
    let server = TestServer::start();
    let client = BlockingClient::with_config(server.config()).unwrap();
    for kind in Kind::ALL {
        let name = kind.name("pat:blocking:threads");
        let section = Occupancy::default();
        with_kind!(kind, client, name.clone(), |lock| {
            std::thread::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| thread_loop(kind, &lock, &server, &section).unwrap());
                }
            })
        });
        // A blocking guard's drop returns once the release is done: nothing is left now.
        assert!(
            !exists_sync(&server, &name),
            "{kind:?}: a hold outlived its scope"
        );
        if kind != Kind::Read {
            assert_eq!(section.entries(), 3 * iterations(), "{kind:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_scoped_guard_loop_in_spawn_blocking() {
    let server = std::sync::Arc::new(TestServer::start());
    let config = server.config();
    let client = tokio::task::spawn_blocking(move || BlockingClient::with_config(config))
        .await
        .unwrap()
        .expect("a blocking client connects from spawn_blocking on a multi-thread runtime");
    let raw = server.conn().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:blocking:spawn");
        let section = Occupancy::default();
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let (server, section) = (server.clone(), section.clone());
                with_kind!(kind, client, name.clone(), |lock| {
                    tokio::task::spawn_blocking(move || thread_loop(kind, &lock, &server, &section))
                })
            })
            .collect();
        for t in tasks {
            let done = tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .unwrap_or_else(|_| panic!("{kind:?}: a spawn_blocking loop hung"));
            done.unwrap().unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        }
        assert_freed(&raw, &name).await;
        if kind != Kind::Read {
            assert_eq!(section.entries(), 3 * iterations(), "{kind:?}");
        }
    }
    tokio::task::spawn_blocking(move || drop(client))
        .await
        .unwrap();
}

#[test]
fn blocking_calls_in_a_current_thread_runtime_are_refused() {
    let server = TestServer::start();
    let client = BlockingClient::with_config(server.config()).unwrap();
    let lock = client.get_lock("pat:blocking:refused");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let direct = lock.lock().unwrap_err();
        assert!(direct.is_invalid_argument(), "{direct:?}");
        assert!(direct.to_string().contains("current-thread"), "{direct}");
        let l = lock.clone();
        let inside = tokio::task::spawn_blocking(move || l.try_lock_for(Duration::from_secs(1)))
            .await
            .unwrap()
            .unwrap_err();
        assert!(inside.is_invalid_argument(), "{inside:?}");
        assert!(inside.to_string().contains("spawn_blocking"), "{inside}");
    });
    drop(rt);
    // Nothing was taken, and outside the runtime the same handle works.
    assert!(!lock.is_locked().unwrap());
    lock.lock().unwrap().unlock().unwrap();
}

/// A thread locking again what it holds re-enters, as Java's thread does; each guard releases
/// one hold at the end of its scope.
#[test]
fn blocking_thread_reenters_like_java() {
    let server = TestServer::start();
    let client = BlockingClient::with_config(server.config()).unwrap();
    for kind in [
        Kind::Reentrant,
        Kind::Fair,
        Kind::Fenced,
        Kind::Spin,
        Kind::Write,
    ] {
        let name = kind.name("pat:blocking:reenter");
        with_kind!(kind, client, name.clone(), |lock| {
            for _ in 0..iterations() {
                let outer = lock.lock().unwrap();
                let field = kind.field(client.as_async(), outer.owner());
                {
                    let _inner = lock.lock().unwrap();
                    assert_eq!(count_sync(&server, &name, &field), 2, "{kind:?}");
                }
                assert_eq!(count_sync(&server, &name, &field), 1, "{kind:?}");
                drop(outer);
                assert!(!exists_sync(&server, &name), "{kind:?}");
            }
        });
    }
}
