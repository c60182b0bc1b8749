//! Area 2 of issue 31: a derived kind keeps every rule of its base.
//!
//! The kind-generic behaviours are written once, as generic functions over `Lock<K>` and a
//! [`Kind`] description of what a kind's data look like on the server, and run for every kind
//! that has them (the [`matrix!`] below makes one test per behaviour and kind):
//!
//! * every kind (reentrant, fair, non-reentrant, non-reentrant fair, fenced, spin, the write
//!   side of the read-write lock): the acquire's data on the server (hash field
//!   `<uuid>:<id>`, count, PTTL = the lease, fixed or the watchdog's) and the release's; a fixed
//!   lease that ends on time (never renewed); a watchdog lease renewed past the lease; a foreign
//!   unlock refused with nothing changed; `force_unlock` waking a waiter; a dropped acquire
//!   (parked, or with its script in flight) leaving nothing behind;
//! * the kinds whose waiters wait on pub/sub (all but spin): a waiter parks on the kind's
//!   Redisson channel (checked on the server) and is woken by another client's release, whose
//!   message is seen on that channel;
//! * the fair kinds (fair, non-reentrant fair): waiters that time out or are cancelled leave
//!   the queue (`redisson_lock_queue:{name}`, `redisson_lock_timeout:{name}`), a release wakes
//!   the head and only the head, and with Java Redisson: a Java waiter at the head is woken by
//!   our release, and a dead one (its JVM killed while queued) is evicted at its deadline so
//!   that the waiter behind it gets the lock.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{
    Client, Fair, Fenced, Lock, LockError, LockGuard, LockKind, LockOwner, NonReentrant,
    NonReentrantFair, Reentrant, Spin, Write,
};
use tokio::task::JoinHandle;

use crate::java::{peers, JavaPeer};
use crate::support::redisson::{calls, queue_key, reset_stats, tagged, timeout_key};
use crate::support::*;

/// Generous bound for anything event-driven (a woken waiter, a cleaned-up key).
const WITHIN: Duration = Duration::from_secs(20);
/// A holder's lease when a waiter must be woken by a message: far beyond [`WITHIN`].
const LONG_LEASE: Duration = Duration::from_secs(60);

/// What a lock kind looks like on the server, and how to get one.
struct Kind<K: LockKind> {
    label: &'static str,
    make: fn(&Client, &str) -> Lock<K>,
    /// Appended to `<uuid>:<id>` in the hash (`:write` for the write side).
    suffix: &'static str,
    /// The hash's `mode` field (the write side's `write`).
    mode: Option<&'static str>,
    /// The unlock channel's prefix (`redisson_lock__channel`, `redisson_rwlock`).
    channel_prefix: &'static str,
    /// The release's message: Redisson's `UNLOCK_MESSAGE` `0`, or `READ_UNLOCK_MESSAGE` `1`
    /// for the write side (it wakes every waiting reader).
    message: &'static str,
    /// Waiters queue (`redisson_lock_queue:{name}`) and wait on their own channel.
    fair: bool,
    /// Waiters wait on pub/sub (all but spin).
    pubsub: bool,
    /// Acquisitions take a token from `redisson_lock_token:{name}`.
    token: bool,
    /// The Java peer's name for the kind, when the matrix runs it against Java.
    java: Option<&'static str>,
}

impl<K: LockKind> Kind<K> {
    /// `owner` of `client`'s lock `name`, and the hash field it writes.
    fn owned(&self, client: &Client, name: &str, owner: u64) -> (Lock<K>, String) {
        let owner = LockOwner::new(owner);
        let lock = (self.make)(client, name).with_owner(owner);
        (lock, format!("{}{}", field(client, owner), self.suffix))
    }

    /// The kind's unlock channel for `name`.
    fn channel(&self, name: &str) -> String {
        format!("{}:{}", self.channel_prefix, tagged(name))
    }

    /// The channel a waiter with hash field `field` waits on.
    fn wait_channel(&self, name: &str, field: &str) -> String {
        if self.fair {
            format!("{}:{field}", self.channel(name))
        } else {
            self.channel(name)
        }
    }

    /// The whole hash when `field` holds `name` `count` times.
    fn hash(&self, field: &str, count: i64) -> HashMap<String, String> {
        let mut h = HashMap::from([(field.to_owned(), count.to_string())]);
        if let Some(mode) = self.mode {
            h.insert("mode".to_owned(), mode.to_owned());
        }
        h
    }

