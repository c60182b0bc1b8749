//! Cancel safety: a dropped `lock()` / `try_lock_for()` / `unlock()` future, at any await point,
//! leaves no hold and no renewal behind, and a cancelled re-entry never changes an earlier hold.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{Client, LockOwner};

/// Generous bound for background clean-up.
const SETTLE: Duration = Duration::from_secs(10);
/// How many poll counts the sweeps try.
const MAX_POLLS: usize = 24;

/// Polls `fut` up to `polls` times, letting the runtime (and its I/O) run between polls in one of
/// several ways, then drops it. Returns the output if it finished first.
async fn poll_then_drop<F: Future>(fut: F, polls: usize, pace: usize) -> Option<F::Output> {
    let mut fut = pin!(fut);
    for i in 0..polls {
        let step = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await;
        if let Poll::Ready(out) = step {
            return Some(out);
        }
        match (pace + i) % 3 {
            0 => tokio::task::yield_now().await,
            1 => tokio::time::sleep(Duration::from_micros(300)).await,
            _ => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
    None
}

async fn count_of(raw: &mut MultiplexedConnection, key: &str, field: &str) -> i64 {
    let c: Option<i64> = raw.hget(key, field).await.unwrap();
    c.unwrap_or(0)
}

/// Waits until the lock key is gone and the client renews and subscribes nothing.
///
/// (`tracked_holds` is not checked here: an empty bookkeeping slot can survive a background
/// release that races another clone of it; see `waiter_cancelled_while_waiting_leaves_nothing`
/// for the deterministic case.)
async fn assert_all_clear(server: &TestServer, client: &Client, key: &str, context: &str) {
    let ok = eventually(SETTLE, || async {
        let mut raw = server.conn().await;
        let s = client.stats();
        !exists(&mut raw, key).await && s.watched_holds == 0 && s.subscribed_channels == 0
    })
    .await;
    let mut raw = server.conn().await;
    let fields: std::collections::HashMap<String, i64> = raw.hgetall(key).await.unwrap();
    assert!(
        ok,
        "{context}: not cleaned up: key fields {fields:?}, stats {:?}",
        client.stats()
    );
}

/// Cancelling an uncontended `lock()` after every number of polls, by one owner: the next
/// `lock()` by that owner must find a count of exactly 1, and nothing is renewed afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_dropped_at_every_poll_by_one_owner() {
    let name = "cancel:one-owner";
    let (server, client, mut raw) = fixture().await;
    let lock = client.get_lock(name).with_owner(LockOwner::new(1));
    for pace in 0..3 {
        for polls in 0..MAX_POLLS {
            if let Some(r) = poll_then_drop(lock.lock(), polls, pace).await {
                r.unwrap().unlock().await.unwrap();
            }
            // The gate orders this after any clean-up of the cancelled acquire.
            let g = lock.lock().await.unwrap();
            assert_eq!(
                lock.hold_count().await.unwrap(),
                1,
                "polls {polls} pace {pace}: cancelled acquire left a hold"
            );
            assert_eq!(client.stats().watched_holds, 1);
            g.unlock().await.unwrap();
            assert!(!exists(&mut raw, name).await, "polls {polls} pace {pace}");
            assert_eq!(client.stats().watched_holds, 0);
        }
    }
    assert_all_clear(&server, &client, name, "end of sweep").await;
}

/// The same with a fresh task (a fresh default owner) for every cancellation, and also with
/// `try_lock_for` and `timeout`-style cancellation: the key disappears and the client forgets
/// the owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_dropped_at_every_poll_in_fresh_tasks() {
    let (server, client) = with_client().await;
    let name = "cancel:fresh";
    let lock = client.get_lock(name);
    for polls in 0..MAX_POLLS {
        for which in 0..2 {
            let l = lock.clone();
            tokio::spawn(async move {
                let done = if which == 0 {
                    poll_then_drop(l.lock(), polls, polls).await
                } else {
                    poll_then_drop(l.try_lock_for(Duration::from_secs(5)), polls, polls)
                        .await
                        .map(|r| r.map(|g| g.expect("free lock")))
                };
                if let Some(r) = done {
                    r.unwrap().unlock().await.unwrap();
                }
            })
            .await
            .unwrap();
            assert_all_clear(
                &server,
                &client,
                name,
                &format!("polls {polls} which {which}"),
            )
            .await;
        }
    }
    for micros in [
        0u64, 50, 100, 200, 400, 700, 1_000, 1_500, 2_000, 3_000, 5_000,
    ] {
        let l = lock.clone();
        tokio::spawn(async move {
            if let Ok(r) = tokio::time::timeout(Duration::from_micros(micros), l.lock()).await {
                r.unwrap().unlock().await.unwrap();
            }
        })
        .await
        .unwrap();
        assert_all_clear(&server, &client, name, &format!("timeout {micros}us")).await;
    }
}

