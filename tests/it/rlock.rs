//! RLock protocol conformance and behaviour, observed the way a Java Redisson client would see
//! it: through a raw connection and a SUBSCRIBE listener on the unlock channel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::redisson::channel;
use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{LockOwner, LockTtl};

/// Generous bound for anything event-driven (a wake-up, a release).
const WAIT: Duration = Duration::from_secs(10);
/// Long enough for a message that should *not* come to show up if it were sent.
const QUIET: Duration = Duration::from_millis(300);

/// Waits until some client has subscribed to `channel` (what a waiter does before parking).
async fn wait_subscribed(server: &TestServer, channel: &str) {
    let ch = channel.to_owned();
    let ok = eventually(WAIT, || {
        let ch = ch.clone();
        async move {
            let mut raw = server.conn().await;
            numsub(&mut raw, &ch).await >= 1
        }
    })
    .await;
    assert!(ok, "nobody subscribed to {channel}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_key_is_a_hash_with_one_owner_field() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("conf:layout");

    let guard = lock.lock().await.unwrap();
    assert_eq!(key_type(&mut raw, "conf:layout").await, "hash");
    let f = fields(&mut raw, "conf:layout").await;
    assert_eq!(f.len(), 1, "exactly one owner field: {f:?}");
    let (name, count) = f.iter().next().unwrap();
    assert_eq!(*count, 1);
    assert_eq!(*name, field(&client, guard.owner()));
    // `<uuid>:<id>`: a 36-char lowercase UUID, a colon, a decimal u64.
    let (uuid, id) = name.rsplit_once(':').unwrap();
    assert_eq!(uuid.len(), 36);
    assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{uuid}");
    assert_eq!(uuid, uuid.to_lowercase());
    assert!(id.parse::<u64>().is_ok(), "{id}");
    // Nothing but the lock key is left on the server.
    let keys: Vec<String> = raw.keys("*").await.unwrap();
    assert_eq!(keys, vec!["conf:layout".to_owned()]);

    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, "conf:layout").await);
    // Our unlock writes no unlock latch (Redisson's writes one and DELs it right away).
    let keys: Vec<String> = raw.keys("*").await.unwrap();
    assert_eq!(keys, Vec::<String>::new(), "keys left behind by the unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_hold_count_and_one_message_on_final_release() {
    let name = "conf:reentrant";
    let (_server, client, mut raw, mut listener) = fixture_listening(&channel(name)).await;
    let lock = client.get_lock(name);
    let me = field(&client, lock.owner());
    let count = |raw: &mut MultiplexedConnection| {
        let mut raw = raw.clone();
        let me = me.clone();
        async move {
            let c: Option<i64> = raw.hget(name, me).await.unwrap();
            c
        }
    };

    let outer = lock.lock().await.unwrap();
    assert_eq!(count(&mut raw).await, Some(1));
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    // A second `lock()` of this task is refused (nothing changes); the guard re-enters.
    assert!(lock.lock().await.unwrap_err().is_reentry());
    assert_eq!(count(&mut raw).await, Some(1));
    let inner = outer.reenter().await.unwrap();
    assert_eq!(count(&mut raw).await, Some(2));
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert_eq!(fields(&mut raw, name).await.len(), 1);

    inner.unlock().await.unwrap();
    assert_eq!(count(&mut raw).await, Some(1));
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(lock.is_held_by_current().await.unwrap());
    assert_eq!(listener.next(QUIET).await, None, "inner release published");

    outer.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    assert!(!lock.is_held_by_current().await.unwrap());
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("0"));
    assert_eq!(listener.next(QUIET).await, None, "published more than once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pttl_is_the_lease_after_each_acquire_and_inner_release() {
    let (_server, client, mut raw) = fixture().await;

    // Explicit lease: every acquire, and an inner release, sets PTTL back to the lease.
    let lease = Duration::from_secs(10);
    let lock = client.get_lock("conf:lease");
    let g1 = lock.lock_with_lease(lease).await.unwrap();
    assert_eq!(g1.lease(), Some(lease));
    let t = pttl(&mut raw, "conf:lease").await;
    assert!(t > 5_000 && t <= 10_000, "pttl {t}");
    let _: () = raw.pexpire("conf:lease", 100_000).await.unwrap();
    let g2 = g1.reenter_with_lease(lease).await.unwrap();
    let t = pttl(&mut raw, "conf:lease").await;
    assert!(t > 5_000 && t <= 10_000, "re-entry did not reset pttl: {t}");
    let _: () = raw.pexpire("conf:lease", 100_000).await.unwrap();
    g2.unlock().await.unwrap();
    let t = pttl(&mut raw, "conf:lease").await;
    assert!(
        t > 5_000 && t <= 10_000,
        "inner release did not re-apply lease: {t}"
    );
    g1.unlock().await.unwrap();
    assert!(!exists(&mut raw, "conf:lease").await);

    // Watchdog mode: the lease is the watchdog timeout (30 s by default, as in Redisson).
    let lock = client.get_lock("conf:watchdog");
    let g1 = lock.lock().await.unwrap();
    assert_eq!(g1.lease(), None);
    let t = pttl(&mut raw, "conf:watchdog").await;
    assert!(t > 20_000 && t <= 30_000, "pttl {t}");
    let _: () = raw.pexpire("conf:watchdog", 100_000).await.unwrap();
    let g2 = g1.reenter().await.unwrap();
    let t = pttl(&mut raw, "conf:watchdog").await;
    assert!(
        t > 20_000 && t <= 30_000,
        "re-entry did not reset pttl: {t}"
    );
    let _: () = raw.pexpire("conf:watchdog", 100_000).await.unwrap();
    g2.unlock().await.unwrap();
    let t = pttl(&mut raw, "conf:watchdog").await;
    assert!(
        t > 20_000 && t <= 30_000,
        "inner release did not re-apply lease: {t}"
    );
    match lock.remain_time_to_live().await.unwrap() {
        LockTtl::Expires(d) => assert!(d <= Duration::from_secs(30) && !d.is_zero()),
        other => panic!("{other:?}"),
    }
    g1.unlock().await.unwrap();
    assert_eq!(
        lock.remain_time_to_live().await.unwrap(),
        LockTtl::NotLocked
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_tag_names_use_the_redisson_channel() {
    let name = "{user1}:lock";
    let (server, client, mut raw) = fixture().await;
    let chan = "redisson_lock__channel:{user1}:lock";
    assert_eq!(channel(name), chan);
    let mut listener = Listener::start(&server, chan).await;
    let lock = client.get_lock(name);
    assert_eq!(lock.name(), name);

    let guard = lock.lock().await.unwrap();
    assert_eq!(key_type(&mut raw, name).await, "hash");
    // A waiter subscribes to exactly this channel.
    let other = client.get_lock(name).with_owner(LockOwner::new(99));
    let waiter = tokio::spawn(async move { other.lock().await.unwrap().unlock().await });
    let ok = eventually(WAIT, || async {
        let mut raw = server.conn().await;
        numsub(&mut raw, chan).await == 2 // our listener + the waiter
    })
    .await;
    assert!(ok, "waiter did not subscribe to {chan}");
    let wrong: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(wrong, vec![chan.to_owned()]);

    guard.unlock().await.unwrap();
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("0"));
    finished(waiter, WAIT, "waiter not woken").await;
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("0"));
    assert!(!exists(&mut raw, name).await);
}