    /// The token counter's key.
    fn counter(name: &str) -> String {
        format!("redisson_lock_token:{}", tagged(name))
    }

    /// Keys that outlive every hold (the fenced kind's counter).
    fn lasting(&self, name: &str) -> Vec<String> {
        if self.token {
            vec![Self::counter(name)]
        } else {
            Vec::new()
        }
    }
}

fn reentrant() -> Kind<Reentrant> {
    Kind {
        label: "reentrant",
        make: |c, n| c.get_lock(n),
        suffix: "",
        mode: None,
        channel_prefix: "redisson_lock__channel",
        message: "0",
        fair: false,
        pubsub: true,
        token: false,
        java: None,
    }
}

fn fair() -> Kind<Fair> {
    Kind {
        label: "fair",
        make: |c, n| c.get_fair_lock(n),
        fair: true,
        java: Some("fair"),
        ..retype(reentrant())
    }
}

fn non_reentrant() -> Kind<NonReentrant> {
    Kind {
        label: "non_reentrant",
        make: |c, n| c.get_non_reentrant_lock(n),
        ..retype(reentrant())
    }
}

fn non_reentrant_fair() -> Kind<NonReentrantFair> {
    Kind {
        label: "non_reentrant_fair",
        make: |c, n| c.get_non_reentrant_fair_lock(n),
        java: Some("nrfair"),
        ..retype(fair())
    }
}

fn fenced() -> Kind<Fenced> {
    Kind {
        label: "fenced",
        make: |c, n| c.get_fenced_lock(n),
        token: true,
        ..retype(reentrant())
    }
}

fn spin() -> Kind<Spin> {
    Kind {
        label: "spin",
        make: |c, n| c.get_spin_lock(n),
        pubsub: false,
        ..retype(reentrant())
    }
}

fn write() -> Kind<Write> {
    Kind {
        label: "write",
        make: |c, n| c.get_read_write_lock(n).write_lock(),
        suffix: ":write",
        mode: Some("write"),
        channel_prefix: "redisson_rwlock",
        message: "1",
        ..retype(reentrant())
    }
}

/// `k`'s description for another lock type (its `make` must be replaced).
fn retype<A: LockKind, B: LockKind>(k: Kind<A>) -> Kind<B> {
    Kind {
        label: k.label,
        make: |_, _| unreachable!("retyped kind: set `make`"),
        suffix: k.suffix,
        mode: k.mode,
        channel_prefix: k.channel_prefix,
        message: k.message,
        fair: k.fair,
        pubsub: k.pubsub,
        token: k.token,
        java: k.java,
    }
}

// ---- probes ----

async fn hash(raw: &mut MultiplexedConnection, name: &str) -> HashMap<String, String> {
    raw.hgetall(name).await.unwrap()
}

async fn queue(raw: &mut MultiplexedConnection, name: &str) -> Vec<String> {
    raw.lrange(queue_key(name), 0, -1).await.unwrap()
}

async fn deadlines(raw: &mut MultiplexedConnection, name: &str) -> Vec<String> {
    raw.zrange(timeout_key(name), 0, -1).await.unwrap()
}

/// Waits until the fair queue of `name` is `expected` (head first) and its deadlines are
/// exactly the queued fields (a waiter that left must leave both).
async fn queue_is(raw: &MultiplexedConnection, name: &str, expected: &[&str], what: &str) {
    let want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    let mut sorted = want.clone();
    sorted.sort();
    let ok = eventually(WITHIN, || async {
        let mut raw = raw.clone();
        let mut d = deadlines(&mut raw, name).await;
        d.sort();
        queue(&mut raw, name).await == want && d == sorted
    })
    .await;
    let mut raw = raw.clone();
    assert!(
        ok,
        "{what}: queue {:?}, deadlines {:?}; expected {want:?}",
        queue(&mut raw, name).await,
        deadlines(&mut raw, name).await
    );
}

/// Lock scripts the server ran since the last `CONFIG RESETSTAT`.
async fn scripts(server: &TestServer) -> u64 {
    calls(server, "evalsha").await + calls(server, "eval").await
}

