//! FairLock (Redisson's RFairLock): the queue, the deadlines and the per-waiter channels as a Java
//! client observes them, FIFO hand-over, eviction of dead waiters, leaving the queue on
//! cancellation, and no busy loop while a dead waiter blocks a free lock.

use std::collections::HashMap;
use std::time::Duration;

use crate::support::redisson::{queue_key, timeout_key};
use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::LockOwner;
use tokio::sync::{mpsc, oneshot};

/// Generous bound for anything event-driven (a wake-up, a release).
const WAIT: Duration = Duration::from_secs(10);
/// Long enough for a message that should *not* come to show up if it were sent.
const QUIET: Duration = Duration::from_millis(300);
/// A field a crashed Java client left behind.
const DEAD: &str = "0badc0de-dead-4bad-8bad-00000000dead:77";

/// The channel of one waiter: `redisson_lock__channel:{<name>}:<uuid>:<id>`.
fn waiter_channel(name: &str, field: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}:{field}")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn queue(raw: &mut MultiplexedConnection, name: &str) -> Vec<String> {
    raw.lrange(queue_key(name), 0, -1).await.unwrap()
}

async fn deadline(raw: &mut MultiplexedConnection, name: &str, field: &str) -> Option<i64> {
    let s: Option<f64> = raw.zscore(timeout_key(name), field).await.unwrap();
    s.map(|s| s as i64)
}

async fn zcard(raw: &mut MultiplexedConnection, name: &str) -> i64 {
    raw.zcard(timeout_key(name)).await.unwrap()
}

/// Waits until the queue holds exactly `n` waiters.
async fn wait_queue_len(server: &TestServer, name: &str, n: usize) {
    let ok = eventually(WAIT, || async {
        let mut raw = server.conn().await;
        queue(&mut raw, name).await.len() == n
    })
    .await;
    let mut raw = server.conn().await;
    assert!(
        ok,
        "queue never reached {n}: {:?}",
        queue(&mut raw, name).await
    );
}

/// Enqueues `field` by hand the way a Java client's acquire script does, then dies.
async fn enqueue_dead(raw: &mut MultiplexedConnection, name: &str, field: &str, deadline: i64) {
    let _: () = raw.rpush(queue_key(name), field).await.unwrap();
    let _: () = raw.zadd(timeout_key(name), field, deadline).await.unwrap();
}

