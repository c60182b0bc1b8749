//! Acquires given up by the caller: `tokio::time::timeout(d, lock.lock())` cut short while
//! another client holds the lock, `tokio::select!` between an acquire and a shutdown signal,
//! and a worker loop that stops on a signal. Nothing given up may leave a hold, a claim (the
//! next acquire of the task would fail with `Reentry`) or a fair-queue entry behind, and the
//! holder's release must then wake the task's next wait.

use std::any::Any;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redisson_lock::{Client, Lock, LockError, LockGuard, LockKind};
use tokio::sync::watch;

use super::*;
use crate::support::redisson::tagged;
use crate::support::{eventually, fixture_with_other};

/// What holds against `kind`: a writer against a reader, else the same kind.
fn against(kind: Kind) -> Kind {
    match kind {
        Kind::Read => Kind::Write,
        k => k,
    }
}

/// `other`'s hold of `name` against `kind`, with a one-minute lease (so a wait that ends within
/// [`WAIT`] was ended by its release, not by its expiry); released when dropped.
async fn hold_against(kind: Kind, other: &Client, name: &str) -> Box<dyn Any + Send> {
    with_kind!(against(kind), other, name.to_owned(), |lock| {
        let guard = lock.lock_with_lease(Duration::from_secs(60)).await.unwrap();
        Box::new(guard) as Box<dyn Any + Send>
    })
}

/// Until this client's waiter is parked on pub/sub (the spin lock polls: a moment).
async fn parked(client: &Client, kind: Kind) {
    if kind == Kind::Spin {
        tokio::time::sleep(Duration::from_millis(50)).await;
    } else {
        let _ = subscribed_at_least(client, 1).await;
    }
}

/// Nothing of `field` left on `name`: no hold and, for the fair kinds, no queue entry.
async fn nothing_left(kind: Kind, raw: &MultiplexedConnection, name: &str, field: &str) {
    assert_eq!(
        count(&mut raw.clone(), name, field).await,
        0,
        "{kind:?}: a hold was left"
    );
    if matches!(kind, Kind::Fair | Kind::NonReentrantFair) {
        let queue = format!("redisson_lock_queue:{}", tagged(name));
        let left = eventually(WAIT, || async {
            let n: i64 = redis::cmd("LLEN")
                .arg(&queue)
                .query_async(&mut raw.clone())
                .await
                .unwrap();
            n == 0
        })
        .await;
        assert!(
            left,
            "{kind:?}: a cut-short waiter stayed in the fair queue"
        );
    }
}

async fn cut_short<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    holder: Box<dyn Any + Send>,
    raw: &mut MultiplexedConnection,
) -> Result<(), LockError> {
    // Cut short at various points: before the first reply, while parked.
    for i in 0..iterations() {
        let d = Duration::from_millis((i % 7) as u64);
        match tokio::time::timeout(d, lock.lock()).await {
            Err(_elapsed) => {}
            Ok(r) => panic!("{kind:?}: an acquire of a held lock ended with {r:?}"),
        }
    }
    let field = kind.field(lock.client(), lock.owner());
    nothing_left(kind, raw, lock.name(), &field).await;
    // Now wait for real: the holder's release wakes us.
    let waiting = tokio::time::timeout(WAIT, lock.lock());
    let release = async {
        parked(lock.client(), kind).await;
        drop(holder);
    };
    let (got, ()) = tokio::join!(waiting, release);
    let guard = got.unwrap_or_else(|_| panic!("{kind:?}: not woken by the holder's release"))?;
    assert_held_once(raw, lock.name(), &field).await;
    guard.unlock().await
}

async fn timeout_cut_short() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:cancel:timeout");
        let holder = hold_against(kind, &other, &name).await;
        with_kind!(kind, client, name.clone(), |lock| cut_short(
            kind, lock, holder, &mut raw
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}

shapes!(timeout_cut_short_then_lock_once_free => timeout_cut_short);

/// Resolves once the stop signal is set.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

/// The acquire a service makes while it may be told to stop.
async fn acquire_or_stop<K: LockKind>(
    lock: &Lock<K>,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<LockGuard<K>>, LockError> {
    tokio::select! {
        guard = lock.lock() => guard.map(Some),
        _ = stopped(stop) => Ok(None),
    }
}

async fn stopped_then_free<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    holder: Box<dyn Any + Send>,
    raw: &mut MultiplexedConnection,
) -> Result<(), LockError> {
    let (tx, mut rx) = watch::channel(false);
    let signal = async {
        parked(lock.client(), kind).await;
        tx.send(true).unwrap();
    };
    let (got, ()) = tokio::join!(
        tokio::time::timeout(WAIT, acquire_or_stop(&lock, &mut rx)),
        signal
    );
    let got = got.unwrap_or_else(|_| panic!("{kind:?}: the stop signal did not end the wait"))?;
    assert!(got.is_none(), "{kind:?}: took a lock another client holds");
    let field = kind.field(lock.client(), lock.owner());
    nothing_left(kind, raw, lock.name(), &field).await;
    drop(holder);
    // Not stopped this time: the same task gets the lock.
    let (_tx, mut rx) = watch::channel(false);
    let guard = tokio::time::timeout(WAIT, acquire_or_stop(&lock, &mut rx))
        .await
        .unwrap_or_else(|_| panic!("{kind:?}: the free lock was not taken"))?
        .expect("not stopped");
    assert_held_once(raw, lock.name(), &field).await;
    drop(guard);
    Ok(())
}

async fn select_against_shutdown() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:cancel:select");
        let holder = hold_against(kind, &other, &name).await;
        with_kind!(kind, client, name.clone(), |lock| stopped_then_free(
            kind, lock, holder, &mut raw
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}

shapes!(select_between_acquire_and_shutdown_signal => select_against_shutdown);

/// A worker: takes the lock, works, repeats, until told to stop (possibly while waiting).
async fn worker<K: LockKind>(
    lock: Lock<K>,
    mut stop: watch::Receiver<bool>,
    section: Occupancy,
) -> Result<(), LockError> {
    loop {
        tokio::select! {
            guard = lock.lock() => {
                let _guard = guard?;
                let _inside = section.enter(lock.name());
                do_work().await?;
            }
            _ = stopped(&mut stop) => return Ok(()),
        }
    }
}

async fn workers_until_stopped() {
    let (_server, client, raw, _other) = fixture_with_other().await;
    for kind in Kind::EXCLUSIVE {
        let name = kind.name("pat:cancel:workers");
        let section = Occupancy::default();
        let (tx, rx) = watch::channel(false);
        let workers: Vec<_> = (0..3)
            .map(|_| {
                with_kind!(kind, client, name.clone(), |lock| tokio::spawn(worker(
                    lock,
                    rx.clone(),
                    section.clone()
                )))
            })
            .collect();
        let enough = eventually(Duration::from_secs(120), || async {
            section.entries() >= iterations()
        })
        .await;
        tx.send(true).unwrap();
        assert!(
            enough,
            "{kind:?}: the workers stalled at {}",
            section.entries()
        );
        for w in workers {
            tokio::time::timeout(WAIT, w)
                .await
                .unwrap_or_else(|_| panic!("{kind:?}: a worker did not stop"))
                .unwrap()
                .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        }
        assert_freed(&raw, &name).await;
    }
}

shapes!(worker_loop_stopped_by_a_signal => workers_until_stopped);