/// Waits until a waiter with hash field `wf` of lock `name` is parked: subscribed to its
/// channel (`subscribers` in all on it), queued too for a fair kind; a spin waiter has polled
/// twice since the stats were reset.
async fn parked<K: LockKind>(
    k: &Kind<K>,
    server: &TestServer,
    name: &str,
    wf: &str,
    subscribers: i64,
) {
    let what = format!("{}: waiter {wf}", k.label);
    if k.fair {
        let ok = eventually(WITHIN, || async {
            queue(&mut server.conn().await, name)
                .await
                .iter()
                .any(|q| q == wf)
        })
        .await;
        assert!(ok, "{what} never queued");
    }
    if k.pubsub {
        let channel = k.wait_channel(name, wf);
        assert!(
            channel_subscribers(server, &channel, subscribers).await,
            "{what} never parked on {channel} ({} subscribers)",
            numsub_on(server, &channel).await
        );
    } else {
        let ok = eventually(WITHIN, || async { scripts(server).await >= 2 }).await;
        assert!(ok, "{what} never polled");
    }
}

/// Waits until only `keys` are left on the server.
async fn only_left(server: &TestServer, keys: &[String], what: &str) {
    let mut want = keys.to_vec();
    want.sort();
    let all = || async {
        let mut all: Vec<String> = server.conn().await.keys("*").await.unwrap();
        all.sort();
        all
    };
    let ok = eventually(WITHIN, || async { all().await == want }).await;
    assert!(ok, "{what}: keys {:?} left, expected {want:?}", all().await);
}

type Waiting<K> = JoinHandle<Result<Option<LockGuard<K>>, LockError>>;

/// A task waiting up to `wait` for `lock`.
fn waiter<K: LockKind>(lock: Lock<K>, wait: Duration) -> Waiting<K> {
    tokio::spawn(async move { lock.try_lock_for(wait).await })
}

/// The waiter's hold, which it must get within `within`.
async fn got<K: LockKind>(w: Waiting<K>, within: Duration, what: &str) -> LockGuard<K> {
    tokio::time::timeout(within, w)
        .await
        .unwrap_or_else(|_| panic!("{what}: the waiter was not woken"))
        .unwrap()
        .unwrap()
        .unwrap_or_else(|| panic!("{what}: the waiter timed out"))
}

// ---- behaviours of every kind ----

/// The acquire writes the kind's hash (field `<uuid>:<id>`, count 1) with PTTL = the lease:
/// the fixed lease asked for, or the watchdog's; the release deletes it. Bugs: a derived
/// kind's acquire that sets no PTTL, or the wrong one (the default watchdog lease instead of
/// the configured one, or the watchdog's instead of the fixed lease).
async fn acquire_and_release_data<K: LockKind>(k: Kind<K>) {
    let watchdog = Duration::from_secs(9);
    let (server, client, mut raw) = fixture_with(|c| c.with_watchdog_timeout(watchdog)).await;
    let name = format!("km:data:{}", k.label);
    let (lock, f) = k.owned(&client, &name, 1);
    let what = k.label;

    let fixed = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    assert_eq!(hash(&mut raw, &name).await, k.hash(&f, 1), "{what}");
    let ttl = pttl(&mut raw, &name).await;
    assert!(
        (15_000..=20_000).contains(&ttl),
        "{what}: fixed lease 20 s, PTTL {ttl}"
    );
    if k.token {
        assert_eq!(
            get_str(&mut raw, &Kind::<K>::counter(&name))
                .await
                .as_deref(),
            Some("1")
        );
    }
    if k.fair {
        assert!(
            !exists(&mut raw, &queue_key(&name)).await,
            "{what}: queued a free acquire"
        );
        assert!(!exists(&mut raw, &timeout_key(&name)).await, "{what}");
    }
    assert_eq!(lock.hold_count().await.unwrap(), 1, "{what}");
    fixed.unlock().await.unwrap();
    assert!(
        !exists(&mut raw, &name).await,
        "{what}: the release left the key"
    );

    let watched = lock.lock().await.unwrap();
    assert_eq!(hash(&mut raw, &name).await, k.hash(&f, 1), "{what}");
    let ttl = pttl(&mut raw, &name).await;
    assert!(
        ttl > 0 && ttl <= watchdog.as_millis() as i64,
        "{what}: watchdog lease {watchdog:?}, PTTL {ttl}"
    );
    assert_eq!(client.stats().watched_holds, 1, "{what}: not watched");
    watched.unlock().await.unwrap();
    assert!(!exists(&mut raw, &name).await, "{what}");
    assert_eq!(client.stats().watched_holds, 0, "{what}");
    only_left(&server, &k.lasting(&name), what).await;
}