/// Our unlock script is Redisson's without the unlock latch: it releases one hold, re-applies
/// the lease or deletes and publishes once, and never writes a `redisson_unlock_latch` key. Its
/// retry after a lost reply is the trim to the owner's known count, which releases nothing
/// twice and publishes nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_writes_no_latch_and_its_trim_retry_releases_nothing_twice() {
    let server = TestServer::start();
    let mut raw = server.conn().await;
    let name = "conf:latch";
    let chan = channel(name);
    let mut listener = Listener::start(&server, &chan).await;
    let owner = "9c345276-aa6e-44c1-b478-bf4b14ba1498:77";
    let _: () = raw.hset(name, owner, 2).await.unwrap();
    let _: () = raw.pexpire(name, 100_000).await.unwrap();

    let eval_conn = raw.clone();
    let eval = |script: &'static str, keys: Vec<String>, args: Vec<String>| {
        let mut raw = eval_conn.clone();
        async move {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(script).arg(keys.len()).arg(keys).arg(args);
            let v: redis::Value = cmd.query_async(&mut raw).await.unwrap();
            v
        }
    };
    let unlock = |field: &str| {
        eval(
            include_str!("../../lua/unlock.lua"),
            vec![name.to_owned(), chan.clone()],
            vec![
                "0".into(),
                "5000".into(),
                field.to_owned(),
                "PUBLISH".into(),
            ],
        )
    };
    // The engine's retry: trim.lua to the count the owner knows it has after the release.
    let retry = |target: u32| {
        eval(
            include_str!("../../lua/trim.lua"),
            vec![name.to_owned(), chan.clone(), name.to_owned()],
            vec![
                owner.to_owned(),
                target.to_string(),
                "5000".into(),
                "PUBLISH".into(),
                "0".into(),
                "plain".into(),
            ],
        )
    };
    let count = |raw: &mut MultiplexedConnection| {
        let mut raw = raw.clone();
        async move {
            let c: Option<i64> = raw.hget(name, owner).await.unwrap();
            c
        }
    };
    let latches = |raw: &mut MultiplexedConnection| {
        let mut raw = raw.clone();
        async move {
            let keys: Vec<String> = raw.keys("redisson_unlock_latch*").await.unwrap();
            keys
        }
    };

    // Inner release: 0, count 2 -> 1, lease re-applied, no latch.
    assert_eq!(unlock(owner).await, redis::Value::Int(0));
    assert_eq!(count(&mut raw).await, Some(1));
    let t = pttl(&mut raw, name).await;
    assert!(t > 0 && t <= 5_000, "pttl {t}");
    assert_eq!(latches(&mut raw).await, Vec::<String>::new());
    // Its retry finds the count already at the target: nothing moves, nothing is published.
    assert_eq!(retry(1).await, redis::Value::Int(1));
    assert_eq!(count(&mut raw).await, Some(1));
    assert_eq!(listener.next(QUIET).await, None);

    // Final release: 1, key deleted, `0` published once.
    assert_eq!(unlock(owner).await, redis::Value::Int(1));
    assert!(!exists(&mut raw, name).await);
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("0"));
    // Its retry finds nothing left and publishes nothing.
    assert_eq!(retry(0).await, redis::Value::Int(0));
    assert_eq!(listener.next(QUIET).await, None);

    // A request by someone who holds nothing: nil (Java's IllegalMonitorStateException).
    let _: () = raw.hset(name, owner, 1).await.unwrap();
    assert_eq!(unlock("other-uuid:1").await, redis::Value::Nil);
    assert_eq!(count(&mut raw).await, Some(1));
    assert_eq!(latches(&mut raw).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_holder_excludes_us_and_its_release_message_wakes_our_waiter() {
    let name = "conf:foreign";
    let (server, client, mut raw) = fixture().await;
    let foreign = JAVA_FIELD;
    // What Java's acquire script writes: one field, count 1, a long lease.
    hold_as_java(&mut raw, name, foreign).await;

    let lock = client.get_lock(name);
    let untouched = fields(&mut raw, name).await;
    assert_excluded_by_foreign(&lock).await;
    assert!(lock
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    assert_eq!(untouched, HashMap::from([(foreign.to_owned(), 1)]));
    assert!(pttl(&mut raw, name).await > 50_000);
    assert_eq!(fields(&mut raw, name).await, untouched);

    let waiter_lock = lock.clone();
    let waiter = tokio::spawn(async move {
        let g = waiter_lock.lock().await.unwrap();
        let owner = g.owner();
        g.detach();
        (Instant::now(), owner)
    });
    wait_subscribed(&server, &channel(name)).await;
    tokio::time::sleep(QUIET).await;
    assert!(!waiter.is_finished(), "waiter got a lock held by Java");

    // Java releases: DEL + PUBLISH 0. Only the message can wake the waiter (PTTL is ~60 s).
    let released = Instant::now();
    let _: () = raw.del(name).await.unwrap();
    let _: () = raw.publish(channel(name), "0").await.unwrap();
    let (acquired, owner) = tokio::time::timeout(WAIT, waiter)
        .await
        .expect("waiter not woken by the unlock message")
        .unwrap();
    assert!(acquired.duration_since(released) < Duration::from_secs(30));
    let mine = field(&client, owner);
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(mine.clone(), 1)])
    );
    let t = pttl(&mut raw, name).await;
    assert!(t > 20_000 && t <= 30_000, "pttl {t}");
    // Java now sees our hold: its acquire script (Redisson's, not ours) gets our PTTL back.
    let java_try: Option<i64> = redis::Script::new(crate::support::redisson::ACQUIRE)
        .key(name)
        .arg(30_000)
        .arg(foreign)
        .invoke_async::<redis::Value>(&mut raw)
        .await
        .map(|v| match v {
            redis::Value::Int(t) => Some(t),
            _ => None,
        })
        .unwrap();
    assert!(java_try.is_some_and(|t| t > 0), "{java_try:?}");
    lock.with_owner(owner).unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_owner_unlock_is_rejected_and_changes_nothing() {
    let name = "conf:notowner";
    let (_server, client, mut raw, other_client) = fixture_with_other().await;
    let lock = client.get_lock(name);
    let (g1, g2) = held_twice(&lock).await;
    let _: () = raw.pexpire(name, 100_000).await.unwrap();
    let before = fields(&mut raw, name).await;
    assert_eq!(before.values().copied().collect::<Vec<_>>(), vec![2]);

    // Another task (a different default owner) of the same client.
    let l = lock.clone();
    let err = tokio::spawn(async move { l.unlock().await })
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.is_not_owner(), "{err:?}");
    assert!(err.to_string().contains(name), "{err}");
    // An explicit owner of the same client.
    let err = lock
        .with_owner(LockOwner::new(12345))
        .unlock()
        .await
        .unwrap_err();
    assert!(err.is_not_owner(), "{err:?}");
    // The same owner id in another client is a different owner.
    let err = other_client
        .get_lock(name)
        .with_owner(lock.owner())
        .unlock()
        .await
        .unwrap_err();
    assert!(err.is_not_owner(), "{err:?}");

    assert_eq!(fields(&mut raw, name).await, before);
    assert!(
        pttl(&mut raw, name).await > 50_000,
        "non-owner re-applied a lease"
    );
    let l = lock.clone();
    let held_elsewhere = tokio::spawn(async move { l.is_held_by_current().await.unwrap() })
        .await
        .unwrap();
    assert!(!held_elsewhere);
    assert!(lock.is_held_by(g1.owner()).await.unwrap());
    assert!(!other_client
        .get_lock(name)
        .is_held_by(g1.owner())
        .await
        .unwrap());

    // The real owner's guards still work.
    g2.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_lease_hands_over_to_a_waiter() {
    let name = "conf:expire";
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock(name);
    let lease = Duration::from_millis(500);
    let taken = Instant::now();
    let holder = lock.lock_with_lease(lease).await.unwrap();
    assert!(!holder.is_lost());

    let l = lock.clone();
    let waiter = tokio::spawn(async move { l.lock().await.unwrap() });
    // Nobody releases: the waiter's wait is bounded by the holder's TTL, since expiry
    // publishes nothing. T4: the hand-over comes right after the lease, not after some
    // unrelated timeout (the bound is generous for a loaded machine, but far below what a wait
    // that ignored the TTL, or overslept it, would take).
    let handover = lease + Duration::from_millis(1_500);
    let next = tokio::time::timeout(handover, waiter)
        .await
        .expect("waiter did not take over an expired lease within lease + 1.5 s")
        .unwrap();
    assert!(
        taken.elapsed() >= lease,
        "taken over before the lease ran out"
    );
    assert_ne!(next.owner(), holder.owner());
    assert!(holder.is_lost());
    tokio::time::timeout(WAIT, holder.lost())
        .await
        .expect("lost() of an expired fixed lease");
    let next_field = field(&client, next.owner());
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(next_field.clone(), 1)])
    );

    // The old holder's release must not touch the new hold.
    let err = holder.unlock().await.unwrap_err();
    assert!(err.is_lease_lost(), "{err:?}");
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(next_field, 1)])
    );
    next.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_the_lock_alive_and_stops_after_unlock() {
    let lease = Duration::from_millis(1_500);
    let (_server, client, mut raw) = fixture_with(|c| c.with_watchdog_timeout(lease)).await;
    let name = "conf:watchdog";
    let lock = client.get_lock(name);
    assert_eq!(client.stats().watched_holds, 0);
    let guard = lock.lock().await.unwrap();
    assert_eq!(client.stats().watched_holds, 1);
    let t = pttl(&mut raw, name).await;
    assert!(t > 0 && t <= 1_500, "pttl {t}");

    // Hold for several leases; the key must never disappear.
    let started = Instant::now();
    while started.elapsed() < lease * 3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            exists(&mut raw, name).await,
            "lock expired under the watchdog after {:?}",
            started.elapsed()
        );
    }
    let t = pttl(&mut raw, name).await;
    assert!(t > 0 && t <= 1_500, "pttl {t}");
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(!guard.is_lost());

    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
    assert_eq!(client.stats().watched_holds, 0);
    // The watchdog never brings a released lock back.
    tokio::time::sleep(lease / 2).await;
    assert!(!exists(&mut raw, name).await);
    assert_eq!(client.stats().watched_holds, 0);
}