/// A waiter cancelled while it waits for a holder: the client forgets it at once (no slot
/// left per cancelled waiter), and once the holder releases, the lock is free (the waiter did
/// not take it), its subscription is gone and nothing is renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_cancelled_while_waiting_leaves_nothing() {
    let name = "cancel:waiting";
    let (server, client, mut raw, holder_client) = fixture_with_other().await;
    let lock = client.get_lock(name);
    let channel = format!("redisson_lock__channel:{{{name}}}");
    for round in 0..12usize {
        let held = holder_client.get_lock(name).lock().await.unwrap();
        let l = lock.clone();
        let cut = Duration::from_millis(5 * round as u64);
        tokio::spawn(async move {
            let r = if round % 2 == 0 {
                tokio::time::timeout(cut + Duration::from_millis(100), l.lock())
                    .await
                    .map(|r| r.map(Some))
            } else {
                tokio::time::timeout(
                    cut + Duration::from_millis(100),
                    l.try_lock_for(Duration::from_secs(60)),
                )
                .await
            };
            assert!(r.is_err(), "round {round}: acquired a held lock");
        })
        .await
        .unwrap();
        // Cancelled while parked: no script was in flight, nothing to clean up in Redis, and
        // the waiter's bookkeeping is gone.
        let forgotten = eventually(SETTLE, || async {
            let s = client.stats();
            s.tracked_holds == 0 && s.subscribed_channels == 0
        })
        .await;
        assert!(forgotten, "round {round}: {:?}", client.stats());
        // Cancel by poll count too, while it is parked.
        let l = lock.clone();
        tokio::spawn(async move {
            assert!(poll_then_drop(l.lock(), round + 2, round).await.is_none());
        })
        .await
        .unwrap();
        held.unlock().await.unwrap();
        assert_all_clear(&server, &client, name, &format!("round {round}")).await;
        let unsubscribed = subscribers_within(&server, &channel, 0, SETTLE).await;
        assert!(unsubscribed, "round {round}: still subscribed");
    }
    assert!(!exists(&mut raw, name).await);
}

/// A waiter cancelled while the holder releases at about the same time (its retry may be in
/// flight): whatever it may have taken is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_cancelled_around_the_release() {
    let (server, [client, holder_client]) = two_clients().await;
    let name = "cancel:race";
    let lock = client.get_lock(name);
    for round in 0..20u64 {
        let held = holder_client.get_lock(name).lock().await.unwrap();
        let l = lock.clone();
        let (parked_tx, parked) = tokio::sync::oneshot::channel();
        let waiter = tokio::spawn(async move {
            let fut = l.lock();
            let mut fut = pin!(fut);
            // Park, then give it a short moment after the release before cancelling.
            tokio::select! {
                _ = &mut fut => panic!("acquired a held lock"),
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
            let _ = parked_tx.send(());
            tokio::time::sleep(Duration::from_micros(100 * round)).await;
            if let Some(r) = poll_then_drop(fut, 3, round as usize).await {
                r.unwrap().unlock().await.unwrap();
            }
        });
        // Release only once the waiter has parked (on a loaded machine a fixed sleep here could
        // release before the waiter's own 50 ms were up, and it would take the lock early).
        parked.await.unwrap();
        held.unlock().await.unwrap();
        waiter.await.unwrap();
        assert_all_clear(&server, &client, name, &format!("round {round}")).await;
    }
}