/// A fixed lease is never renewed: the key's PTTL never goes above it, and the key goes when it
/// ends; the lock is then free for another client. Bug: the watchdog renewing a fixed lease.
async fn fixed_lease_ends_on_time<K: LockKind>(k: Kind<K>) {
    let lease = Duration::from_millis(1500);
    let (server, client, mut raw) =
        fixture_with(|c| c.with_watchdog_timeout(Duration::from_secs(3))).await;
    let other = server.client().await;
    let name = format!("km:fixed:{}", k.label);
    let (lock, _) = k.owned(&client, &name, 1);
    let what = k.label;
    let guard = lock.lock_with_lease(lease).await.unwrap();
    let highest = std::cell::Cell::new(0);
    let gone = eventually(WITHIN, || async {
        let ttl = pttl(&mut raw.clone(), &name).await;
        highest.set(highest.get().max(ttl));
        ttl == -2
    })
    .await;
    assert!(gone, "{what}: a fixed lease of {lease:?} never ended");
    let highest = highest.get();
    assert!(
        highest <= lease.as_millis() as i64,
        "{what}: the fixed lease went up to {highest} ms"
    );
    assert!(guard.is_lost(), "{what}: the guard outlived its lease");
    let (theirs, tf) = k.owned(&other, &name, 2);
    let taken = theirs
        .try_lock()
        .await
        .unwrap()
        .expect("free after the lease");
    assert!(lock.unlock().await.unwrap_err().is_not_owner(), "{what}");
    drop(guard);
    assert_eq!(hash(&mut raw, &name).await, k.hash(&tf, 1), "{what}");
    taken.unlock().await.unwrap();
}

/// A watchdog lease is renewed past its end (the key keeps its field, the PTTL goes up again
/// and never above the lease) until the release. Bug: a derived kind whose holds the watchdog
/// does not renew.
async fn watchdog_renews_past_the_lease<K: LockKind>(k: Kind<K>) {
    let lease = Duration::from_secs(3);
    let (server, client, mut raw) = fixture_with(|c| c.with_watchdog_timeout(lease)).await;
    let name = format!("km:watchdog:{}", k.label);
    let (lock, f) = k.owned(&client, &name, 1);
    let what = k.label;
    let guard = lock.lock().await.unwrap();
    let taken = Instant::now();
    let mut last = pttl(&mut raw, &name).await;
    let mut renewed = 0;
    // Past the lease and then some: every look must find the hold, with a TTL within the lease.
    while taken.elapsed() < lease + lease / 2 || renewed < 2 {
        assert!(taken.elapsed() < WITHIN, "{what}: {renewed} renewals seen");
        assert_eq!(
            hash(&mut raw, &name).await,
            k.hash(&f, 1),
            "{what}: hold gone"
        );
        let ttl = pttl(&mut raw, &name).await;
        assert!(
            ttl > 0 && ttl <= lease.as_millis() as i64,
            "{what}: PTTL {ttl} under a {lease:?} watchdog lease"
        );
        if ttl > last {
            renewed += 1;
        }
        last = ttl;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!guard.is_lost(), "{what}");
    guard.unlock().await.unwrap();
    only_left(&server, &k.lasting(&name), what).await;
}

/// Another client's unlock, and another owner's of the same client, are refused as not-owner
/// and change nothing (the hash and its lease); the holder still releases normally.
async fn foreign_unlock_is_refused<K: LockKind>(k: Kind<K>) {
    let (server, client, mut raw, other) = fixture_with_other().await;
    let name = format!("km:foreign:{}", k.label);
    let (lock, f) = k.owned(&client, &name, 1);
    let what = k.label;
    let guard = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    let before = pttl(&mut raw, &name).await;
    let (theirs, _) = k.owned(&other, &name, 1);
    let (mine, _) = k.owned(&client, &name, 2);
    for (who, l) in [("other client", &theirs), ("other owner", &mine)] {
        let e = l.unlock().await.unwrap_err();
        assert!(e.is_not_owner(), "{what}: {who}: {e:?}");
        assert_eq!(hash(&mut raw, &name).await, k.hash(&f, 1), "{what}: {who}");
        let ttl = pttl(&mut raw, &name).await;
        assert!(
            ttl > 0 && ttl <= before,
            "{what}: {who}: PTTL {before} -> {ttl}"
        );
        assert!(!l.is_held_by_current().await.unwrap(), "{what}: {who}");
    }
    assert!(lock.is_held_by_current().await.unwrap(), "{what}");
    guard.unlock().await.unwrap();
    only_left(&server, &k.lasting(&name), what).await;
}

