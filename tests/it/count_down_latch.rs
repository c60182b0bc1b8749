//! `CountDownLatch` (Redisson's `RCountDownLatch`): the API, the zero message waking every
//! waiter (ours and from Java's script), the layout a Java client sees, bad input,
//! cancellation and faults.

use std::time::Duration;

use crate::support::redisson::{self, java_latch, latch_channel, reset_stats};
use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::LockError;

/// Generous bound for anything event-driven; shorter than the 30 s re-check, so a waiter that
/// the message does not wake fails the test.
const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_down_to_an_open_latch() {
    let name = "latch:api";
    let (_server, client, mut raw) = fixture().await;
    let latch = client.get_count_down_latch(name);

    // A latch that does not exist is open.
    assert_eq!(latch.get_count().await.unwrap(), 0);
    latch.wait().await.unwrap();
    assert!(latch.wait_for(Duration::ZERO).await.unwrap());

    assert!(latch.try_set_count(2).await.unwrap());
    assert!(!latch.try_set_count(5).await.unwrap(), "armed once");
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("2"));
    assert_eq!(pttl(&mut raw, name).await, -1);
    latch.count_down().await.unwrap();
    assert_eq!(latch.get_count().await.unwrap(), 1);
    assert!(!latch.wait_for(Duration::from_millis(50)).await.unwrap());
    latch.count_down().await.unwrap();
    assert!(!exists(&mut raw, name).await, "deleted at zero");
    assert!(latch.wait_for(Duration::from_millis(50)).await.unwrap());
    // Counting down a missing latch leaves nothing.
    latch.count_down().await.unwrap();
    assert!(!exists(&mut raw, name).await);

    // Zero is a valid count: stored, and open.
    assert!(latch.try_set_count(0).await.unwrap());
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
    latch.wait().await.unwrap();
    assert!(latch.delete().await.unwrap());
    assert!(!latch.delete().await.unwrap());
    assert!(!exists(&mut raw, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_changes_nothing() {
    let name = "latch:bad";
    let (server, client, mut raw) = fixture().await;
    let latch = client.get_count_down_latch(name);
    let mut messages = Listener::start(&server, &latch_channel(name)).await;

    let e = latch.try_set_count(-1).await.unwrap_err();
    assert!(matches!(e, LockError::InvalidArgument(_)), "{e:?}");
    assert!(!exists(&mut raw, name).await);
    let e = client
        .get_count_down_latch("")
        .try_set_count(1)
        .await
        .unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    // Armed, then refused again: the count stays.
    assert!(latch.try_set_count(3).await.unwrap());
    let e = latch.try_set_count(i64::MIN).await.unwrap_err();
    assert!(e.is_invalid_argument());
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("3"));
    // The only message is the valid arming's `1`.
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("1"));
    assert!(messages.next(Duration::from_millis(100)).await.is_none());
    // A key of another type: WRONGTYPE.
    let _: () = raw.hset("latch:hash", "f", 1).await.unwrap();
    let e = client
        .get_count_down_latch("latch:hash")
        .get_count()
        .await
        .unwrap_err();
    assert!(e.is_wrong_type(), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zero_message_wakes_every_waiter() {
    let (server, [client, other]) = two_clients().await;
    let name = "latch:wake-all";
    let latch = client.get_count_down_latch(name);
    assert!(latch.try_set_count(2).await.unwrap());
    reset_stats(&server).await;

    // Each waiter reads the count, subscribes, registers for wake-ups and reads again: after
    // eight reads all four (three of this client, one of another) are parked.
    let mut i = 0;
    let waiters = park(&server, 4, "get", 8, || {
        i += 1;
        let l = if i < 4 {
            latch.clone()
        } else {
            other.get_count_down_latch(name)
        };
        async move { l.wait().await }
    })
    .await;
    assert!(channel_subscribers(&server, &latch_channel(name), 2).await);
    latch.count_down().await.unwrap();
    // Java's count-down (its own script) takes it to zero and publishes `0`.
    let mut raw = server.conn().await;
    let channel = latch_channel(name);
    java_latch(&mut raw, redisson::LATCH_COUNT_DOWN, name, &["0"]).await;
    all_woken(waiters, WAIT, "a waiter was not woken by the zero message").await;
    assert!(
        channel_subscribers(&server, &channel, 0).await,
        "still subscribed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_read_and_write_the_same_layout() {
    let name = "latch:java";
    let (server, client, mut raw) = fixture().await;
    let channel = latch_channel(name);
    let latch = client.get_count_down_latch(name);
    let mut messages = Listener::start(&server, &channel).await;

    // Ours arms: Java's data and message.
    assert!(latch.try_set_count(2).await.unwrap());
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("1"));
    assert_eq!(key_type(&mut raw, name).await, "string");
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("2"));
    // Java's trySetCount on an armed latch: refused.
    let set = java_latch(&mut raw, redisson::LATCH_TRY_SET, name, &["1", "7"]).await;
    assert_eq!(set, redis::Value::Int(0));
    // Java counts down once, we count down to zero: deleted, `0` published once.
    java_latch(&mut raw, redisson::LATCH_COUNT_DOWN, name, &["0"]).await;
    assert_eq!(latch.get_count().await.unwrap(), 1);
    latch.count_down().await.unwrap();
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("0"));
    assert!(!exists(&mut raw, name).await);

    // Java arms, we read and count down.
    let set = java_latch(&mut raw, redisson::LATCH_TRY_SET, name, &["1", "1"]).await;
    assert_eq!(set, redis::Value::Int(1));
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("1"));
    assert!(!latch.try_set_count(4).await.unwrap());
    assert_eq!(latch.get_count().await.unwrap(), 1);
    // Our delete: `1`, as Java's; Java's delete then finds nothing.
    assert!(latch.delete().await.unwrap());
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("1"));
    let del = java_latch(&mut raw, redisson::LATCH_DELETE, name, &["1"]).await;
    assert_eq!(del, redis::Value::Int(0));
    assert!(messages.next(Duration::from_millis(100)).await.is_none());
    let all: Vec<String> = raw.keys("*").await.unwrap();
    assert!(all.is_empty(), "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_nothing_behind() {
    let name = "latch:cancel";
    let (server, client, mut raw, latch) = latch_fixture(name, 1).await;
    let l = latch.clone();
    let channel = latch_channel(name);
    cancelled_wait_unsubscribes(&server, &client, &channel, async move { l.wait().await }).await;
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_survives_a_subscriber_kill_and_a_server_restart() {
    let name = "latch:faults";
    let (mut server, client, _raw, latch) = latch_fixture(name, 1).await;
    let channel = latch_channel(name);

    // Subscriber killed: resubscribed, then woken by the count-down's `0`.
    let l = latch.clone();
    let waiting = parked_on(&server, &channel, 1, async move { l.wait().await }).await;
    kill_and_resubscribe(&server, &client, &channel).await;
    let other = server.client().await;
    other.get_count_down_latch(name).count_down().await.unwrap();
    finished(
        waiting,
        WAIT,
        "waiter not woken after the subscriber came back",
    )
    .await;

    // Server restarted empty: the latch is gone, so it is open; the reconnect wakes the waiter.
    latch.try_set_count(1).await.unwrap();
    let l = latch.clone();
    let waiting = parked_on(&server, &channel, 1, async move { l.wait().await }).await;
    tokio::task::block_in_place(|| server.restart());
    finished(waiting, WAIT, "waiter not woken after the restart").await;
}

/// Deterministic lost wake-up check (the proxy of `wakeups.rs`): three waiters' count reads
/// (`GET`) in the wait loop have run on the server, and their replies (count 1) are held back
/// while the count-down's `0` reaches the subscriber. `0` wakes the waiters registered at that
/// moment (`notify_waiters` keeps no permit), so a waiter that registered only after its read
/// would sleep to the 30 s re-check: the bound here is 25 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_between_the_read_and_the_wait_is_not_missed() {
    use crate::wakeups::windowed;
    // Only the command connection sends GET (the subscriber sends SUBSCRIBE).
    let (server, _proxy, client, mut raw) = windowed(b"$3\r\nGET\r\n".to_vec(), None).await;
    let name = "latch:window";
    let _: () = raw.set(name, 1).await.unwrap();
    reset_stats(&server).await;
    // Each: a read, a subscription, then the wait loop's first read.
    let waiters = park(&server, 3, "get", 6, || {
        let latch = client.get_count_down_latch(name);
        async move { latch.wait().await }
    })
    .await;
    java_latch(&mut raw, redisson::LATCH_COUNT_DOWN, name, &["0"]).await;
    all_woken(
        waiters,
        Duration::from_secs(25),
        "a waiter slept through the zero message: it registered after its read",
    )
    .await;
}