/// Cancelling a re-entry (the owner already holds 1) at every poll count: the count is never
/// 0 meanwhile, is exactly 1 afterwards, and the original guard still releases normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_reentry_never_changes_the_earlier_hold() {
    let name = "cancel:reentry";
    let (server, client, mut raw) = fixture().await;
    let (lock, me) = owned_lock(&client, name, 42);
    let first = lock.lock().await.unwrap();

    // Watch the count on the server during the whole sweep.
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut sampler_conn = raw.clone();
    let (key, f) = (name.to_owned(), me.clone());
    let sampler = tokio::spawn(async move {
        let mut min = i64::MAX;
        let mut samples = 0u64;
        loop {
            let c = count_of(&mut sampler_conn, &key, &f).await;
            min = min.min(c);
            samples += 1;
            if stop_rx.try_recv().is_ok() {
                return (min, samples);
            }
            tokio::task::yield_now().await;
        }
    });

    for polls in 0..MAX_POLLS {
        for which in 0..2 {
            let done = if which == 0 {
                poll_then_drop(lock.lock(), polls, polls).await
            } else {
                poll_then_drop(lock.try_lock_for(Duration::from_secs(5)), polls, polls)
                    .await
                    .map(|r| r.map(|g| g.expect("re-entry")))
            };
            if let Some(r) = done {
                r.unwrap().unlock().await.unwrap();
            }
            let ok = eventually(SETTLE, || async {
                let mut raw = server.conn().await;
                count_of(&mut raw, name, &me).await == 1
                    && client.stats().watched_holds == 1
                    && client.stats().tracked_holds == 1
            })
            .await;
            assert!(
                ok,
                "polls {polls} which {which}: count {} stats {:?}",
                count_of(&mut raw, name, &me).await,
                client.stats()
            );
            // Deterministic check through the gate: one more re-entry makes exactly 2.
            let g = lock.lock().await.unwrap();
            assert_eq!(lock.hold_count().await.unwrap(), 2, "polls {polls}");
            g.unlock().await.unwrap();
            assert_eq!(count_of(&mut raw, name, &me).await, 1);
        }
    }
    let _ = stop_tx.send(());
    let (min, samples) = sampler.await.unwrap();
    assert!(samples > 0);
    assert!(min >= 1, "the earlier hold vanished during the sweep");

    assert!(!first.is_lost());
    first.unlock().await.unwrap();
    assert_all_clear(&server, &client, name, "after the first guard").await;
}

/// Deterministic in-flight cancellation: the server is paused for writes, so the acquire
/// script is surely sent but not yet run when the future is dropped. When the server resumes,
/// the acquire runs and must then be undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_cancelled_while_its_script_is_in_flight_is_undone() {
    let name = "cancel:inflight";
    let (server, client, mut raw) = fixture().await;
    let lock = client.get_lock(name);
    lock.lock().await.unwrap().unlock().await.unwrap(); // load the scripts
    config_set(&mut raw, "notify-keyspace-events", "Khg").await;
    let mut events = Listener::start(&server, &format!("__keyspace@0__:{name}")).await;

    // A fresh acquire.
    pause_writes(&mut raw, 1_000).await;
    let l = lock.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = l.lock() => panic!("acquired while the server was paused"),
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    })
    .await
    .unwrap();
    assert!(!exists(&mut raw, name).await, "ran during the pause");
    // After the pause the acquire runs (hincrby), then the clean-up removes it. Wait for the
    // key's `del` itself: an `hdel` of the last field is followed by a `del` event, which
    // must not be left to arrive after the drain below and be read as the re-entry's (seen once
    // on a loaded machine against Valkey: ["del", "hincrby", ...] in the second phase).
    let mut seen = Vec::new();
    while let Some(e) = events.next(SETTLE).await {
        seen.push(e.clone());
        if e == "del" {
            break;
        }
    }
    assert!(seen.contains(&"hincrby".to_owned()), "{seen:?}");
    assert_all_clear(&server, &client, name, "fresh acquire").await;
    events.drain();

    // A re-entry: the first hold must survive, at exactly 1.
    let first = lock.lock().await.unwrap();
    pause_writes(&mut raw, 1_000).await;
    tokio::select! {
        _ = first.reenter() => panic!("re-entered while the server was paused"),
        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
    }
    let me = field(&client, first.owner());
    let mut seen = Vec::new();
    while let Some(e) = events.next(SETTLE).await {
        seen.push(e.clone());
        if e == "hset" {
            break;
        }
    }
    assert!(seen.contains(&"hincrby".to_owned()), "{seen:?}");
    assert!(!seen.contains(&"del".to_owned()), "{seen:?}");
    let ok = eventually(SETTLE, || async {
        let mut raw = server.conn().await;
        count_of(&mut raw, name, &me).await == 1
    })
    .await;
    assert!(ok, "count {}", count_of(&mut raw, name, &me).await);
    assert_eq!(client.stats().watched_holds, 1);
    assert!(!first.is_lost());
    first.unlock().await.unwrap();
    assert_all_clear(&server, &client, name, "re-entry").await;
}