/// `force_unlock` from a third client deletes the hold and wakes a parked waiter, which gets the
/// lock long before the holder's lease would have ended; the holder's guard is lost.
async fn force_unlock_wakes_a_waiter<K: LockKind>(k: Kind<K>) {
    let (server, [holder, waiting]) = two_clients().await;
    let third = server.client().await;
    let mut raw = server.conn().await;
    let name = format!("km:force:{}", k.label);
    let what = k.label;
    let (lock, _) = k.owned(&holder, &name, 1);
    let guard = lock.lock_with_lease(LONG_LEASE).await.unwrap();
    let (wl, wf) = k.owned(&waiting, &name, 2);
    reset_stats(&server).await;
    let w = waiter(wl, LONG_LEASE);
    parked(&k, &server, &name, &wf, 1).await;
    let (forcing, _) = k.owned(&third, &name, 3);
    assert!(
        forcing.force_unlock().await.unwrap(),
        "{what}: nothing to delete"
    );
    let g = got(w, WITHIN, what).await;
    assert_eq!(hash(&mut raw, &name).await, k.hash(&wf, 1), "{what}");
    assert!(guard.unlock().await.unwrap_err().is_lease_lost(), "{what}");
    assert_eq!(hash(&mut raw, &name).await, k.hash(&wf, 1), "{what}");
    g.unlock().await.unwrap();
    only_left(&server, &k.lasting(&name), what).await;
}

/// A dropped acquire leaves nothing behind: one parked behind a holder (no subscription, no
/// queue entry, no tracked hold), and one whose script was in flight when it was dropped (the
/// hold it took is trimmed back, not renewed).
async fn dropped_acquire_leaves_nothing<K: LockKind>(k: Kind<K>) {
    let (server, [holder, waiting]) = two_clients().await;
    let mut raw = server.conn().await;
    let name = format!("km:drop:{}", k.label);
    let what = k.label;
    let (lock, _) = k.owned(&holder, &name, 1);
    let guard = lock.lock_with_lease(LONG_LEASE).await.unwrap();
    let (wl, wf) = k.owned(&waiting, &name, 2);
    reset_stats(&server).await;
    let w = tokio::spawn({
        let wl = wl.clone();
        async move { wl.lock().await }
    });
    parked(&k, &server, &name, &wf, 1).await;
    w.abort();
    assert!(w.await.unwrap_err().is_cancelled(), "{what}");
    if k.pubsub {
        let channel = k.wait_channel(&name, &wf);
        assert!(
            channel_subscribers(&server, &channel, 0).await,
            "{what}: left on {channel}"
        );
    }
    if k.fair {
        queue_is(&raw, &name, &[], what).await;
    }
    assert_no_tracked_holds(&waiting, WITHIN).await;
    guard.unlock().await.unwrap();
    only_left(&server, &k.lasting(&name), what).await;

    // Dropped while its script waits on the paused server: it takes the free lock when the
    // pause ends, and that hold must be given back.
    pause_writes(&mut raw, 3000).await;
    let w = tokio::spawn(async move { wl.lock().await });
    assert!(
        script_parked(&server).await,
        "{what}: the acquire was never sent"
    );
    w.abort();
    assert!(w.await.unwrap_err().is_cancelled(), "{what}");
    assert!(writes_resumed(&server, WITHIN).await);
    let _: () = raw.del("probe:after-pause").await.unwrap();
    assert_no_tracked_holds(&waiting, WITHIN).await;
    assert_eq!(waiting.stats().watched_holds, 0, "{what}");
    only_left(&server, &k.lasting(&name), what).await;
    free_now(&lock).await;
}

// ---- pub/sub kinds ----

