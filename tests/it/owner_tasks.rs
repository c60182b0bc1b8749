//! Owners inside one task: futures that run concurrently in one task (`join!`,
//! `FuturesUnordered`, `buffer_unordered`) share the task's default owner, so a second acquire
//! of a lock by that owner is refused (`LockError::Reentry`) instead of silently re-entering;
//! re-entry on purpose goes through the guard (`reenter`) or an explicit owner, with Redisson's
//! data on the wire (the owner's field counts the holds).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::stream::{self, FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use redisson_lock::All;
use redisson_lock::{Client, LockError, LockKind, LockOwner, MultiLock};

use crate::support::redisson::channel;
use crate::support::*;

/// Generous bound for anything event-driven.
const WAIT: Duration = Duration::from_secs(10);

/// The owner's hold count in the lock hash, as a Java client reads it.
async fn count(raw: &mut MultiplexedConnection, name: &str, field: &str) -> i64 {
    let n: Option<i64> = redis::cmd("HGET")
        .arg(name)
        .arg(field)
        .query_async(raw)
        .await
        .unwrap();
    n.unwrap_or(0)
}

/// Two futures in one `join!`, each locking `name` with the default owner. The first holds
/// until the second's acquire has ended (a `watch` channel, no timing), so on a re-entrant
/// default owner both would be inside at once (the helper panics then). The first must see
/// its owner's hold count at 1 on the server once the second has tried; returns the second's
/// error.
async fn join_two(client: &Client, raw: &MultiplexedConnection, name: &str) -> LockError {
    let lock = client.get_lock(name);
    let (tried, mut seen) = tokio::sync::watch::channel(false);
    let field = field(client, lock.owner());
    let first = async {
        let guard = lock.lock().await?;
        seen.wait_for(|t| *t).await.unwrap();
        let n = count(&mut raw.clone(), name, &field).await;
        guard.unlock().await?;
        Ok::<i64, LockError>(n)
    };
    let second = async {
        let r = lock.lock().await;
        tried.send(true).unwrap();
        match r {
            Ok(g) => {
                g.unlock().await.unwrap();
                panic!("two futures of one task were inside `{name}` at once");
            }
            Err(e) => e,
        }
    };
    let (first, second) = tokio::join!(first, second);
    assert_eq!(
        first.unwrap(),
        1,
        "the owner's hold count while the first held"
    );
    second
}

/// `join!` in a spawned task (the task's owner) and in the test's own body (outside a task:
/// the thread's owner): the second future is refused with `Reentry`, naming the lock and the
/// owner, and the first holds alone. Before the change, the second re-entered (count 2) and
/// the helper panicked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_futures_in_one_join_never_share_a_lock() {
    let (_server, client, raw) = fixture().await;
    let (c, r) = (client.clone(), raw.clone());
    let (owner, e) = tokio::spawn(async move {
        let e = join_two(&c, &r, "owners:join").await;
        (LockOwner::current(), e)
    })
    .await
    .unwrap();
    assert!(e.is_reentry(), "{e:?}");
    match &e {
        LockError::Reentry { name, owner: o } => {
            assert_eq!((name.as_str(), *o), ("owners:join", owner));
        }
        other => panic!("{other:?}"),
    }
    let text = e.to_string();
    assert!(
        text.contains("owners:join") && text.contains("reenter") && text.contains("with_owner"),
        "the message says how to re-enter on purpose: {text}"
    );
    // The test body is no task: its owner is the thread's, shared by its futures just the same.
    let e = join_two(&client, &raw, "owners:join-thread").await;
    assert!(e.is_reentry(), "{e:?}");
    let mut raw = raw;
    assert!(!exists(&mut raw, "owners:join").await);
    assert!(!exists(&mut raw, "owners:join-thread").await);
}

