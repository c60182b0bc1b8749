//! The fair lock's per-waiter channel outlives a wait that ended with a grant for a moment
//! (issue 24 item 3): the owner's next wait within it sends no `SUBSCRIBE` and no second try
//! (it registers for the wake-up before its first try), is still woken by the release message,
//! and the channel is unsubscribed once the moment has passed.

use std::time::{Duration, Instant};

use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{Client, LockOwner};

/// Generous bound for anything event-driven (a wake-up; the holder's lease is the 30 s
/// watchdog lease, so a lost wake-up shows as a wait past this).
const WAIT: Duration = Duration::from_secs(10);
/// A second wait that starts later than this after the first grant may find the channel gone
/// (the linger is 1 s); such a pair is tried again.
const IN_TIME: Duration = Duration::from_millis(700);

fn waiter_channel(name: &str, field: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}:{field}")
}

/// One contended wait of `waiter` (owner 1) behind `holder`: the waiter queues, the holder
/// releases, the waiter is woken and takes the lock. Returns the `SUBSCRIBE` and `EVALSHA` calls
/// the round made after the holder took the lock, and when the waiter started waiting.
async fn round(
    server: &TestServer,
    holder: &Client,
    waiter: &Client,
    name: &str,
) -> (u64, u64, Instant) {
    let held = holder.get_fair_lock(name).lock().await.unwrap();
    let before = redisson::calls(server, "subscribe").await;
    let scripts = redisson::calls(server, "evalsha").await;
    let started = Instant::now();
    let lock = waiter.get_fair_lock(name).with_owner(LockOwner::new(1));
    let wait = tokio::spawn(async move { lock.lock().await });
    let mut raw = server.conn().await;
    let queued = eventually(WAIT, || {
        let mut raw = raw.clone();
        async move {
            let n: i64 = raw
                .llen(format!("redisson_lock_queue:{{{name}}}"))
                .await
                .unwrap();
            n == 1
        }
    })
    .await;
    assert!(queued, "the waiter never queued");
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(WAIT, wait)
        .await
        .expect("the waiter was not woken by the release")
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
    let _: i64 = raw.exists(name).await.unwrap();
    let after = redisson::calls(server, "subscribe").await;
    let scripts = redisson::calls(server, "evalsha").await - scripts;
    (after - before, scripts, started)
}

#[tokio::test]
async fn a_second_wait_within_the_linger_sends_no_subscribe_and_is_still_woken() {
    let (server, [holder, waiter]) = two_clients().await;
    let name = "fair:linger";
    let channel = waiter_channel(name, &field(&waiter, LockOwner::new(1)));
    let mut checked = false;
    for _ in 0..5 {
        // Let any earlier linger run out: the first wait of a pair subscribes.
        assert!(eventually(WAIT, || async { numsub_on(&server, &channel).await == 0 }).await);
        let (first, _, _) = round(&server, &holder, &waiter, name).await;
        assert!(first >= 1, "the first wait did not subscribe ({first})");
        let granted = Instant::now();
        let (second, scripts, started) = round(&server, &holder, &waiter, name).await;
        if started.duration_since(granted) > IN_TIME {
            continue; // a slow machine: this pair proves nothing either way
        }
        assert_eq!(second, 0, "the second wait subscribed again");
        // The waiter's try that queues it, the holder's unlock, the waiter's try after the
        // wake-up, its unlock: no second try after subscribing.
        assert_eq!(scripts, 4, "scripts of the second round");
        checked = true;
        break;
    }
    assert!(checked, "no pair of waits fit in {IN_TIME:?}");
    // The moment passes: the channel is given up, on the server and in the client.
    assert!(
        eventually(WAIT, || async { numsub_on(&server, &channel).await == 0 }).await,
        "{channel} still subscribed"
    );
    assert!(eventually(WAIT, || async { waiter.stats().subscribed_channels == 0 }).await);
}
