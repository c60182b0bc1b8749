//! `Semaphore` (Redisson's `RSemaphore`): the API, wake-ups by another client's release (ours
//! and Java's), the data and messages a Java client sees, bad input, cancellation and faults.

use std::time::Duration;

use crate::support::redisson::{self, eval, java_sem, reset_stats};
use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::LockError;

/// Generous bound for anything event-driven, including a reconnect. Shorter than the
/// semaphore's 30 s re-check, so a waiter that is not woken by the message fails the test.
const WAIT: Duration = Duration::from_secs(15);

async fn receipts(raw: &mut MultiplexedConnection) -> Vec<String> {
    raw.keys("redisson_semaphore_latch:*").await.unwrap()
}

/// Asserts that every request receipt is deleted in time (they go in a batch after the reply).
async fn assert_receipts_gone(server: &TestServer) {
    let gone = eventually(WAIT, || async {
        receipts(&mut server.conn().await).await.is_empty()
    })
    .await;
    assert!(gone, "{:?}", receipts(&mut server.conn().await).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_set_taken_released_drained_and_added() {
    let name = "sem:api";
    let (server, client, mut raw) = fixture().await;
    let sem = client.get_semaphore(name);

    assert_eq!(sem.available_permits().await.unwrap(), 0);
    // Zero permits: done at once, nothing written (as Redisson).
    assert!(sem.try_acquire_many(0).await.unwrap());
    sem.release_many(0).await.unwrap();
    assert!(!exists(&mut raw, name).await);
    // A missing semaphore has no permits to take.
    assert!(!sem.try_acquire().await.unwrap());

    assert!(sem.try_set_permits(3).await.unwrap());
    assert!(!sem.try_set_permits(7).await.unwrap(), "set only once");
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("3"));
    assert!(sem.try_acquire_many(2).await.unwrap());
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert!(!sem
        .try_acquire_many_for(2, Duration::from_millis(50))
        .await
        .unwrap());
    assert_eq!(
        sem.available_permits().await.unwrap(),
        1,
        "a failed try takes nothing"
    );
    sem.acquire().await.unwrap();
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
    sem.release_many(3).await.unwrap();
    assert_eq!(sem.drain_permits().await.unwrap(), 3);
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
    sem.add_permits(-2).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), -2);
    sem.add_permits(5).await.unwrap();
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("3"));
    assert!(sem.delete().await.unwrap());
    assert!(!exists(&mut raw, name).await);
    assert_receipts_gone(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_changes_nothing() {
    let name = "sem:bad";
    let (server, client, mut raw, sem) = semaphore_fixture(name, 2).await;
    let mut messages = Listener::start(&server, &redisson::sem_channel(name)).await;
    let too_many = i32::MAX as u32 + 1;

    let e = sem.release_many(too_many).await.unwrap_err();
    assert!(matches!(e, LockError::InvalidArgument(_)), "{e:?}");
    let e = sem.try_acquire_many(too_many).await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    let e = sem.acquire_many(u32::MAX).await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    let e = client
        .get_semaphore("")
        .try_set_permits(1)
        .await
        .unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");

    // A key of another type: WRONGTYPE, nothing written.
    let _: () = raw.hset("sem:hash", "f", 1).await.unwrap();
    let e = client
        .get_semaphore("sem:hash")
        .try_acquire()
        .await
        .unwrap_err();
    assert!(e.is_wrong_type(), "{e:?}");

    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("2"));
    sem.release().await.unwrap();
    // The only message is the valid release's.
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("3"));
    assert!(messages.drain().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_another_clients_release() {
    let (server, [waiter_client, releaser]) = two_clients().await;
    let name = "sem:wake";
    let sem = waiter_client.get_semaphore(name);
    sem.try_set_permits(0).await.unwrap();

    // One permit is not enough: the waiter tries again and keeps waiting for the second.
    let releases = async {
        releaser.get_semaphore(name).release().await.unwrap();
        releaser.get_semaphore(name).release().await.unwrap();
    };
    let channel = redisson::sem_channel(name);
    let waiting = async move { sem.acquire_many(2).await };
    woken_by_release(&server, &channel, WAIT, waiting, releases).await;
    let mut raw = server.conn().await;
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_as_many_waiters_as_it_frees_permits() {
    let (server, client) = with_client().await;
    let name = "sem:wake-many";
    let sem = client.get_semaphore(name);
    sem.try_set_permits(0).await.unwrap();
    // Load the acquire script, then count its runs from zero.
    assert!(!sem.try_acquire().await.unwrap());
    let mut raw = server.conn().await;
    reset_stats(&server).await;
    // Three local waiters share one subscription. Each tries once, subscribes, registers for
    // wake-ups and tries again: after six tries all three are parked.
    let waiters = park(&server, 3, "evalsha", 6, || {
        let sem = sem.clone();
        async move { sem.acquire().await }
    })
    .await;
    let channel = redisson::sem_channel(name);
    assert!(channel_subscribers(&server, &channel, 1).await);
    // A Java client's release of 3 (its own script): one message `3` wakes all three.
    java_sem(&mut raw, redisson::SEM_RELEASE, name, &["3"]).await;
    all_woken(waiters, WAIT, "a waiter was not woken by the Java release").await;
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_read_and_write_the_same_layout() {
    let name = "sem:java";
    let (server, client, mut raw) = fixture().await;
    let channel = redisson::sem_channel(name);
    let sem = client.get_semaphore(name);
    let mut messages = Listener::start(&server, &channel).await;

    // Ours sets, Java's script sees the count and takes from it.
    assert!(sem.try_set_permits(5).await.unwrap());
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("5"));
    assert_eq!(key_type(&mut raw, name).await, "string");
    assert_eq!(pttl(&mut raw, name).await, -1);
    let took = eval(&mut raw, redisson::SEM_TRY_ACQUIRE, &[name], &["3"]).await;
    assert_eq!(took, redis::Value::Int(1));
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    // Java refuses when we say there are too few, and vice versa.
    let took = eval(&mut raw, redisson::SEM_TRY_ACQUIRE, &[name], &["3"]).await;
    assert_eq!(took, redis::Value::Int(0));
    // Java releases: its message is the new count, and we read its data.
    java_sem(&mut raw, redisson::SEM_RELEASE, name, &["1"]).await;
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("3"));
    assert_eq!(sem.available_permits().await.unwrap(), 3);
    // Our release publishes what Java's does: the new count.
    sem.release_many(2).await.unwrap();
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("5"));
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("5"));
    // Our add_permits leaves what Java's addPermits leaves, and publishes the same.
    sem.add_permits(-1).await.unwrap();
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("4"));
    java_sem(&mut raw, redisson::SEM_ADD, name, &["-1"]).await;
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("3"));
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("3"));
    // Drain: both set 0 and return the old count; no message.
    assert_eq!(sem.drain_permits().await.unwrap(), 3);
    sem.release_many(2).await.unwrap();
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("2"));
    let old = eval(&mut raw, redisson::SEM_DRAIN, &[name], &[]).await;
    assert_eq!(old, redis::Value::BulkString(b"2".to_vec()));
    // Java's trySetPermits on an existing semaphore: refused, as ours.
    let set = java_sem(&mut raw, redisson::SEM_TRY_SET, name, &["9"]).await;
    assert_eq!(set, redis::Value::Int(0));
    assert!(!sem.try_set_permits(9).await.unwrap());
    assert!(messages.drain().is_empty(), "no other message");
    // Nothing of ours is left beside Redisson's key.
    assert_receipts_gone(&server).await;
    let all: Vec<String> = raw.keys("*").await.unwrap();
    assert_eq!(all, vec![name.to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_nothing_behind() {
    let name = "sem:cancel-wait";
    let (server, client, mut raw, sem) = semaphore_fixture(name, 0).await;
    let s = sem.clone();
    let channel = redisson::sem_channel(name);
    cancelled_wait_unsubscribes(&server, &client, &channel, async move { s.acquire().await }).await;
    // Nothing was taken: one release makes one permit.
    sem.release().await.unwrap();
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("1"));
}

/// The acquire script is held in flight (writes paused) and its caller dropped: when the script
/// runs, the permit it takes must come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_taken_for_a_dropped_acquire_are_given_back() {
    let name = "sem:cancel-flight";
    let (server, _client, mut raw, sem) = semaphore_fixture(name, 2).await;
    let mut messages = Listener::start(&server, &redisson::sem_channel(name)).await;

    pause_writes(&mut raw, 1_000).await;
    let s = sem.clone();
    let acquiring = tokio::spawn(async move { s.acquire_many(2).await });
    // Drop it once its script is parked on the server.
    assert!(
        script_parked(&server).await,
        "the acquire never reached the server"
    );
    acquiring.abort();
    assert!(writes_resumed(&server, WAIT).await);
    // The script took both permits, then the give-back returned them and said so.
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("2"));
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("2"));
    assert_receipts_gone(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_survives_a_subscriber_kill_and_a_server_restart() {
    let name = "sem:faults";
    let (mut server, client, _raw, sem) = semaphore_fixture(name, 0).await;
    let channel = redisson::sem_channel(name);

    // Subscriber connection killed: the waiter is resubscribed and woken by a later release.
    let s = sem.clone();
    let waiting = parked_on(&server, &channel, 1, async move { s.acquire().await }).await;
    kill_and_resubscribe(&server, &client, &channel).await;
    let other = server.client().await;
    other.get_semaphore(name).release().await.unwrap();
    finished(
        waiting,
        WAIT,
        "waiter not woken after the subscriber came back",
    )
    .await;

    // Server restarted empty: the waiter reconnects and takes the permits set afterwards.
    let s = sem.clone();
    let waiting = parked_on(&server, &channel, 1, async move { s.acquire().await }).await;
    tokio::task::block_in_place(|| server.restart());
    assert!(
        channel_subscribers(&server, &channel, 1).await,
        "not resubscribed after the restart"
    );
    let other = server.client().await;
    assert!(other.get_semaphore(name).try_set_permits(1).await.unwrap());
    finished(waiting, WAIT, "waiter not woken after the restart").await;
    let mut raw = server.conn().await;
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
}

/// All three synchronizers on a real cluster (one cluster for the three: forming it is the slow
/// part): names whose channel or timeout key Redisson's rules put in another slot are refused
/// before anything is sent, and waiters are woken across clients by sharded pub/sub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronizers_on_a_cluster() {
    use crate::support::cluster::TestCluster;
    use redisson_lock::{Client, Config};

    let cluster = TestCluster::start(0);
    let a = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let b = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    assert!(a.is_sharded_pubsub(), "Redis 7+: SPUBLISH/SSUBSCRIBE");
    let mut raw = redis::cluster::ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();

    for name in SPLIT_NAMES {
        let sem = a.get_semaphore(name);
        assert_invalid(sem.try_set_permits(1).await, name);
        assert_invalid(sem.release().await, name);
        let pes = a.get_permit_expirable_semaphore(name);
        assert_invalid(pes.try_set_permits(1).await, name);
        assert_invalid(pes.available_permits().await, name);
        let exists: bool = raw.exists(name).await.unwrap();
        assert!(!exists, "{name} written");
    }
    // The latch's channel always wraps the whole name in braces, so any name with braces (even a
    // proper hash tag) splits from its channel: Java's own count-down would fail with CROSSSLOT.
    for name in ["{a}b", "{tag}:latch", "x{}y{z}"] {
        let latch = a.get_count_down_latch(name);
        assert_invalid(latch.try_set_count(1).await, name);
        assert_invalid(latch.count_down().await, name);
        let exists: bool = raw.exists(name).await.unwrap();
        assert!(!exists, "{name} written");
    }

    // Semaphore: b waits, a releases.
    let sem = a.get_semaphore("cl-sem");
    assert!(sem.try_set_permits(0).await.unwrap());
    let waiting_sem = b.get_semaphore("cl-sem");
    let waiter = tokio::spawn(async move { waiting_sem.acquire().await });
    assert!(eventually(WAIT, || async { b.stats().subscribed_channels == 1 }).await);
    sem.release().await.unwrap();
    finished(waiter, WAIT, "semaphore waiter not woken by SPUBLISH").await;

    // Count-down latch: b waits, a counts down to zero.
    let latch = a.get_count_down_latch("cl-latch");
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting_latch = b.get_count_down_latch("cl-latch");
    let waiter = tokio::spawn(async move { waiting_latch.wait().await });
    assert!(eventually(WAIT, || async { b.stats().subscribed_channels == 1 }).await);
    latch.count_down().await.unwrap();
    finished(waiter, WAIT, "latch waiter not woken by SPUBLISH").await;

    // Permit-expirable semaphore (a hash-tagged name): b waits, a releases its permit.
    let pes = a.get_permit_expirable_semaphore("{cl}:pes");
    assert!(pes.try_set_permits(1).await.unwrap());
    let id = pes.acquire().await.unwrap();
    let waiting_pes = b.get_permit_expirable_semaphore("{cl}:pes");
    let waiter = tokio::spawn(async move { waiting_pes.acquire().await });
    assert!(eventually(WAIT, || async { b.stats().subscribed_channels == 1 }).await);
    pes.release(&id).await.unwrap();
    let got = finished(waiter, WAIT, "permit waiter not woken by SPUBLISH").await;
    assert_ne!(got, id);
    assert_eq!(pes.available_permits().await.unwrap(), 0);
}

/// Deterministic lost wake-up check (the proxy of `wakeups.rs`): three waiters' acquire scripts
/// in the wait loop have run (no permit), and their replies are held back while a release of 3
/// reaches the subscriber. The message wakes up to three registered waiters (`notify_one`
/// keeps at most one permit for a waiter not registered yet), so waiters that registered only
/// after their try would sleep to the 30 s re-check: the bound here is 25 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_between_the_try_and_the_wait_is_not_missed() {
    use crate::wakeups::windowed_script;
    let (server, _proxy, client, mut raw) =
        windowed_script(include_str!("../../lua/semaphore_acquire.lua")).await;
    let name = "sem:window";
    let _: () = raw.set(name, 0).await.unwrap();
    reset_stats(&server).await;
    // Each: a try, a subscription, then the wait loop's first try.
    let waiters = park(&server, 3, "evalsha", 6, || {
        let sem = client.get_semaphore(name);
        async move { sem.acquire().await }
    })
    .await;
    java_sem(&mut raw, redisson::SEM_RELEASE, name, &["3"]).await;
    all_woken(
        waiters,
        Duration::from_secs(25),
        "a waiter slept through the release: it registered after its try",
    )
    .await;
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
}
