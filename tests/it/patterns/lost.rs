//! A long job raced against the hold: `select!` between the job and `guard.lost()` (or
//! `guard.at_risk()`), the way the README shows. Another process takes the hold away (an
//! operator's `force_unlock`, a `DEL`), the watchdog's next renewal (`client.renew_now()`)
//! finds it gone, and the job must stop; the guard's `unlock()` then says `LeaseLost`, and the
//! lock can be taken again.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redisson_lock::{Client, Lock, LockError, LockKind};

use super::*;
use crate::support::fixture_with_other;

/// A job that would run for an hour.
async fn long_job() {
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Done,
    Stopped,
}

/// How the hold is taken away.
#[derive(Clone, Copy, Debug)]
enum Taken {
    ForceUnlock,
    Del,
}

async fn take_away(
    kind: Kind,
    how: Taken,
    other: &Client,
    raw: &MultiplexedConnection,
    name: &str,
) {
    match how {
        Taken::ForceUnlock => {
            let forced = with_kind!(kind, other, name.to_owned(), |lock| lock
                .force_unlock()
                .await
                .unwrap());
            assert!(forced, "{kind:?}: force_unlock found nothing to delete");
        }
        Taken::Del => {
            let n: i64 = redis::cmd("DEL")
                .arg(name)
                .query_async(&mut raw.clone())
                .await
                .unwrap();
            assert_eq!(n, 1, "{kind:?}: nothing to DEL");
        }
    }
}

async fn raced<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    other: &Client,
    raw: &mut MultiplexedConnection,
    at_risk: bool,
) -> Result<(), LockError> {
    for (round, how) in [Taken::ForceUnlock, Taken::Del].into_iter().enumerate() {
        let guard = lock.lock().await?;
        let job = async {
            tokio::select! {
                _ = long_job() => Outcome::Done,
                _ = guard.lost(), if !at_risk => Outcome::Stopped,
                _ = guard.at_risk(), if at_risk => Outcome::Stopped,
            }
        };
        let thief = async {
            take_away(kind, how, other, raw, lock.name()).await;
            lock.client().renew_now().await;
        };
        let (outcome, ()) = tokio::join!(tokio::time::timeout(WAIT, job), thief);
        let outcome = outcome.unwrap_or_else(|_| panic!("{kind:?} {how:?}: the job never stopped"));
        assert_eq!(outcome, Outcome::Stopped, "{kind:?} {how:?}");
        assert!(guard.is_lost(), "{kind:?} {how:?}");
        assert!(guard.is_at_risk(), "{kind:?} {how:?}: lost but not at risk");
        let e = guard
            .unlock()
            .await
            .expect_err("unlock of a lost hold succeeded");
        assert!(e.is_lease_lost(), "{kind:?} {how:?}: {e:?}");
        // The lock is free again: the same task takes it, once.
        let again = lock.try_lock_for(WAIT).await?.unwrap_or_else(|| {
            panic!("{kind:?} round {round}: the lock could not be taken after the loss")
        });
        assert!(!again.is_lost());
        let field = kind.field(lock.client(), again.owner());
        assert_held_once(raw, lock.name(), &field).await;
        again.unlock().await?;
    }
    Ok(())
}

async fn job_raced_against_lost() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:lost:lost");
        with_kind!(kind, client, name.clone(), |lock| raced(
            kind, lock, &other, &mut raw, false
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}

shapes!(long_job_raced_against_lost => job_raced_against_lost);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_job_raced_against_at_risk() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:lost:risk");
        with_kind!(kind, client, name.clone(), |lock| raced(
            kind, lock, &other, &mut raw, true
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}
