//! Area 6: the fair queue when its head leaves a free lock. A head waiter whose wait ends
//! (cancelled by dropping its future, or timed out) while the lock is free and others queue
//! behind it must wake the new head at once, on the new head's own channel, with Redisson's
//! unlock message (`0`), not leave it asleep until the lease or a deadline would have woken it.
//!
//! The race (a release that crosses the head's exit) is set up deterministically: the lock is
//! freed without a message (a plain `DEL`, as if the release message were lost on its way to
//! the head), or released while the head cannot hear it (its subscriber held out by the fault
//! proxy), or freed while the head's last try is on its way back through a delaying proxy.
//!
//! Every waiter behind the head has a wait budget of minutes and a holder lease of 90 s before
//! it: a new head left asleep would wake only when that lease ends, while the test gives it
//! [`WOKEN_WITHIN`] after the head left. Redisson's own `acquireFailed` publishes nothing (its
//! waiters poll every 0 ms while a free lock has a stale head); ours must publish exactly one `0`
//! on the new head's channel, and nothing when the lock is still held.
//!
//! Bugs these catch: `lua/fair_cancel.lua` not publishing, publishing on the leaver's own
//! channel (or the shared one), publishing only while the lock is held, or on every exit;
//! `QueueExit` not run (or disarmed) on a timeout or on a dropped future; for both fair kinds
//! (`get_fair_lock`, `get_non_reentrant_fair_lock`) and for Java waiters behind a Rust head.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{Client, Config, Lock, LockGuard, LockKind, LockOwner};
use tokio::task::JoinHandle;

use crate::java::peers;
use crate::java::sync_ops::{
    calls_of, deadline, parked_on_latch, queue, queue_is, scripts_at_least, waiter_channel, SCRIPTS,
};
use crate::support::proxy::{Mode, Proxy};
use crate::support::redisson::reset_stats;
use crate::support::{channel_subscribers, eventually, field, fields, TestServer};

/// The foreign holder's lease: a waiter that no message wakes sleeps until it ends.
const HOLDER_LEASE_MS: i64 = 90_000;
/// The waiters behind the head wait this long at most (far beyond the test's bounds).
const PATIENCE: Duration = Duration::from_secs(240);
/// The new head must have the lock within this bound after the old head left.
const WOKEN_WITHIN: Duration = Duration::from_secs(20);
/// A generous bound for set-up steps and for a head's wait to end.
const WITHIN: Duration = Duration::from_secs(30);
/// The foreign holder's owner field (what a Java holder writes).
const HOLDER: &str = "1a2b3c4d-0000-4000-8000-00000000f6f6:1";

/// Makes the lock of one fair kind.
type Make<K> = fn(&Client, &str) -> Lock<K>;

fn fair(client: &Client, name: &str) -> Lock<redisson_lock::Fair> {
    client.get_fair_lock(name)
}

fn non_reentrant_fair(client: &Client, name: &str) -> Lock<redisson_lock::NonReentrantFair> {
    client.get_non_reentrant_fair_lock(name)
}

/// A foreign hold of `name` with a 90 s lease (what Java's acquire leaves).
async fn hold_foreign(raw: &mut MultiplexedConnection, name: &str) {
    let _: () = raw.hset(name, HOLDER, 1).await.unwrap();
    let _: () = raw.pexpire(name, HOLDER_LEASE_MS).await.unwrap();
}