/// A waiter of another client parks on the kind's Redisson channel (seen on the server), and
/// the holder's release publishes the unlock message there (seen by a raw subscriber) and wakes
/// it long before the holder's lease would end. Bugs: a derived kind waiting on the wrong
/// channel; a derived kind's release that publishes nothing (or elsewhere).
async fn release_wakes_another_clients_waiter<K: LockKind>(k: Kind<K>) {
    let (server, [holder, waiting]) = two_clients().await;
    let mut raw = server.conn().await;
    let name = format!("km:wake:{}", k.label);
    let what = k.label;
    let (lock, _) = k.owned(&holder, &name, 1);
    let guard = lock.lock_with_lease(LONG_LEASE).await.unwrap();
    let (wl, wf) = k.owned(&waiting, &name, 2);
    let channel = k.wait_channel(&name, &wf);
    let mut listener = Listener::start(&server, &channel).await;
    assert!(channel_subscribers(&server, &channel, 1).await);
    let w = waiter(wl, LONG_LEASE);
    parked(&k, &server, &name, &wf, 2).await;
    guard.unlock().await.unwrap();
    assert_eq!(
        listener.next(WITHIN).await.as_deref(),
        Some(k.message),
        "{what}: no unlock message on {channel}"
    );
    let g = got(w, WITHIN, what).await;
    assert_eq!(hash(&mut raw, &name).await, k.hash(&wf, 1), "{what}");
    assert!(
        channel_subscribers(&server, &channel, 1).await,
        "{what}: still subscribed"
    );
    g.unlock().await.unwrap();
    only_left(&server, &k.lasting(&name), what).await;
}

// ---- fair kinds ----

/// Waiters that time out, or are cancelled, leave the queue and the deadlines at once, so the
/// release goes to the waiter behind them without waiting out their deadlines (minutes away).
/// Bug: a derived fair kind whose ended wait does not leave the queue.
async fn ended_waits_leave_the_queue<K: LockKind>(k: Kind<K>) {
    let (server, [holder, waiting]) = two_clients().await;
    let third = server.client().await;
    let raw = server.conn().await;
    let name = format!("km:leave:{}", k.label);
    let what = k.label;
    let (lock, _) = k.owned(&holder, &name, 1);
    let guard = lock.lock_with_lease(LONG_LEASE).await.unwrap();
    let (l1, f1) = k.owned(&waiting, &name, 1);
    let (l2, f2) = k.owned(&waiting, &name, 2);
    let (l3, f3) = k.owned(&third, &name, 3);
    let timing_out = waiter(l1, Duration::from_secs(2));
    queue_is(&raw, &name, &[&f1], what).await;
    let dropped = waiter(l2, LONG_LEASE);
    queue_is(&raw, &name, &[&f1, &f2], what).await;
    let last = waiter(l3, LONG_LEASE);
    queue_is(&raw, &name, &[&f1, &f2, &f3], what).await;

    assert!(
        timing_out.await.unwrap().unwrap().is_none(),
        "{what}: got a held lock"
    );
    queue_is(&raw, &name, &[&f2, &f3], what).await;
    dropped.abort();
    assert!(dropped.await.unwrap_err().is_cancelled(), "{what}");
    queue_is(&raw, &name, &[&f3], what).await;
    assert_no_tracked_holds(&waiting, WITHIN).await;

    guard.unlock().await.unwrap();
    let g = got(last, WITHIN, what).await;
    let mut raw = raw.clone();
    assert_eq!(hash(&mut raw, &name).await, k.hash(&f3, 1), "{what}");
    queue_is(&raw, &name, &[], what).await;
    g.unlock().await.unwrap();
    only_left(&server, &k.lasting(&name), what).await;
}

/// A release wakes the queue head and only the head: the second waiter stays queued (its
/// channel subscribed) until the head releases in turn.
async fn release_wakes_the_head_only<K: LockKind>(k: Kind<K>) {
    let (server, [holder, first]) = two_clients().await;
    let second = server.client().await;
    let raw = server.conn().await;
    let name = format!("km:head:{}", k.label);
    let what = k.label;
    let (lock, _) = k.owned(&holder, &name, 1);
    let guard = lock.lock_with_lease(LONG_LEASE).await.unwrap();
    let (l1, f1) = k.owned(&first, &name, 1);
    let (l2, f2) = k.owned(&second, &name, 2);
    let head = waiter(l1, LONG_LEASE);
    parked(&k, &server, &name, &f1, 1).await;
    let next = waiter(l2, LONG_LEASE);
    parked(&k, &server, &name, &f2, 1).await;
    queue_is(&raw, &name, &[&f1, &f2], what).await;

    guard.unlock().await.unwrap();
    let g = got(head, WITHIN, what).await;
    let mut raw = raw.clone();
    assert_eq!(
        hash(&mut raw, &name).await,
        k.hash(&f1, 1),
        "{what}: the head"
    );
    queue_is(&raw, &name, &[&f2], what).await;
    assert!(!next.is_finished(), "{what}: the second waiter went ahead");
    assert_eq!(
        numsub_on(&server, &k.wait_channel(&name, &f2)).await,
        1,
        "{what}"
    );
    g.unlock().await.unwrap();
    let g = got(next, WITHIN, what).await;
    assert_eq!(hash(&mut raw, &name).await, k.hash(&f2, 1), "{what}");
    g.unlock().await.unwrap();
    only_left(&server, &k.lasting(&name), what).await;
}