/// Every client gets a working watchdog (its renewal task must not quit at start-up), so a
/// watchdog-mode lock outlives several leases in each of many clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_renews_its_watchdog_holds() {
    const CLIENTS: usize = 32;
    let server = TestServer::start();
    let lease = Duration::from_millis(1_500);
    let mut raw = server.conn().await;
    let mut held = Vec::new();
    for i in 0..CLIENTS {
        let client = server.client_with(|c| c.with_watchdog_timeout(lease)).await;
        let guard = client
            .get_lock(format!("conf:wd:{i}"))
            .lock()
            .await
            .unwrap();
        held.push((client, guard));
    }
    let started = Instant::now();
    while started.elapsed() < lease * 3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        for i in 0..CLIENTS {
            let name = format!("conf:wd:{i}");
            assert!(
                exists(&mut raw, &name).await,
                "client {i}: lock expired under the watchdog after {:?}",
                started.elapsed()
            );
        }
    }
    for (client, guard) in held {
        assert!(!guard.is_lost());
        guard.unlock().await.unwrap();
        assert_eq!(client.stats().watched_holds, 0);
    }
    let keys: Vec<String> = raw.keys("conf:wd:*").await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_key_under_a_watchdog_hold_reports_it_lost() {
    let (_server, client, mut raw) =
        fixture_with(|c| c.with_watchdog_timeout(Duration::from_secs(1))).await;
    let name = "conf:lost";
    let lock = client.get_lock(name);
    let guard = lock.lock().await.unwrap();
    assert!(!guard.is_lost());
    let _: () = raw.del(name).await.unwrap();

    tokio::time::timeout(WAIT, guard.lost())
        .await
        .expect("lost() did not resolve after the key was deleted");
    assert!(guard.is_lost());
    assert!(
        eventually(WAIT, || async { client.stats().watched_holds == 0 }).await,
        "watchdog still renews a lost hold"
    );
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lease_lost(), "{err:?}");
    assert!(err.to_string().contains(name));
    assert!(!exists(&mut raw, name).await, "renewal recreated the key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_deletes_publishes_and_loses_the_guard() {
    let name = "conf:force";
    let (server, client, mut raw, mut listener) = fixture_listening(&channel(name)).await;
    let other = server.client().await;
    let guard = client.get_lock(name).lock().await.unwrap();
    assert!(other.get_lock(name).force_unlock().await.unwrap());
    assert!(!exists(&mut raw, name).await);
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("0"));
    assert!(!other.get_lock(name).force_unlock().await.unwrap());
    assert_eq!(listener.next(QUIET).await, None);
    client.renew_now().await;
    assert!(guard.is_lost());
    assert!(guard.unlock().await.unwrap_err().is_lease_lost());
    assert_eq!(listener.next(QUIET).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_owner_is_shared_across_tasks() {
    let name = "conf:shared-owner";
    let (_server, client, mut raw) = fixture().await;
    let owner = LockOwner::new(7);
    let lock = client.get_lock(name).with_owner(owner);
    assert_eq!(lock.owner(), owner);

    let g1 = lock.lock().await.unwrap();
    assert_eq!(g1.owner(), owner);
    let l = lock.clone();
    let g2 = tokio::spawn(async move { l.lock().await.unwrap() })
        .await
        .unwrap();
    assert_eq!(g2.owner(), owner);
    let expected = format!("{}:7", client.id());
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(expected.clone(), 2)])
    );
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    // A default-owner task of the same client is somebody else.
    let plain = client.get_lock(name);
    let other = tokio::spawn(async move { plain.try_lock().await.unwrap().is_none() })
        .await
        .unwrap();
    assert!(other, "a different owner entered a held lock");

    // Release from yet another task, through the guard.
    tokio::spawn(async move { g2.unlock().await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fields(&mut raw, name).await, HashMap::from([(expected, 1)]));
    g1.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_from_a_lost_epoch_cannot_release_a_later_hold() {
    let name = "conf:epoch";
    let (_server, client, mut raw) = fixture().await;
    let (lock, me) = owned_lock(&client, name, 5);

    // Two holds (watchdog and fixed lease), then the key vanishes behind our back.
    let old_a = lock.lock().await.unwrap();
    let old_b = lock.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    let _: () = raw.del(name).await.unwrap();
    let new = lock.lock().await.unwrap();
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(me.clone(), 1)])
    );
    assert!(old_a.is_lost());
    assert!(old_b.is_lost());
    assert!(!new.is_lost());

    assert!(old_a.unlock().await.unwrap_err().is_lease_lost());
    assert!(old_b.unlock().await.unwrap_err().is_lease_lost());
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(me.clone(), 1)])
    );
    assert_eq!(client.stats().watched_holds, 1);

    // Also for a guard whose loss the client has not noticed yet when it is dropped.
    let _: () = raw.del(name).await.unwrap();
    let newer = lock.lock().await.unwrap();
    drop(new);
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        fields(&mut raw, name).await,
        HashMap::from([(me.clone(), 1)])
    );
    newer.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
    assert_eq!(client.stats().watched_holds, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_across_clients_and_tasks() {
    const CLIENTS: usize = 2;
    const TASKS: usize = 8;
    const ROUNDS: usize = 20;
    let server = TestServer::start();
    let counter = "conf:mx:counter";
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = server.client().await;
        for _ in 0..TASKS {
            let lock = client.get_lock("conf:mx");
            let mut conn = server.conn().await;
            let inside = inside.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = lock.lock().await.unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    // A non-atomic read-modify-write: only the lock keeps it exact.
                    let v: Option<i64> = conn.get(counter).await.unwrap();
                    tokio::task::yield_now().await;
                    let _: () = conn.set(counter, v.unwrap_or(0) + 1).await.unwrap();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                }
            }));
        }
    }
    let all = futures_util::future::join_all(tasks);
    let results = tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("mutual exclusion run stalled");
    for r in results {
        r.unwrap();
    }
    let mut raw = server.conn().await;
    let total: i64 = raw.get(counter).await.unwrap();
    assert_eq!(total, (CLIENTS * TASKS * ROUNDS) as i64);
    assert!(!exists(&mut raw, "conf:mx").await);
}