/// `buffer_unordered` and `FuturesUnordered` over one name with the default owner: every
/// future that got in held alone (each holds until all have tried, so re-entrant owners would
/// pile up), the others were refused with `Reentry`, and the server never counted two holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unordered_futures_of_one_task_exclude_each_other() {
    const N: usize = 4;
    let (_server, client, raw) = fixture().await;
    tokio::spawn(async move {
        for (round, name) in ["owners:buffered", "owners:unordered"]
            .into_iter()
            .enumerate()
        {
            let lock = client.get_lock(name);
            let field = field(&client, lock.owner());
            let inside = AtomicUsize::new(0);
            let (tried, seen) = tokio::sync::watch::channel(0usize);
            let one = |_| {
                let (lock, field, raw) = (lock.clone(), field.clone(), raw.clone());
                let (inside, tried, mut seen) = (&inside, &tried, seen.clone());
                async move {
                    let r = lock.lock().await;
                    tried.send_modify(|n| *n += 1);
                    let guard = r?;
                    let together = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    seen.wait_for(|n| *n == N).await.unwrap();
                    let held = count(&mut raw.clone(), name, &field).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await?;
                    Ok::<_, LockError>((together, held))
                }
            };
            let results: Vec<_> = if round == 0 {
                stream::iter(0..N)
                    .map(one)
                    .buffer_unordered(N)
                    .collect()
                    .await
            } else {
                (0..N)
                    .map(one)
                    .collect::<FuturesUnordered<_>>()
                    .collect()
                    .await
            };
            let ok: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(
                ok,
                vec![&(1, 1)],
                "{name}: one future alone, count 1: {results:?}"
            );
            assert!(
                results
                    .iter()
                    .filter_map(|r| r.as_ref().err())
                    .all(|e| e.is_reentry()),
                "{name}: {results:?}"
            );
        }
    })
    .await
    .unwrap();
}

/// With an explicit owner shared by two futures (and a spawned task) they re-enter, exactly as
/// Redisson does: the owner's field counts 2 on the server, and the key goes with the last
/// release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_owner_re_enters_as_redisson_does() {
    let (_server, client, mut raw) = fixture().await;
    let (lock, field) = owned_lock(&client, "owners:explicit", 7);
    let (a, b) = tokio::join!(lock.lock(), lock.lock());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        fields(&mut raw, "owners:explicit").await,
        [(field.clone(), 2)].into()
    );
    let l = lock.clone();
    let c = tokio::spawn(async move { l.lock().await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(count(&mut raw, "owners:explicit", &field).await, 3);
    for g in [c, b] {
        g.unlock().await.unwrap();
    }
    assert_eq!(count(&mut raw, "owners:explicit", &field).await, 1);
    a.unlock().await.unwrap();
    assert!(!exists(&mut raw, "owners:explicit").await);
}

/// Re-entry through the guard: the count goes up on the server, a shorter inner lease never
/// cuts the outer hold, each guard releases its own hold, and once everything is released the
/// default owner may lock again (nothing stale refuses it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_re_enters_and_releases_its_own_hold() {
    let (_server, client, mut raw) = fixture().await;
    let name = "owners:guard";
    let lock = client.get_lock(name);
    tokio::spawn(async move {
        let f = field(&client, lock.owner());
        let outer = lock.lock().await.unwrap();
        assert!(lock.try_lock().await.unwrap_err().is_reentry());
        let inner = outer.reenter().await.unwrap();
        assert_eq!(count(&mut raw, name, &f).await, 2);
        assert_eq!(inner.owner(), outer.owner());
        let short = inner
            .reenter_with_lease(Duration::from_millis(500))
            .await
            .unwrap();
        assert_eq!(short.lease(), Some(Duration::from_millis(500)));
        assert_eq!(count(&mut raw, name, &f).await, 3);
        assert!(
            pttl(&mut raw, name).await > 1_000,
            "the short inner lease cut the watchdog holds"
        );
        short.unlock().await.unwrap();
        inner.unlock().await.unwrap();
        assert_eq!(count(&mut raw, name, &f).await, 1);
        assert!(lock.lock().await.unwrap_err().is_reentry(), "still held");
        outer.unlock().await.unwrap();
        assert!(!exists(&mut raw, name).await);
        // Nothing left that refuses the owner.
        let again = lock.try_lock().await.unwrap().expect("free");
        // A guard whose hold is gone re-enters nothing.
        assert!(lock.force_unlock().await.unwrap());
        assert!(again.reenter().await.unwrap_err().is_lease_lost());
        assert!(
            !exists(&mut raw, name).await,
            "a lost guard's re-entry took the lock"
        );
    })
    .await
    .unwrap();
}

