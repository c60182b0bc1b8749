//! Re-entry on purpose, the ways the README gives: through the hold (`guard.reenter()`), with an
//! explicit owner shared by several tasks (`lock.with_owner(LockOwner::new(..))`), and
//! Redisson's read-write downgrade (write held, read taken with the write guard's owner, write
//! dropped). Every hold counts once on the wire per guard, and every guard gives back its own.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redisson_lock::{Lock, LockError, LockKind, LockOwner};

use super::*;
use crate::support::{eventually, fixture, fixture_with_other};

/// `outer` then `outer.reenter()`: the owner's field counts 2; the inner guard dropped at the
/// end of its scope gives back one hold, the outer one the other.
async fn reentered<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    raw: &mut MultiplexedConnection,
) -> Result<(), LockError> {
    for i in 0..iterations() {
        let outer = lock.lock().await?;
        let field = kind.field(lock.client(), outer.owner());
        let inner = match outer.reenter().await {
            Ok(inner) => inner,
            Err(e) if !matches!(kind, Kind::NonReentrant | Kind::NonReentrantFair) => {
                return Err(e)
            }
            Err(e) => {
                assert!(e.is_already_held(), "{kind:?}: {e:?}");
                assert_held_once(raw, lock.name(), &field).await;
                continue;
            }
        };
        assert_eq!(count(raw, lock.name(), &field).await, 2, "{kind:?}");
        match i % 2 {
            0 => drop(inner),
            _ => inner.unlock().await?,
        }
        let one = eventually(WAIT, || async {
            count(&mut raw.clone(), lock.name(), &field).await == 1
        })
        .await;
        assert!(one, "{kind:?}: the inner guard did not give back its hold");
        assert!(!outer.is_lost(), "{kind:?}");
        drop(outer);
    }
    Ok(())
}

async fn reenter_through_the_guard() {
    let (_server, client, mut raw) = fixture().await;
    for kind in Kind::ALL {
        let name = kind.name("pat:reentry:guard");
        with_kind!(kind, client, name.clone(), |lock| reentered(
            kind, lock, &mut raw
        )
        .await)
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_freed(&raw, &name).await;
    }
}

shapes!(reenter_on_purpose_through_the_guard => reenter_through_the_guard);

/// Two tasks acting as one holder through an explicit owner (Java's `lockAsync(.., threadId)`):
/// both hold at once, the field counts both, another client is kept out until both let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_sharing_an_explicit_owner() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    for kind in [
        Kind::Reentrant,
        Kind::Fair,
        Kind::Fenced,
        Kind::Spin,
        Kind::Write,
    ] {
        let name = kind.name("pat:reentry:owner");
        let owner = LockOwner::new(7_000 + kind as u64);
        let field = kind.field(&client, owner);
        with_kind!(kind; mine = (client, name.clone()), theirs = (other, name.clone()) => {
            let shared = mine.with_owner(owner);
            for _ in 0..iterations() {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let (go, wait) = tokio::sync::oneshot::channel::<()>();
                let l = shared.clone();
                let helper = tokio::spawn(async move {
                    let _g = l.lock().await.unwrap();
                    tx.send(()).unwrap();
                    wait.await.unwrap();
                });
                rx.await.unwrap();
                let g = shared.lock().await.unwrap();
                assert_eq!(count(&mut raw, &name, &field).await, 2, "{kind:?}");
                assert!(theirs.try_lock().await.unwrap().is_none(), "{kind:?}: shared hold broken");
                go.send(()).unwrap();
                helper.await.unwrap();
                drop(g);
                let taken = theirs.try_lock_for(WAIT).await.unwrap();
                assert!(taken.is_some(), "{kind:?}: a shared hold leaked");
            }
        });
        assert_freed(&raw, &name).await;
    }
}

/// Redisson's downgrade: write held, read taken with the write guard's owner, write given back
/// (dropped or unlocked): readers of another client get in, its writers wait until the read
/// hold is given back too. The task's plain read acquire is refused while it writes.
async fn downgrade() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    let rw = client.get_read_write_lock("pat:reentry:rw");
    let theirs = other.get_read_write_lock("pat:reentry:rw");
    for i in 0..iterations() {
        let w = rw.write_lock().lock().await.unwrap();
        let refused = rw.read_lock().lock().await.unwrap_err();
        assert!(refused.is_reentry(), "{refused:?}");
        let r = rw.read_lock().with_owner(w.owner()).lock().await.unwrap();
        let field = Kind::Read.field(&client, r.owner());
        assert_held_once(&mut raw, "pat:reentry:rw", &field).await;
        match i % 2 {
            0 => drop(w),
            _ => w.unlock().await.unwrap(),
        }
        let downgraded = eventually(WAIT, || async {
            let mode: Option<String> = redis::cmd("HGET")
                .arg("pat:reentry:rw")
                .arg("mode")
                .query_async(&mut raw.clone())
                .await
                .unwrap();
            mode.as_deref() == Some("read")
        })
        .await;
        assert!(
            downgraded,
            "iteration {i}: the write hold was not given back"
        );
        let reader = theirs.read_lock().try_lock().await.unwrap();
        assert!(
            reader.is_some(),
            "iteration {i}: a reader was kept out after the downgrade"
        );
        // Another task of theirs wants to write: kept out while anyone reads.
        let writer = theirs.write_lock();
        let kept_out = tokio::spawn(async move { writer.try_lock().await.map(|g| g.is_none()) });
        assert!(
            kept_out.await.unwrap().unwrap(),
            "iteration {i}: a writer got in with readers"
        );
        drop(reader);
        drop(r);
        let writer = theirs.write_lock().try_lock_for(WAIT).await.unwrap();
        assert!(
            writer.is_some(),
            "iteration {i}: the read hold was not given back"
        );
        writer.unwrap().unlock().await.unwrap();
    }
    assert_freed(&raw, "pat:reentry:rw").await;
}

shapes!(read_write_downgrade => downgrade);

/// `reenter_with_lease`: a shorter inner lease never cuts the outer hold short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reenter_with_a_short_lease_keeps_the_outer_hold() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("pat:reentry:lease");
    let outer = lock.lock().await.unwrap();
    let inner = outer
        .reenter_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(inner.lease(), Some(Duration::from_millis(200)));
    let field = Kind::Reentrant.field(&client, outer.owner());
    // The inner lease runs out; the outer hold stays (its field still counts, the key lives).
    assert!(eventually(WAIT, || async { inner.is_lost() }).await);
    assert!(!outer.is_lost());
    assert!(count(&mut raw, "pat:reentry:lease", &field).await >= 1);
    drop(inner);
    let once = eventually(WAIT, || async {
        count(&mut raw.clone(), "pat:reentry:lease", &field).await == 1
    })
    .await;
    assert!(once, "the inner hold was not given back");
    outer.unlock().await.unwrap();
    assert_freed(&raw, "pat:reentry:lease").await;
}