/// One test per behaviour and kind: `matrix!(behaviour: kind, kind, ...)`.
macro_rules! matrix {
    ($($behaviour:ident: $($kind:ident),+;)+) => {
        $(mod $behaviour {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $kind() {
                    super::$behaviour(super::$kind()).await
                }
            )+
        })+
    };
}

matrix! {
    acquire_and_release_data: reentrant, fair, non_reentrant, non_reentrant_fair, fenced, spin, write;
    fixed_lease_ends_on_time: reentrant, fair, non_reentrant, non_reentrant_fair, fenced, spin, write;
    watchdog_renews_past_the_lease: reentrant, fair, non_reentrant, non_reentrant_fair, fenced, spin, write;
    foreign_unlock_is_refused: reentrant, fair, non_reentrant, non_reentrant_fair, fenced, spin, write;
    force_unlock_wakes_a_waiter: reentrant, fair, non_reentrant, non_reentrant_fair, fenced, spin, write;
    dropped_acquire_leaves_nothing: reentrant, fair, non_reentrant, non_reentrant_fair, fenced, spin, write;
    release_wakes_another_clients_waiter: reentrant, fair, non_reentrant, non_reentrant_fair, fenced, write;
    ended_waits_leave_the_queue: fair, non_reentrant_fair;
    release_wakes_the_head_only: fair, non_reentrant_fair;
}

// ---- fair kinds with Java Redisson ----

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Waits until Java owner `owner` sleeps on Redisson's wake-up latch (its stack has
/// `Semaphore.tryAcquire`), not on a reply.
async fn java_parked(peer: &JavaPeer, owner: &str, what: &str) {
    let ok = eventually(WITHIN, || async {
        peer.ok("probe", &format!("frames {owner}"))
            .await
            .split(',')
            .any(|f| f == "Semaphore.tryAcquire")
    })
    .await;
    assert!(ok, "{what}: Java owner {owner} never parked");
}

/// Whether `peer` has the Java kind of `k`; for a kind an old Redisson lacks (non-reentrant,
/// 4.4+), checks that the peer refuses it.
async fn java_has<K: LockKind>(k: &Kind<K>, peer: &JavaPeer) -> bool {
    let jk = k.java.unwrap();
    let major: u32 = peer.version().split('.').next().unwrap().parse().unwrap();
    if jk == "fair" || major >= 4 {
        return true;
    }
    let e = peer
        .call("a", &format!("trylock {jk} km:none 0 -1"))
        .await
        .unwrap_err();
    assert_eq!(e.class, "UnsupportedOperationException", "{e:?}");
    false
}

/// A Java waiter at the head of a Rust-held fair kind, a Rust waiter behind it: our release
/// wakes the Java head (only), its unlock wakes ours.
async fn java_head_is_woken<K: LockKind>(
    k: &Kind<K>,
    server: &TestServer,
    client: &Client,
    peer: &JavaPeer,
) {
    let jk = k.java.unwrap();
    let v = peer.version();
    let what = format!("{} / Java {jk} {v}", k.label);
    let name = format!("km:java-head:{}:{v}", k.label);
    let raw = server.conn().await;
    let (lock, _) = k.owned(client, &name, 100);
    let guard = lock.lock_with_lease(LONG_LEASE).await.unwrap();
    let jf = peer.field("w").await;
    let reply = peer.send("w", &format!("trylock {jk} {name} 60000 -1"));
    queue_is(&raw, &name, &[&jf], &what).await;
    java_parked(peer, "w", &what).await;
    let (ours, rf) = k.owned(client, &name, 1);
    let behind = waiter(ours, LONG_LEASE);
    queue_is(&raw, &name, &[&jf, &rf], &what).await;

    guard.unlock().await.unwrap();
    let woken = tokio::time::timeout(WITHIN, reply).await;
    assert_eq!(
        woken.ok(),
        Some(Ok("true".to_owned())),
        "{what}: the Java head"
    );
    let mut raw = raw.clone();
    assert_eq!(hash(&mut raw, &name).await, k.hash(&jf, 1), "{what}");
    queue_is(&raw, &name, &[&rf], &what).await;
    assert!(!behind.is_finished(), "{what}: the Rust waiter went ahead");
    peer.unlock("w", jk, &name).await.unwrap();
    let g = got(behind, WITHIN, &what).await;
    assert_eq!(hash(&mut raw, &name).await, k.hash(&rf, 1), "{what}");
    g.unlock().await.unwrap();
}

