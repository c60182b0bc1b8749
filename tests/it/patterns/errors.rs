//! Errors inside the critical section: a `?` that returns early (the guard dropped on the way
//! out), then the caller retries at once; a panic while holding (the guard dropped during
//! unwinding in a spawned task), then the lock again.

use std::sync::atomic::{AtomicUsize, Ordering};

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{Lock, LockError, LockKind};

use super::*;
use crate::support::fixture;

/// An application's error type, with a `From<LockError>` so `?` works on lock calls.
#[derive(Debug)]
enum AppError {
    Lock(LockError),
    /// A downstream call failed; worth a retry.
    Unavailable,
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

/// A downstream service that fails two calls out of three.
#[derive(Default)]
struct Flaky(AtomicUsize);

impl Flaky {
    async fn call(&self) -> Result<(), AppError> {
        tokio::task::yield_now().await;
        match self.0.fetch_add(1, Ordering::SeqCst) % 3 {
            2 => Ok(()),
            _ => Err(AppError::Unavailable),
        }
    }
}

/// Read-modify-write of a counter in Redis under the lock; the downstream call in the middle
/// fails with `?`, dropping the guard before the write.
async fn update<K: LockKind>(
    kind: Kind,
    lock: &Lock<K>,
    raw: &mut MultiplexedConnection,
    downstream: &Flaky,
) -> Result<(), AppError> {
    let guard = lock.lock().await?;
    let field = kind.field(lock.client(), guard.owner());
    assert_held_once(raw, lock.name(), &field).await;
    let key = format!("{}:counter", lock.name());
    let n: i64 = raw.get::<_, Option<i64>>(&key).await.unwrap().unwrap_or(0);
    downstream.call().await?;
    let () = raw.set(&key, n + 1).await.unwrap();
    guard.unlock().await?;
    Ok(())
}

async fn retried<K: LockKind>(kind: Kind, lock: Lock<K>, raw: &mut MultiplexedConnection) {
    let downstream = Flaky::default();
    let mut failures = 0;
    for _ in 0..iterations() {
        loop {
            match update(kind, &lock, raw, &downstream).await {
                Ok(()) => break,
                Err(AppError::Unavailable) => failures += 1,
                Err(AppError::Lock(e)) => panic!("{kind:?}: the retry failed: {e}"),
            }
        }
    }
    assert_eq!(failures, 2 * iterations(), "{kind:?}");
    let key = format!("{}:counter", lock.name());
    let n: i64 = raw.get(&key).await.unwrap();
    assert_eq!(
        n as usize,
        iterations(),
        "{kind:?}: lost or doubled updates"
    );
}

async fn question_mark_then_retry() {
    let (_server, client, mut raw) = fixture().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:err:retry");
        with_kind!(kind, client, name.clone(), |lock| retried(
            kind, lock, &mut raw
        )
        .await);
        assert_freed(&raw, &name).await;
    }
}

shapes!(question_mark_in_the_critical_section_then_retry => question_mark_then_retry);

/// A request handler that panics while holding, in its own task; the original task then takes
/// the lock (the guard was dropped during unwinding, so it is released, not left to its
/// 30-second lease: the wait bound is below the lease).
async fn panicked<K: LockKind>(kind: Kind, lock: Lock<K>, raw: &mut MultiplexedConnection) {
    // Panics print to stderr: a few rounds suffice.
    for round in 0..3 {
        let handler = lock.clone();
        let task = tokio::spawn(async move {
            let _guard = handler.lock().await.unwrap();
            do_work().await.unwrap();
            panic!("pattern: a handler panics inside its critical section (expected)");
        });
        let e = task.await.unwrap_err();
        assert!(e.is_panic(), "{kind:?}: {e:?}");
        let guard = lock
            .try_lock_for(WAIT)
            .await
            .unwrap_or_else(|e| panic!("{kind:?} round {round}: {e}"))
            .unwrap_or_else(|| {
                panic!("{kind:?} round {round}: the panicked hold was not released")
            });
        let field = kind.field(lock.client(), guard.owner());
        assert_held_once(raw, lock.name(), &field).await;
        drop(guard);
    }
}

async fn panic_in_critical_section() {
    let (_server, client, mut raw) = fixture().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:err:panic");
        with_kind!(kind, client, name.clone(), |lock| panicked(
            kind, lock, &mut raw
        )
        .await);
        assert_freed(&raw, &name).await;
    }
}

shapes!(panic_in_the_critical_section => panic_in_critical_section);