/// An acquire dropped while it waits (and one dropped right after its first poll, its script
/// in flight) leaves no claim behind: the same task locks at once afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_acquire_leaves_nothing_that_refuses_the_next() {
    let (server, client, mut raw, other) = fixture_with_other().await;
    let name = "owners:dropped";
    let held = other.get_lock(name).lock().await.unwrap();
    let lock = client.get_lock(name);
    tokio::spawn(async move {
        let unlock_channel = channel(name);
        {
            let waiting = lock.lock();
            tokio::pin!(waiting);
            tokio::select! {
                r = &mut waiting => panic!("took a held lock: {r:?}"),
                _ = wait_for_subscriber(&server, &unlock_channel) => {}
            }
        }
        // Dropped while waiting: refused now only because another client holds it.
        assert!(lock.try_lock().await.unwrap().is_none());
        held.unlock().await.unwrap();
        {
            let first_poll = lock.lock();
            tokio::pin!(first_poll);
            let polled =
                std::future::poll_fn(|cx| std::task::Poll::Ready(first_poll.as_mut().poll(cx)))
                    .await;
            assert!(polled.is_pending());
        }
        let g = lock.lock().await.unwrap();
        assert_eq!(fields(&mut raw, name).await.len(), 1);
        g.unlock().await.unwrap();
        assert!(!exists(&mut raw, name).await);
    })
    .await
    .unwrap();
}

async fn wait_for_subscriber(server: &TestServer, ch: &str) {
    let ok = eventually(WAIT, || async { numsub_on(server, ch).await >= 1 }).await;
    assert!(ok, "nobody subscribed to {ch}");
}

/// A read-write lock with the default owner: readers share (two reads in one `join!` both get
/// in); writing while reading or writing, and reading while writing, are refused. Redisson's
/// downgrade (read under the write hold) goes through the write guard's owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_default_owner_readers_share_writers_are_refused() {
    let (_server, client, mut raw) = fixture().await;
    let name = "owners:rw";
    let rw = client.get_read_write_lock(name);
    tokio::spawn(async move {
        let (read, write) = (rw.read_lock(), rw.write_lock());
        let (a, b) = tokio::join!(read.lock(), read.lock());
        let (a, b) = (a.unwrap(), b.unwrap());
        let rf = field(&client, read.owner());
        assert_eq!(count(&mut raw, name, &rf).await, 2);
        assert!(write.try_lock().await.unwrap_err().is_reentry(), "upgrade");
        a.unlock().await.unwrap();
        b.unlock().await.unwrap();
        let w = write.lock().await.unwrap();
        assert!(
            read.try_lock().await.unwrap_err().is_reentry(),
            "read under write"
        );
        assert!(
            write.try_lock().await.unwrap_err().is_reentry(),
            "write again"
        );
        // Redisson's downgrade, on purpose: read as the write guard's owner, then let go of
        // the write.
        let r = read.with_owner(w.owner()).lock().await.unwrap();
        w.unlock().await.unwrap();
        let mode: String = redis::cmd("HGET")
            .arg(name)
            .arg("mode")
            .query_async(&mut raw)
            .await
            .unwrap();
        assert_eq!(mode, "read");
        r.unlock().await.unwrap();
        assert!(!exists(&mut raw, name).await);
    })
    .await
    .unwrap();
}

/// Every other re-entrant kind refuses the default owner's second acquire and re-enters through
/// the guard (count 2 on the server); a MultiLock acting for the default owner is refused a
/// member the owner holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reentrant_kind_refuses_the_default_owner_and_re_enters_by_guard() {
    let (_server, client, raw) = fixture().await;
    tokio::spawn(async move {
        kind(&client, &raw, client.get_fair_lock("owners:fair")).await;
        kind(&client, &raw, client.get_fenced_lock("owners:fenced")).await;
        kind(&client, &raw, client.get_spin_lock("owners:spin")).await;
        let a = client.get_lock("owners:multi-a");
        let multi = MultiLock::<All>::new([a.clone(), client.get_lock("owners:multi-b")]).unwrap();
        let held = a.lock().await.unwrap();
        let e = multi.try_lock().await.unwrap_err();
        assert!(format!("{e:?}").contains("Reentry"), "{e:?}");
        held.unlock().await.unwrap();
        multi
            .try_lock()
            .await
            .unwrap()
            .expect("free")
            .unlock()
            .await
            .unwrap();
    })
    .await
    .unwrap();
}

async fn kind<K: LockKind>(
    client: &Client,
    raw: &MultiplexedConnection,
    lock: redisson_lock::Lock<K>,
) {
    let mut raw = raw.clone();
    let name = lock.name().to_owned();
    let f = field(client, lock.owner());
    let outer = lock.lock().await.unwrap();
    let e = lock.try_lock().await.unwrap_err();
    assert!(e.is_reentry(), "{name}: {e:?}");
    let inner = outer.reenter().await.unwrap();
    assert_eq!(count(&mut raw, &name, &f).await, 2, "{name}");
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await, "{name}");
}