/// Runs the kind's acquire and release once on another name, so that the script counts that
/// tell a parked waiter hold no `NOSCRIPT` round.
async fn warm<K: LockKind>(make: Make<K>, client: &Client, name: &str) {
    let lock = make(client, &format!("{name}:warm"));
    lock.try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

/// Every message published on the lock's per-waiter channels (`PSUBSCRIBE`), in order.
struct Messages {
    rx: tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
    _task: JoinHandle<()>,
}

impl Messages {
    async fn start(server: &TestServer, name: &str) -> Messages {
        let mut pubsub = server.raw().get_async_pubsub().await.unwrap();
        pubsub
            .psubscribe(format!("redisson_lock__channel:{{{name}}}*"))
            .await
            .unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut stream = pubsub.into_on_message();
            while let Some(msg) = stream.next().await {
                let payload: String = msg.get_payload().unwrap_or_default();
                if tx
                    .send((msg.get_channel_name().to_owned(), payload))
                    .is_err()
                {
                    break;
                }
            }
        });
        Messages { rx, _task: task }
    }

    /// Every message up to a marker the test publishes now (so nothing published before it can
    /// still be on its way).
    async fn until_marker(
        &mut self,
        raw: &mut MultiplexedConnection,
        name: &str,
    ) -> Vec<(String, String)> {
        let marker = format!("redisson_lock__channel:{{{name}}}:marker");
        let _: i64 = raw.publish(&marker, "marker").await.unwrap();
        let mut seen = Vec::new();
        loop {
            let m = tokio::time::timeout(WITHIN, self.rx.recv())
                .await
                .expect("the marker never came")
                .expect("the listener ended");
            if m.0 == marker {
                return seen;
            }
            seen.push(m);
        }
    }
}

/// One waiter in its own task: the guard when it gets the lock.
type Waiter<K> = JoinHandle<redisson_lock::Result<Option<LockGuard<K>>>>;

fn spawn_waiter<K: LockKind>(lock: Lock<K>, wait: Duration) -> Waiter<K>
where
    Lock<K>: Send + 'static,
    LockGuard<K>: Send + 'static,
{
    tokio::spawn(async move { lock.try_lock_for(wait).await })
}

/// Waits until the waiter whose field is `f` is queued as `expected`, subscribed to its own
/// channel, and the server has run `scripts` lock scripts since the last reset (each waiter
/// tries, subscribes and tries again: it now sleeps until a message or the 90 s lease).
async fn parked(server: &TestServer, name: &str, expected: &[String], f: &str, scripts: u64) {
    queue_is(server, name, expected).await;
    assert!(
        channel_subscribers(server, &waiter_channel(name, f), 1).await,
        "{name}: waiter {f} never subscribed to its own channel"
    );
    scripts_at_least(server, scripts, name).await;
}

/// The new head got the lock within [`WOKEN_WITHIN`] of `left` (the old head gone), and holds
/// it alone, with the queue and the deadlines empty; the messages published on the lock's
/// waiter channels were exactly one `0` on the new head's channel. Releases it.
async fn next_head_took_it<K: LockKind>(
    server: &TestServer,
    messages: &mut Messages,
    name: &str,
    (head, next): (&str, &str),
    waiter: Waiter<K>,
    left: Instant,
) {
    let guard = tokio::time::timeout(WOKEN_WITHIN, waiter)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{name}: the new head was not woken when the old head left a free lock \
                 (it would sleep until the 90 s lease)"
            )
        })
        .unwrap()
        .unwrap()
        .expect("the new head timed out");
    let took = left.elapsed();
    let mut raw = server.conn().await;
    assert_eq!(
        fields(&mut raw, name).await,
        std::collections::HashMap::from([(next.to_owned(), 1)]),
        "{name}: the holders after {took:?}"
    );
    assert!(queue(server, name).await.is_empty(), "{name}");
    assert_eq!(deadline(server, name, head).await, None, "{name}");
    assert_eq!(deadline(server, name, next).await, None, "{name}");
    assert_eq!(
        messages.until_marker(&mut raw, name).await,
        [(waiter_channel(name, next), "0".to_owned())],
        "{name}: the leaving head must wake the new head, on its own channel, with `0`"
    );
    guard.unlock().await.unwrap();
}