/// A waiter parked on a watchdog-leased lock (30 s) is woken by the holder's release, whether
/// the holder is in the same client (local hand-off) or in another one (pub/sub).
async fn waiter_wakes_on_release(same_client: bool) {
    let (server, client) = with_client().await;
    let holder_client = if same_client {
        client.clone()
    } else {
        server.client().await
    };
    let mut raw = server.conn().await;
    let name = "conf:handoff";
    let held = holder_client.get_lock(name).lock().await.unwrap();

    let waiter = spawn_keeping_waiter(client.get_lock(name));
    wait_subscribed(&server, &channel(name)).await;
    tokio::time::sleep(QUIET).await;
    assert!(!waiter.is_finished());
    assert_eq!(client.stats().subscribed_channels, 1);

    held.unlock().await.unwrap();
    // The holder's PTTL was ~30 s: only the release can have woken the waiter this soon.
    let owner = tokio::time::timeout(WAIT, waiter)
        .await
        .expect("waiter not woken by the release")
        .unwrap();
    let holds = fields(&mut raw, name).await;
    assert!(
        subscribed(&client, 0).await,
        "waiter's subscription not released"
    );
    assert!(
        subscribers_within(&server, &channel(name), 0, WAIT).await,
        "UNSUBSCRIBE not sent"
    );
    assert_eq!(holds, HashMap::from([(field(&client, owner), 1)]));
    release_sole_hold(&mut raw, &client, name, owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_wakes_when_the_same_client_releases() {
    waiter_wakes_on_release(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_wakes_when_another_client_releases() {
    waiter_wakes_on_release(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_for_gives_up_after_its_wait() {
    let (_server, [client, other]) = two_clients().await;
    let name = "conf:trylock";
    let held = other.get_lock(name).lock().await.unwrap();
    let lock = client.get_lock(name);
    let wait = Duration::from_millis(400);
    let started = Instant::now();
    let r = lock.try_lock_for(wait).await.unwrap();
    assert!(r.is_none());
    assert!(
        started.elapsed() >= wait,
        "gave up early: {:?}",
        started.elapsed()
    );
    assert_eq!(client.stats().watched_holds, 0);
    assert!(
        subscribed(&client, 0).await,
        "subscription kept after try_lock_for gave up"
    );
    // A fixed lease through try_lock_with_lease once it is free.
    held.unlock().await.unwrap();
    let g = lock
        .try_lock_with_lease(WAIT, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("free lock not taken");
    assert_eq!(g.lease(), Some(Duration::from_secs(10)));
    assert_eq!(
        client.stats().watched_holds,
        0,
        "a fixed lease is not watched"
    );
    g.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}
