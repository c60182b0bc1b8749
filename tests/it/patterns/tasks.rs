//! Guards and tasks: a guard moved into `tokio::spawn` and dropped (or unlocked) there, then the
//! lock taken again by the task that took it first; two tasks taking two locks in opposite
//! orders, resolved with `try_lock_for` and a back-off.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redisson_lock::{Lock, LockError, LockKind};

use super::*;
use crate::support::fixture;

/// `let g = lock.lock().await?; tokio::spawn(async move { work; drop(g) })`, then the original
/// task locks again (the hold belonged to it all along).
async fn handed_over<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    raw: &mut MultiplexedConnection,
) -> Result<(), LockError> {
    for i in 0..iterations() {
        let guard = lock.lock().await?;
        let field = kind.field(lock.client(), guard.owner());
        assert_held_once(raw, lock.name(), &field).await;
        let background = tokio::spawn(async move {
            do_work().await?;
            match i % 2 {
                0 => drop(guard),
                _ => guard.unlock().await?,
            }
            Ok::<(), LockError>(())
        });
        background.await.unwrap()?;
        let again = lock.lock().await?;
        assert_held_once(raw, lock.name(), &field).await;
        drop(again);
    }
    Ok(())
}

async fn guard_moved_into_a_task() {
    let (_server, client, mut raw) = fixture().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:tasks:moved");
        with_kind!(kind, client, name.clone(), |lock| handed_over(
            kind, lock, &mut raw
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}

shapes!(guard_moved_into_a_spawned_task => guard_moved_into_a_task);

/// Takes `first` then `second`; when `second` does not come within a short wait, lets go of
/// `first`, backs off a little and starts over. Returns how many times it backed off.
async fn both<K: LockKind>(
    first: Lock<K>,
    second: Lock<K>,
    rounds: usize,
    section: Occupancy,
    seed: u64,
) -> Result<usize, LockError> {
    let (mut done, mut backoffs) = (0, 0);
    while done < rounds {
        let a = first.lock().await?;
        match second.try_lock_for(Duration::from_millis(20)).await? {
            Some(b) => {
                let _inside = section.enter(first.name());
                do_work().await?;
                drop(b);
                drop(a);
                done += 1;
            }
            None => {
                drop(a);
                backoffs += 1;
                tokio::time::sleep(jitter(seed + backoffs as u64, 20)).await;
            }
        }
    }
    Ok(backoffs)
}

async fn opposite_orders() {
    let (_server, client, raw) = fixture().await;
    for kind in Kind::EXCLUSIVE {
        let (a, b) = (kind.name("pat:tasks:a"), kind.name("pat:tasks:b"));
        let section = Occupancy::default();
        let rounds = iterations();
        let (one, two) = with_kind!(kind; la = (client, a.clone()), lb = (client, b.clone()) => {
            let (la2, lb2) = (la.clone(), lb.clone());
            let one = tokio::spawn(both(la, lb, rounds, section.clone(), 1));
            let two = tokio::spawn(both(lb2, la2, rounds, section.clone(), 2));
            tokio::time::timeout(Duration::from_secs(120), async {
                (one.await.unwrap(), two.await.unwrap())
            })
            .await
            .unwrap_or_else(|_| panic!("{kind:?}: the two tasks did not both finish"))
        });
        one.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        two.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(section.entries(), 2 * rounds, "{kind:?}");
        assert_freed(&raw, &a).await;
        assert_freed(&raw, &b).await;
    }
}

shapes!(two_locks_in_opposite_orders_with_backoff => opposite_orders);