/// The head's future is dropped while the lock is free (freed without a message) and a waiter
/// queues behind it: the cancel wakes that waiter at once.
async fn dropped_head<K: LockKind>(kind: &str, make: Make<K>)
where
    Lock<K>: Send + 'static,
    LockGuard<K>: Send + 'static,
{
    let server = TestServer::start();
    let (ca, cb) = (server.client().await, server.client().await);
    let mut raw = server.conn().await;
    let name = format!("fhl:drop:{kind}");
    warm(make, &ca, &name).await;
    hold_foreign(&mut raw, &name).await;
    let mut messages = Messages::start(&server, &name).await;
    reset_stats(&server).await;

    let (oa, ob) = (LockOwner::new(1), LockOwner::new(2));
    let (fa, fb) = (field(&ca, oa), field(&cb, ob));
    let head = spawn_waiter(make(&ca, &name).with_owner(oa), PATIENCE);
    parked(&server, &name, std::slice::from_ref(&fa), &fa, 2).await;
    let next = spawn_waiter(make(&cb, &name).with_owner(ob), PATIENCE);
    parked(&server, &name, &[fa.clone(), fb.clone()], &fb, 4).await;

    // The lock is freed without a message, then the head's wait is cancelled.
    let _: () = raw.del(&name).await.unwrap();
    head.abort();
    assert!(head.await.unwrap_err().is_cancelled());
    let left = Instant::now();
    next_head_took_it(&server, &mut messages, &name, (&fa, &fb), next, left).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_fair_head_wakes_the_next_waiter() {
    dropped_head("fair", fair).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_non_reentrant_fair_head_wakes_the_next_waiter() {
    dropped_head("nrfair", non_reentrant_fair).await;
}

/// The head's wait budget: its wait ends by time while the test watches.
const HEAD_WAIT: Duration = Duration::from_secs(6);
/// The delaying proxy's latency, each way: the head's last try runs on the server one delay
/// after it was sent, and its cancel two delays after that.
const DELAY: Duration = Duration::from_secs(3);

/// The head times out in its wait loop: its last try (at its deadline) still finds the lock
/// held, the lock is freed right after (no message), and the head leaves the queue. The head's
/// client talks through a proxy that delays every chunk by [`DELAY`], so the test frees the
/// lock after the server ran that last try and before the cancel arrives.
async fn timed_out_head<K: LockKind>(kind: &str, make: Make<K>)
where
    Lock<K>: Send + 'static,
    LockGuard<K>: Send + 'static,
{
    let server = TestServer::start();
    let proxy = Proxy::start(server.port).await;
    // Calls outlive the delayed round trip; the subscriber has all the time it needs.
    let ca = Client::with_config(
        Config::new(proxy.url())
            .with_response_timeout(WITHIN)
            .with_subscription_timeout(WITHIN),
    )
    .await
    .unwrap();
    let cb = server.client().await;
    let mut raw = server.conn().await;
    let name = format!("fhl:timeout:{kind}");
    warm(make, &ca, &name).await;
    hold_foreign(&mut raw, &name).await;
    let mut messages = Messages::start(&server, &name).await;
    reset_stats(&server).await;

    let (oa, ob) = (LockOwner::new(1), LockOwner::new(2));
    let (fa, fb) = (field(&ca, oa), field(&cb, ob));
    let head = spawn_waiter(make(&ca, &name).with_owner(oa), HEAD_WAIT);
    parked(&server, &name, std::slice::from_ref(&fa), &fa, 2).await;
    let next = spawn_waiter(make(&cb, &name).with_owner(ob), PATIENCE);
    parked(&server, &name, &[fa.clone(), fb.clone()], &fb, 4).await;
    let before = calls_of(&server, &SCRIPTS).await;
    proxy.set(Mode::Delay(DELAY));
    assert!(
        !head.is_finished(),
        "set-up slower than the head's {HEAD_WAIT:?} wait"
    );

    // The head's last try reaches the server (the lock still held: it stays queued), then the
    // lock is freed without a message; the head's cancel comes two delays later.
    let tried = eventually(WITHIN, || async {
        calls_of(&server, &SCRIPTS).await > before
    })
    .await;
    assert!(tried, "the head never made its last try");
    let _: () = raw.del(&name).await.unwrap();
    let outcome = tokio::time::timeout(WITHIN, head)
        .await
        .expect("the head's wait did not end")
        .unwrap()
        .unwrap();
    assert!(outcome.is_none(), "{name}: the head got the lock");
    let left = Instant::now();
    next_head_took_it(&server, &mut messages, &name, (&fa, &fb), next, left).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_head_timing_out_after_its_last_try_wakes_the_next_waiter() {
    timed_out_head("fair", fair).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_reentrant_fair_head_timing_out_after_its_last_try_wakes_the_next_waiter() {
    timed_out_head("nrfair", non_reentrant_fair).await;
}

/// The head cannot subscribe (the proxy refuses its subscriber's connection) and so never
/// hears the release, which is Redisson's (`DEL`, then `0` on the head's channel, heard by
/// nobody); its wait ends by time while it is still subscribing, and its exit wakes the waiter
/// behind it.
async fn unsubscribed_head<K: LockKind>(kind: &str, make: Make<K>)
where
    Lock<K>: Send + 'static,
    LockGuard<K>: Send + 'static,
{
    let server = TestServer::start();
    let proxy = Proxy::start(server.port).await;
    let ca = Client::with_config(Config::new(proxy.url()).with_subscription_timeout(WITHIN))
        .await
        .unwrap();
    let cb = server.client().await;
    let mut raw = server.conn().await;
    let name = format!("fhl:deaf:{kind}");
    warm(make, &ca, &name).await;
    warm(make, &cb, &format!("{name}:b")).await;
    hold_foreign(&mut raw, &name).await;
    let mut messages = Messages::start(&server, &name).await;
    reset_stats(&server).await;
    // The head's command connection stays; its subscriber cannot connect.
    proxy.set(Mode::Refuse);

    let (oa, ob) = (LockOwner::new(1), LockOwner::new(2));
    let (fa, fb) = (field(&ca, oa), field(&cb, ob));
    let head = spawn_waiter(make(&ca, &name).with_owner(oa), HEAD_WAIT);
    queue_is(&server, &name, std::slice::from_ref(&fa)).await;
    let next = spawn_waiter(make(&cb, &name).with_owner(ob), PATIENCE);
    parked(&server, &name, &[fa.clone(), fb.clone()], &fb, 3).await;

    // Redisson's release: the lock deleted, `0` on the head's channel, which nobody hears.
    let _: () = raw.del(&name).await.unwrap();
    let heard: i64 = raw.publish(waiter_channel(&name, &fa), "0").await.unwrap();
    assert_eq!(
        heard, 1,
        "heard by the test's listener only, not by the head"
    );
    assert_eq!(
        ca.stats().subscriber_connections,
        0,
        "the head's subscriber connected"
    );
    assert!(
        !head.is_finished(),
        "set-up slower than the head's {HEAD_WAIT:?} wait"
    );
    let outcome = tokio::time::timeout(WITHIN, head)
        .await
        .expect("the head's wait did not end")
        .unwrap()
        .unwrap();
    assert!(outcome.is_none(), "{name}: the head got the lock");
    let left = Instant::now();
    // The release's own message is the first one the listener saw.
    let first = tokio::time::timeout(WITHIN, messages.rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, (waiter_channel(&name, &fa), "0".to_owned()));
    next_head_took_it(&server, &mut messages, &name, (&fa, &fb), next, left).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_head_timing_out_unsubscribed_wakes_the_next_waiter() {
    unsubscribed_head("fair", fair).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_reentrant_fair_head_timing_out_unsubscribed_wakes_the_next_waiter() {
    unsubscribed_head("nrfair", non_reentrant_fair).await;
}

/// A head that leaves while the lock is still held publishes nothing (as Redisson's
/// `acquireFailed`): the release that follows wakes the new head, and that is the only message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_leaving_a_held_lock_publishes_nothing() {
    let server = TestServer::start();
    let (ca, cb) = (server.client().await, server.client().await);
    let mut raw = server.conn().await;
    let name = "fhl:held";
    warm(fair, &ca, name).await;
    hold_foreign(&mut raw, name).await;
    let mut messages = Messages::start(&server, name).await;
    reset_stats(&server).await;

    let (oa, ob) = (LockOwner::new(1), LockOwner::new(2));
    let (fa, fb) = (field(&ca, oa), field(&cb, ob));
    let head = spawn_waiter(fair(&ca, name).with_owner(oa), PATIENCE);
    parked(&server, name, std::slice::from_ref(&fa), &fa, 2).await;
    let next = spawn_waiter(fair(&cb, name).with_owner(ob), PATIENCE);
    parked(&server, name, &[fa.clone(), fb.clone()], &fb, 4).await;
    head.abort();
    assert!(head.await.unwrap_err().is_cancelled());
    queue_is(&server, name, std::slice::from_ref(&fb)).await;
    assert!(
        messages.until_marker(&mut raw, name).await.is_empty(),
        "a head leaving a held lock published"
    );
    // Redisson's release: the lock deleted, `0` on the (new) head's channel.
    let _: () = raw.del(name).await.unwrap();
    let _: i64 = raw.publish(waiter_channel(name, &fb), "0").await.unwrap();
    let guard = tokio::time::timeout(WOKEN_WITHIN, next)
        .await
        .expect("the new head was not woken by the release")
        .unwrap()
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
}

/// Java waiters (real Redisson) behind a leaving Rust head: the head's future is dropped while
/// the lock is free (freed without a message), and the Java waiter gets the lock at once,
/// long before its own sleep (the 90 s lease it last saw) ends. Fair on every pinned
/// Redisson; non-reentrant fair on those that have it (4.4+).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_waiters_behind_a_leaving_rust_head_are_woken() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    warm(fair, &client, "fhl:java").await;
    warm(non_reentrant_fair, &client, "fhl:java:nr").await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let major: u32 = v.split('.').next().unwrap().parse().unwrap();
        let kinds: &[&str] = if major >= 4 {
            &["fair", "nrfair"]
        } else {
            &["fair"]
        };
        for (i, kind) in kinds.iter().enumerate() {
            let name = format!("fhl:java:{kind}:{v}");
            let owner = LockOwner::new(10 + i as u64);
            let lock: Box<dyn Fn() -> JoinHandle<bool>> = match *kind {
                "fair" => {
                    let l = client.get_fair_lock(&name).with_owner(owner);
                    Box::new(move || {
                        let l = l.clone();
                        tokio::spawn(async move { l.lock().await.is_ok() })
                    })
                }
                _ => {
                    let l = client.get_non_reentrant_fair_lock(&name).with_owner(owner);
                    Box::new(move || {
                        let l = l.clone();
                        tokio::spawn(async move { l.lock().await.is_ok() })
                    })
                }
            };
            hold_foreign(&mut raw, &name).await;
            let mut messages = Messages::start(&server, &name).await;
            let rust = field(&client, owner);
            reset_stats(&server).await;
            let head = lock();
            queue_is(&server, &name, std::slice::from_ref(&rust)).await;
            assert!(
                channel_subscribers(&server, &waiter_channel(&name, &rust), 1).await,
                "{v}: the Rust head never subscribed"
            );
            // It tried again after subscribing: only a message or the lease wakes it now.
            scripts_at_least(&server, 2, &v).await;
            let java = peer.field("w").await;
            let reply = peer.send(
                "w",
                &format!("trylock {kind} {name} {} -1", PATIENCE.as_millis()),
            );
            queue_is(&server, &name, &[rust.clone(), java.clone()]).await;
            assert!(
                channel_subscribers(&server, &waiter_channel(&name, &java), 1).await,
                "{v}: the Java waiter never subscribed to its own channel"
            );
            parked_on_latch(&peer, "w", &v).await;

            let _: () = raw.del(&name).await.unwrap();
            head.abort();
            assert!(head.await.unwrap_err().is_cancelled());
            let left = Instant::now();
            let got = tokio::time::timeout(WOKEN_WITHIN, reply)
                .await
                .unwrap_or_else(|_| {
                    panic!("{v} {kind}: the Java waiter was not woken when the Rust head left")
                });
            assert_eq!(got, Ok("true".to_owned()), "{v} {kind}");
            let took = left.elapsed();
            assert_eq!(
                fields(&mut raw, &name).await,
                std::collections::HashMap::from([(java.clone(), 1)]),
                "{v} {kind}: after {took:?}"
            );
            assert!(queue(&server, &name).await.is_empty(), "{v} {kind}");
            assert_eq!(
                messages.until_marker(&mut raw, &name).await,
                [(waiter_channel(&name, &java), "0".to_owned())],
                "{v} {kind}: Redisson's unlock message on the Java waiter's channel"
            );
            peer.unlock("w", kind, &name).await.unwrap();
        }
    }
}