/// A `guard.unlock()` future dropped at any point still releases the hold (in the
/// background), exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_dropped_at_every_poll_still_releases() {
    let name = "cancel:unlock";
    let (server, client, mut raw) = fixture().await;
    let (lock, me) = owned_lock(&client, name, 3);
    for polls in 0..MAX_POLLS {
        // Outer hold kept; the inner one's unlock is cancelled: count must go back to 1.
        let (outer, inner) = held_twice(&lock).await;
        if let Some(r) = poll_then_drop(inner.unlock(), polls, polls).await {
            r.unwrap();
        }
        let ok = eventually(SETTLE, || async {
            let mut raw = server.conn().await;
            count_of(&mut raw, name, &me).await == 1
        })
        .await;
        assert!(
            ok,
            "polls {polls}: count {}",
            count_of(&mut raw, name, &me).await
        );
        // Then the outer one's unlock is cancelled too: the lock must be gone.
        if let Some(r) = poll_then_drop(outer.unlock(), polls, polls + 1).await {
            r.unwrap();
        }
        assert_all_clear(&server, &client, name, &format!("polls {polls}")).await;
    }
}

/// A `guard.unlock()` that is cancelled while it waits for its owner's gate (another task of
/// the same owner has a script in flight) must still release the hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_cancelled_while_waiting_for_the_owner_gate_still_releases() {
    let name = "cancel:unlock-gate";
    let (server, client, mut raw) = fixture().await;
    let (lock, me) = owned_lock(&client, name, 8);
    let first = lock.lock().await.unwrap();

    pause_writes(&mut raw, 1_000).await;
    // Same owner, another task: its re-entry script waits out the pause, holding the gate.
    let l = lock.clone();
    let reentry = tokio::spawn(async move { l.lock().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::select! {
        r = first.unlock() => panic!("unlock finished during the pause: {r:?}"),
        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
    }
    let second = tokio::time::timeout(SETTLE, reentry)
        .await
        .expect("re-entry did not finish after the pause")
        .unwrap();
    assert!(!second.is_lost());
    // The cancelled unlock of `first` is completed in the background: one hold remains.
    let ok = eventually(SETTLE, || async {
        let mut raw = server.conn().await;
        count_of(&mut raw, name, &me).await == 1
    })
    .await;
    assert!(ok, "count {}", count_of(&mut raw, name, &me).await);
    second.unlock().await.unwrap();
    assert_all_clear(&server, &client, name, "after both guards").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_guard_releases_in_the_background() {
    let (server, [client, other]) = two_clients().await;
    let name = "cancel:drop-guard";
    let mut listener =
        Listener::start(&server, &format!("redisson_lock__channel:{{{name}}}")).await;
    let lock = client.get_lock(name);
    let (outer, inner) = held_twice(&lock).await;
    drop(inner);
    let ok = eventually(SETTLE, || async { lock.hold_count().await.unwrap() == 1 }).await;
    assert!(ok, "dropped inner guard not released");
    assert_eq!(client.stats().watched_holds, 1);
    drop(outer);
    assert_all_clear(&server, &client, name, "dropped guards").await;
    assert_eq!(listener.next(SETTLE).await.as_deref(), Some("0"));
    // And another client can take it at once.
    let g = other
        .get_lock(name)
        .try_lock()
        .await
        .unwrap()
        .expect("lock still held after its guards were dropped");
    g.unlock().await.unwrap();

    // A fixed-lease guard too.
    drop(lock.lock_with_lease(Duration::from_secs(30)).await.unwrap());
    assert_all_clear(&server, &client, name, "dropped fixed-lease guard").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_moved_to_another_task_unlocks_there() {
    let name = "cancel:moved";
    let (server, client, mut raw) = fixture().await;
    let lock = client.get_lock(name);
    let (outer, inner) = held_twice(&lock).await;
    let me = field(&client, outer.owner());
    // The other task is a different default owner, but the guard knows its own.
    tokio::spawn(async move { inner.unlock().await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(count_of(&mut raw, name, &me).await, 1);
    tokio::spawn(async move {
        assert!(!outer.is_lost());
        outer.unlock().await
    })
    .await
    .unwrap()
    .unwrap();
    assert!(!exists(&mut raw, name).await);
    assert_all_clear(&server, &client, name, "moved guards").await;
}

/// T14: 5,000 acquisitions that time out, are cancelled mid-flight, or succeed, from eight
/// tasks at once against held and free locks. Afterwards the client holds nothing, is
/// subscribed to nothing (locally and on the server), and has no task left over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_timeouts_and_cancellations_leave_nothing_behind() {
    let (_server, holder, mut raw, client) = fixture_with_other().await;
    let held: Vec<String> = (0..3).map(|i| format!("t14:held:{i}")).collect();
    let guards: Vec<_> = futures_held(&holder, &held).await;
    // Warm up: the subscriber connection and its task exist from the first wait on. A wait
    // whose first try outlasts its bound never subscribes (seen under load: the connection
    // then opened during the run and counted as a task left over), so wait until it is open.
    let warm = eventually(SETTLE, || async {
        assert!(client
            .get_lock(held[0].clone())
            .try_lock_for(Duration::from_millis(50))
            .await
            .unwrap()
            .is_none());
        client.stats().subscriber_connections == 1
    })
    .await;
    assert!(warm, "no subscriber connection: {:?}", client.stats());
    let quiet = subscribed(&client, 0).await;
    assert!(quiet);
    let baseline = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();

    concurrently(8, |t| {
        let (client, held) = (client.clone(), held.clone());
        async move {
            for i in 0..625usize {
                let name = &held[(t + i) % held.len()];
                match i % 3 {
                    0 => {
                        let got = client
                            .get_lock(name.clone())
                            .try_lock_for(Duration::from_millis(1))
                            .await
                            .unwrap();
                        assert!(got.is_none(), "took a held lock");
                    }
                    1 => {
                        let lock = client.get_lock(name.clone());
                        let r = tokio::time::timeout(Duration::from_millis(2), lock.lock()).await;
                        assert!(r.is_err(), "took a held lock");
                    }
                    _ => {
                        take_and_release(&client.get_lock(format!("t14:free:{t}:{}", i % 7))).await
                    }
                }
            }
        }
    })
    .await;

    // Well before the watchdog's idle sweep (every 10 s) would tidy up forgotten holds: each
    // acquisition must forget its own.
    let settled = eventually(Duration::from_secs(5), || async {
        let s = client.stats();
        s.subscribed_channels == 0 && s.tracked_holds == 0 && s.watched_holds == 0
    })
    .await;
    assert!(settled, "left behind: {:?}", client.stats());
    let tasks_back = eventually(SETTLE, || async {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
            <= baseline
    })
    .await;
    assert!(
        tasks_back,
        "{} tasks alive after the run, {baseline} before",
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    );
    for name in &held {
        // The local count drops when the last waiter goes; the UNSUBSCRIBE follows from the
        // subscriber task, so the server's count is awaited, not read once.
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let gone = eventually(SETTLE, || {
            let (mut raw, channel) = (raw.clone(), channel.clone());
            async move { numsub(&mut raw, &channel).await == 0 }
        })
        .await;
        assert!(gone, "{channel} still subscribed on the server");
        let fields: std::collections::HashMap<String, i64> = raw.hgetall(name).await.unwrap();
        assert_eq!(fields.len(), 1, "{name}: {fields:?}");
        assert_eq!(fields.values().sum::<i64>(), 1, "{name}: {fields:?}");
    }
    let free: Vec<String> = raw.keys("t14:free:*").await.unwrap();
    assert!(free.is_empty(), "free locks left held: {free:?}");
    for g in guards {
        g.unlock().await.unwrap();
    }
}

async fn futures_held(
    holder: &Client,
    names: &[String],
) -> Vec<redisson_lock::LockGuard<redisson_lock::Reentrant>> {
    let mut guards = Vec::new();
    for n in names {
        guards.push(holder.get_lock(n.clone()).lock().await.unwrap());
    }
    guards
}
