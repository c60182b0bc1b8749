//! A scoped guard in a loop: the guard of one iteration is dropped at the end of its scope (its
//! release runs in the background), and the next iteration takes the lock again in the same
//! task, by every acquire method. The regression tests of the dropped-guard `Reentry` bug: the
//! next acquire must wait for the background release, never fail with `Reentry`, and never find
//! the hold counted twice. A guard that is still alive must still refuse a second acquire.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redisson_lock::{Lock, LockError, LockKind};

use super::*;
use crate::support::fixture;

/// `loop { let _g = lock.lock().await?; do_work().await?; }`, the hold counted once inside.
async fn lock_loop<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    raw: &mut MultiplexedConnection,
) -> Result<(), LockError> {
    for _ in 0..iterations() {
        let _guard = lock.lock().await?;
        do_work().await?;
        let field = kind.field(lock.client(), lock.owner());
        assert_held_once(raw, lock.name(), &field).await;
    }
    Ok(())
}

async fn scoped_guard_loop() {
    let (_server, client, mut raw) = fixture().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:scoped:lock");
        with_kind!(kind, client, name.clone(), |lock| lock_loop(
            kind, lock, &mut raw
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}

shapes!(scoped_guard_loop => scoped_guard_loop);

/// The same loop through every acquire method in turn: `lock()`, `lock_with_lease`,
/// `try_lock_for` and a plain `try_lock()` (nobody else holds it, so each must get a guard).
async fn mixed_loop<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    raw: &mut MultiplexedConnection,
) -> Result<(), LockError> {
    for i in 0..iterations() {
        let guard = match i % 4 {
            0 => Some(lock.lock().await?),
            1 => Some(lock.lock_with_lease(Duration::from_secs(30)).await?),
            2 => lock.try_lock_for(WAIT).await?,
            _ => lock.try_lock().await?,
        };
        let Some(_guard) = guard else {
            panic!("{kind:?}: iteration {i} got no guard of a lock nobody else holds");
        };
        do_work().await?;
        let field = kind.field(lock.client(), lock.owner());
        assert_held_once(raw, lock.name(), &field).await;
    }
    Ok(())
}

async fn scoped_try_lock_loop() {
    let (_server, client, mut raw) = fixture().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:scoped:try");
        with_kind!(kind, client, name.clone(), |lock| mixed_loop(
            kind, lock, &mut raw
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}

shapes!(scoped_try_lock_loop => scoped_try_lock_loop);

/// A write guard dropped at the end of its scope, then the read lock in the same task (and the
/// other way round): the dropped write hold must not count as "this task writes".
async fn write_then_read() {
    let (_server, client, mut raw) = fixture().await;
    let rw = client.get_read_write_lock("pat:scoped:rw");
    let (read, write) = (rw.read_lock(), rw.write_lock());
    for i in 0..iterations() {
        {
            let _w = write.lock().await.unwrap();
            let field = Kind::Write.field(&client, write.owner());
            assert_held_once(&mut raw, rw.name(), &field).await;
        }
        {
            let _r = match i % 2 {
                0 => read.lock().await.unwrap(),
                _ => read
                    .try_lock()
                    .await
                    .unwrap()
                    .expect("read refused after a write"),
            };
            let field = Kind::Read.field(&client, read.owner());
            assert_held_once(&mut raw, rw.name(), &field).await;
        }
        // The read guard is being released in the background: the write must wait for it.
        let w = write
            .try_lock()
            .await
            .unwrap()
            .expect("write refused after a read");
        drop(w);
    }
    assert_freed(&raw, rw.name()).await;
}

shapes!(write_then_read_in_one_task => write_then_read);

/// A guard still alive: a second acquire by the same task is refused (`Reentry`; the
/// non-reentrant kinds: `AlreadyHeld` from the server), by every acquire method, and the first
/// hold is untouched. Readers share instead.
async fn second_acquire<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    raw: &mut MultiplexedConnection,
) -> Result<(), LockError> {
    let first = lock.lock().await?;
    let field = kind.field(lock.client(), lock.owner());
    if kind == Kind::Read {
        let second = lock.lock().await?;
        assert_eq!(count(raw, lock.name(), &field).await, 2, "readers share");
        drop(second);
        first.unlock().await?;
        return Ok(());
    }
    let attempts = [
        lock.lock().await.map(|_| ()),
        lock.try_lock().await.map(|_| ()),
        lock.try_lock_for(Duration::from_secs(1)).await.map(|_| ()),
        lock.lock_with_lease(Duration::from_secs(5))
            .await
            .map(|_| ()),
    ];
    for (i, attempt) in attempts.into_iter().enumerate() {
        let e = attempt.expect_err("a live guard's task took the lock again");
        if kind.refuses_reentry() {
            assert!(e.is_reentry(), "{kind:?} attempt {i}: {e:?}");
            assert!(e.to_string().contains("reenter"), "{kind:?}: message {e}");
        } else {
            assert!(e.is_already_held(), "{kind:?} attempt {i}: {e:?}");
        }
        assert_held_once(raw, lock.name(), &field).await;
    }
    assert!(!first.is_lost());
    first.unlock().await?;
    // Released explicitly: the same task takes it again at once.
    lock.lock().await?.unlock().await
}

#[tokio::test(flavor = "current_thread")]
async fn a_live_guard_refuses_a_second_acquire_of_its_task() {
    let (_server, client, mut raw) = fixture().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:scoped:live");
        with_kind!(kind, client, name.clone(), |lock| second_acquire(
            kind, lock, &mut raw
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}

/// `join!` of two futures of one task on one name: one gets in, the other is refused at once
/// (they share the task's owner), never both inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_futures_of_one_task_never_share_a_hold() {
    let (_server, client, _raw) = fixture().await;
    for kind in Kind::EXCLUSIVE {
        let name = kind.name("pat:scoped:join");
        with_kind!(kind, client, name, |lock| {
            let (a, b) = tokio::join!(lock.lock(), lock.lock());
            let refused = [&a, &b].iter().filter(|r| r.is_err()).count();
            assert_eq!(refused, 1, "{kind:?}: {a:?} / {b:?}");
            let e = a.as_ref().err().or(b.as_ref().err()).unwrap();
            assert!(
                e.is_reentry() || e.is_already_held(),
                "{kind:?}: refused with {e:?}"
            );
        });
    }
}