/// The holder's lease when the doomed Java waiter queues, and the Java waiter's wait: its
/// deadline is about their sum from then.
const SHORT_LEASE: Duration = Duration::from_secs(5);
const JAVA_WAIT: Duration = Duration::from_secs(2);

/// A Rust-held fair kind with a Java waiter queued (the peer is killed after this returns):
/// the holder's guard, the lock's name and the Java field.
async fn java_doomed_waiter<K: LockKind>(
    k: &Kind<K>,
    server: &TestServer,
    client: &Client,
    peer: &JavaPeer,
) -> (LockGuard<K>, String, String) {
    let jk = k.java.unwrap();
    let v = peer.version();
    let name = format!("km:java-dead:{}:{v}", k.label);
    let (lock, _) = k.owned(client, &name, 100);
    let guard = lock.lock_with_lease(SHORT_LEASE).await.unwrap();
    let owner = format!("dead_{}", k.label);
    let jf = peer.field(&owner).await;
    let _reply = peer.send(
        &owner,
        &format!("trylock {jk} {name} {} -1", JAVA_WAIT.as_millis()),
    );
    queue_is(&server.conn().await, &name, &[&jf], k.label).await;
    (guard, name, jf)
}

/// After the Java waiter's JVM died: a Rust waiter queues behind it, the holder releases (the
/// message goes to the dead head), and the Rust waiter must get the lock at the dead head's
/// deadline, by itself, and not before it (FIFO).
async fn dead_java_waiter_is_evicted<K: LockKind>(
    k: &Kind<K>,
    server: &TestServer,
    client: &Client,
    (guard, name, jf): (LockGuard<K>, String, String),
    v: &str,
) {
    let what = format!("{} / dead Java {v}", k.label);
    let raw = server.conn().await;
    let mut r = raw.clone();
    let dead_until: i64 =
        r.zscore::<_, _, Option<f64>>(timeout_key(&name), &jf)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: the dead waiter has no deadline")) as i64;
    let (ours, rf) = k.owned(client, &name, 1);
    let behind = waiter(ours, LONG_LEASE);
    queue_is(&raw, &name, &[&jf, &rf], &what).await;
    // Released if still held (a loaded machine may have let the short lease run out): either
    // way the lock is free and only the dead head's deadline stands before the Rust waiter.
    let _ = guard.unlock().await;
    let bound = Duration::from_millis((dead_until - now_ms()).max(0) as u64) + WITHIN;
    let g = got(behind, bound, &what).await;
    let at = now_ms();
    assert!(
        at >= dead_until,
        "{what}: skipped the dead head {} ms early",
        dead_until - at
    );
    assert_eq!(hash(&mut r, &name).await, k.hash(&rf, 1), "{what}");
    queue_is(&raw, &name, &[], &what).await;
    g.unlock().await.unwrap();
}

/// The fair kinds against every pinned Redisson: a Java waiter at the head woken by our release;
/// then one dead Java waiter per kind (one JVM killed with both queued), each evicted at its
/// deadline so that the Rust waiter behind it goes ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_kinds_with_java_waiters() {
    let server = TestServer::start();
    let client = server.client().await;
    let (f, nrf) = (fair(), non_reentrant_fair());
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let has_nrf = java_has(&nrf, &peer).await;
        java_head_is_woken(&f, &server, &client, &peer).await;
        if has_nrf {
            java_head_is_woken(&nrf, &server, &client, &peer).await;
        }
        let dead_f = java_doomed_waiter(&f, &server, &client, &peer).await;
        let dead_nrf = if has_nrf {
            Some(java_doomed_waiter(&nrf, &server, &client, &peer).await)
        } else {
            None
        };
        peer.kill().await;
        let evict_f = dead_java_waiter_is_evicted(&f, &server, &client, dead_f, &v);
        let evict_nrf = async {
            if let Some(d) = dead_nrf {
                dead_java_waiter_is_evicted(&nrf, &server, &client, d, &v).await;
            }
        };
        tokio::join!(evict_f, evict_nrf);
    }
}