/// Script calls the server has run so far (EVAL and EVALSHA).
async fn script_calls(raw: &mut MultiplexedConnection) -> u64 {
    info(raw, "commandstats")
        .await
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// A waiter in its own task: locks, reports the epoch ms it got the lock at, holds it until
/// told to release.
struct Waiter {
    acquired: oneshot::Receiver<i64>,
    release: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

fn spawn_waiter(lock: redisson_lock::FairLock) -> Waiter {
    let (acq_tx, acquired) = oneshot::channel();
    let (release, rel_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        let _ = acq_tx.send(now_ms());
        let _ = rel_rx.await;
        guard.unlock().await.unwrap();
    });
    Waiter {
        acquired,
        release,
        task,
    }
}

impl Waiter {
    async fn acquired(&mut self) -> i64 {
        tokio::time::timeout(WAIT, &mut self.acquired)
            .await
            .expect("waiter did not get the lock")
            .unwrap()
    }

    async fn finish(self) {
        let _ = self.release.send(());
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("waiter did not release")
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_deadlines_and_per_waiter_channels_as_java_sees_them() {
    let wait = Duration::from_secs(7);
    let wait_ms = 7_000;
    let (server, client, mut raw) = fixture_with(|c| c.with_fair_lock_wait_timeout(wait)).await;
    let name = "fair:layout";
    let lock = client.get_fair_lock(name);

    let held = lock.lock().await.unwrap();
    assert_eq!(key_type(&mut raw, name).await, "hash");
    let f: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(f, HashMap::from([(field(&client, lock.owner()), 1)]));
    // Nothing is queued by an uncontended acquire.
    assert!(!raw.exists::<_, bool>(queue_key(name)).await.unwrap());
    assert!(!raw.exists::<_, bool>(timeout_key(name)).await.unwrap());

    let (a, b) = (LockOwner::new(1), LockOwner::new(2));
    let (fa, fb) = (field(&client, a), field(&client, b));
    let mut listen_a = Listener::start(&server, &waiter_channel(name, &fa)).await;
    let mut listen_b = Listener::start(&server, &waiter_channel(name, &fb)).await;

    let before = now_ms();
    let pttl: i64 = raw.pttl(name).await.unwrap();
    let after = now_ms();
    let mut wa = spawn_waiter(lock.with_owner(a));
    wait_queue_len(&server, name, 1).await;
    let mut wb = spawn_waiter(lock.with_owner(b));
    wait_queue_len(&server, name, 2).await;

    assert_eq!(key_type(&mut raw, &queue_key(name)).await, "list");
    assert_eq!(key_type(&mut raw, &timeout_key(name)).await, "zset");
    assert_eq!(queue(&mut raw, name).await, vec![fa.clone(), fb.clone()]);
    // Deadline of the first waiter: the lock's expiry plus the wait time, in epoch ms.
    let da = deadline(&mut raw, name, &fa).await.unwrap();
    assert!(
        da >= before + pttl + wait_ms - 50 && da <= after + pttl + wait_ms + 50,
        "deadline {da} vs expiry {}..{} + {wait_ms}",
        before + pttl,
        after + pttl
    );
    // Each later waiter: the previous deadline plus the wait time.
    let db = deadline(&mut raw, name, &fb).await.unwrap();
    assert_eq!(db, da + wait_ms);

    // Release: only the head's channel gets `0`.
    held.unlock().await.unwrap();
    assert_eq!(listen_a.next(WAIT).await.as_deref(), Some("0"));
    wa.acquired().await;
    assert!(
        listen_b.next(QUIET).await.is_none(),
        "message to a non-head"
    );
    let f: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(f, HashMap::from([(fa.clone(), 1)]));
    assert_eq!(queue(&mut raw, name).await, vec![fb.clone()]);
    assert_eq!(deadline(&mut raw, name, &fa).await, None);
    // The head took the lock: every later deadline moves earlier by the wait time.
    assert_eq!(deadline(&mut raw, name, &fb).await, Some(db - wait_ms));

    wa.finish().await;
    assert_eq!(listen_b.next(WAIT).await.as_deref(), Some("0"));
    wb.acquired().await;
    assert!(listen_a.drain().is_empty());
    assert!(!raw.exists::<_, bool>(queue_key(name)).await.unwrap());
    assert!(!raw.exists::<_, bool>(timeout_key(name)).await.unwrap());
    wb.finish().await;
    // The queue is empty, so the last release wakes nobody.
    assert!(listen_b.next(QUIET).await.is_none());
    assert_nothing_left(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_waiters_acquire_in_arrival_order() {
    let (server, [client, other]) = two_clients().await;
    let name = "fair:order";
    let held = client.get_fair_lock(name).lock().await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for i in 0..8 {
        // Alternate clients: the order is the queue's, not one client's.
        let lock = if i % 2 == 0 { &client } else { &other }.get_fair_lock(name);
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            tx.send(i).unwrap();
            guard.unlock().await.unwrap();
        }));
        wait_queue_len(&server, name, i + 1).await;
    }
    held.unlock().await.unwrap();
    let mut order = Vec::new();
    for _ in 0..8 {
        order.push(
            tokio::time::timeout(WAIT, rx.recv())
                .await
                .expect("hand-over stalled")
                .unwrap(),
        );
    }
    assert_eq!(order, (0..8).collect::<Vec<_>>());
    for t in tasks {
        t.await.unwrap();
    }
    let mut raw = server.conn().await;
    assert!(queue(&mut raw, name).await.is_empty());
    assert_eq!(zcard(&mut raw, name).await, 0);
    assert!(!client.get_fair_lock(name).is_locked().await.unwrap());
}

/// A Java client that queued and then crashed blocks the queue only until its deadline. The
/// holder releases while the dead head is still within it: the release message goes to the
/// dead head, yet the waiter behind it must take over once the deadline passes, not when the
/// old holder's 30 s lease would have run out, nor at its own queue deadline (the dead head's
/// plus the 5 s fair-lock wait timeout): bounded from both sides (issue 23).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_waiter_is_evicted_after_its_deadline_and_the_queue_moves_on() {
    let wait = Duration::from_millis(5_000);
    let (server, client, mut raw) = fixture_with(|c| c.with_fair_lock_wait_timeout(wait)).await;
    let name = "fair:dead";
    let lock = client.get_fair_lock(name);
    let held = lock.lock().await.unwrap();

    let dead_deadline = now_ms() + 2_000;
    enqueue_dead(&mut raw, name, DEAD, dead_deadline).await;
    let w = LockOwner::new(5);
    let mut waiter = spawn_waiter(lock.with_owner(w));
    wait_queue_len(&server, name, 2).await;
    assert_eq!(
        queue(&mut raw, name).await,
        vec![DEAD.to_owned(), field(&client, w)]
    );
    held.unlock().await.unwrap();

    let got = waiter.acquired().await;
    // FIFO held: the dead head kept its turn until its deadline.
    assert!(
        got >= dead_deadline,
        "acquired at {got}, before the dead head's deadline {dead_deadline}"
    );
    // And soon after it: the waiter's wait hint is the dead head's deadline. 2.5 s of slack
    // for a loaded machine, half the way to the waiter's own deadline (dead head's + 5 s).
    assert!(
        got <= dead_deadline + 2_500,
        "acquired {} ms after the dead head's deadline: it slept past the eviction",
        got - dead_deadline
    );
    assert_eq!(
        deadline(&mut raw, name, DEAD).await,
        None,
        "dead waiter kept"
    );
    assert!(queue(&mut raw, name).await.is_empty());
    waiter.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_holder_blocks_and_its_release_message_wakes_our_head() {
    let name = "fair:foreign";
    let (server, client, mut raw) = fixture().await;
    hold_as_java(&mut raw, name, JAVA_FIELD).await;

    let lock = client.get_fair_lock(name);
    assert_excluded_by_foreign(&lock).await;
    // `try_lock` without a wait never queues.
    assert!(queue(&mut raw, name).await.is_empty());

    let w = LockOwner::new(9);
    let mut waiter = spawn_waiter(lock.with_owner(w));
    wait_queue_len(&server, name, 1).await;
    tokio::time::sleep(QUIET).await;
    assert!(
        waiter.acquired.try_recv().is_err(),
        "took a lock Java holds"
    );
    let f: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(f, HashMap::from([(JAVA_FIELD.to_owned(), 1)]));

    // Java's unlock: DEL, then `0` on the head's own channel. The lock's PTTL was ~60 s, so
    // only the message can wake our waiter this soon.
    let _: () = raw.del(name).await.unwrap();
    let n: i64 = raw
        .publish(waiter_channel(name, &field(&client, w)), "0")
        .await
        .unwrap();
    assert_eq!(n, 1, "our waiter subscribes to its own channel");
    waiter.acquired().await;
    let f: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(f, HashMap::from([(field(&client, w), 1)]));
    waiter.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiters_leave_the_queue() {
    let wait = Duration::from_secs(5);
    let (server, client, mut raw) = fixture_with(|c| c.with_fair_lock_wait_timeout(wait)).await;
    let name = "fair:cancel";
    hold_as_java(&mut raw, name, DEAD).await;
    let lock = client.get_fair_lock(name);

    // A try_lock_for that runs out leaves the queue and the deadline set.
    let r = lock.try_lock_for(Duration::from_millis(300)).await.unwrap();
    assert!(r.is_none());
    let gone = || async {
        let mut raw = server.conn().await;
        queue(&mut raw, name).await.is_empty() && zcard(&mut raw, name).await == 0
    };
    assert!(
        eventually(WAIT, gone).await,
        "timed-out waiter still queued"
    );

    // A lock() future dropped mid-wait.
    let r = tokio::time::timeout(Duration::from_millis(300), lock.lock()).await;
    assert!(r.is_err());
    assert!(eventually(WAIT, gone).await, "dropped waiter still queued");

    // An aborted waiter ahead of a live one: it leaves, and the live one's deadline moves
    // earlier by the wait time (Redisson's acquireFailed).
    let (a, b) = (LockOwner::new(1), LockOwner::new(2));
    let wa = spawn_waiter(lock.with_owner(a));
    wait_queue_len(&server, name, 1).await;
    let mut wb = spawn_waiter(lock.with_owner(b));
    wait_queue_len(&server, name, 2).await;
    let db = deadline(&mut raw, name, &field(&client, b)).await.unwrap();
    wa.task.abort();
    wait_queue_len(&server, name, 1).await;
    assert_eq!(queue(&mut raw, name).await, vec![field(&client, b)]);
    assert_eq!(deadline(&mut raw, name, &field(&client, a)).await, None);
    assert_eq!(
        deadline(&mut raw, name, &field(&client, b)).await,
        Some(db - 5_000)
    );
    // Nothing of the cancelled waiters was ever held.
    let f: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(f, HashMap::from([(DEAD.to_owned(), 1)]));

    let _: () = raw.del(name).await.unwrap();
    let _: () = raw
        .publish(waiter_channel(name, &field(&client, b)), "0")
        .await
        .unwrap();
    wb.acquired().await;
    wb.finish().await;
}

/// Redisson's waiters retry with a 0 ms wait while the lock is free but a dead waiter is at the
/// head; ours sleep until that head's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_busy_loop_while_a_dead_head_blocks_a_free_lock() {
    let name = "fair:spin";
    let (server, client, mut raw) = fixture().await;
    let dead_deadline = now_ms() + 4_000;
    enqueue_dead(&mut raw, name, DEAD, dead_deadline).await;
    let mut waiter = spawn_waiter(client.get_fair_lock(name));
    wait_queue_len(&server, name, 2).await;

    let before = script_calls(&mut raw).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let calls = script_calls(&mut raw).await - before;
    assert!(calls < 50, "{calls} scripts in 1 s: the waiter is spinning");

    let got = waiter.acquired().await;
    assert!(got >= dead_deadline);
    waiter.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_rejected_and_queues_nothing() {
    let (server, client, mut raw) = fixture().await;
    let lock = client.get_fair_lock("fair:bad");
    assert_zero_lease_refused(&lock, Duration::from_secs(1)).await;
    let e = client.get_fair_lock("").lock().await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(!lock.is_locked().await.unwrap());

    let _: () = raw.set("fair:bad", "not a lock").await.unwrap();
    let e = lock.lock().await.unwrap_err();
    assert!(e.is_wrong_type(), "{e}");
    let e = lock.try_lock_for(WAIT).await.unwrap_err();
    assert!(e.is_wrong_type(), "{e}");
    assert!(lock.force_unlock().await.unwrap_err().is_wrong_type());
    let v: String = raw.get("fair:bad").await.unwrap();
    assert_eq!(v, "not a lock");
    assert!(
        eventually(WAIT, || async {
            let mut raw = server.conn().await;
            queue(&mut raw, "fair:bad").await.is_empty() && zcard(&mut raw, "fair:bad").await == 0
        })
        .await
    );
}

/// A waiter whose acquire script is in flight when its future is dropped may win the lock; the
/// client takes that hold back in the background. Handing it back must wake the next waiter on
/// its own channel (a fair waiter does not listen on the shared one), or the queue stalls for
/// the old holder's whole lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquire_that_won_the_lock_hands_it_to_the_next_waiter() {
    let name = "fair:inflight";
    let (server, client, mut raw) = fixture().await;
    hold_as_java(&mut raw, name, DEAD).await;
    let lock = client.get_fair_lock(name);
    let (a, b) = (LockOwner::new(1), LockOwner::new(2));
    let wa = spawn_waiter(lock.with_owner(a));
    wait_queue_len(&server, name, 1).await;
    let mut wb = spawn_waiter(lock.with_owner(b));
    wait_queue_len(&server, name, 2).await;
    tokio::time::sleep(QUIET).await;

    // Java releases and wakes the head, and the server stops running writes for a moment: the
    // head's acquire script is now in flight. Drop it there.
    let _: () = redis::pipe()
        .del(name)
        .ignore()
        .publish(waiter_channel(name, &field(&client, a)), "0")
        .ignore()
        .cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("WRITE")
        .ignore()
        .query_async(&mut raw)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    wa.task.abort();

    wb.acquired().await;
    let f: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(f, HashMap::from([(field(&client, b), 1)]));
    assert!(queue(&mut raw, name).await.is_empty());
    wb.finish().await;
}
