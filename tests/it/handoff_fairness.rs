//! Issue 41 item 1: a client that keeps winning one lock name gives a turn away. After
//! `STREAK` grants of a name in a row, the client's next *first* tries (a new acquire, or the
//! first try after subscribing: tries no release message woke) look before they take (`PTTL`,
//! read-only): a held lock costs them no acquire script and they wait for its release message,
//! as parked waiters do; a free one they take one round trip after the waiters the release
//! woke, in this client and in others, could. The next grant to the client ends the turn
//! (`src/holds/turns.rs`).
//!
//! Counted, not timed: the server's command counts say which tries looked and which took.
//! With the turns switched off (`Engine::gives_way` answering `None`, as the code before them)
//! both tests fail: no look after the streak (0 `PTTL` calls), and the parked client's two first
//! tries sent the acquire script (2 `EVALSHA`) instead of looking.
//!
//! What this buys end to end is a race, measured rather than asserted: W3 (two processes × 4
//! tasks on one name), longest single wait 64.5 -> 16.3 ms on the 2-core host at the same
//! handoff rate (docs/benchmarks.md, "W3's longest wait"). The same race inside one test
//! process did not starve anybody before the change (a single waiter of another client against
//! one or two busy tasks through a delaying proxy got the lock after 0-3 grants).

use crate::support::*;
use redisson_lock::Client;

/// `src/holds/turns.rs`'s `STREAK`: grants of a name in a row before a client gives a turn away.
const STREAK: usize = 8;

/// `calls` of `cmdstat_<command>` since the last `CONFIG RESETSTAT` (0 when never called).
async fn calls(server: &TestServer, command: &str) -> u64 {
    let info = info(&mut server.conn().await, "commandstats").await;
    info_field(&info, &format!("cmdstat_{command}"))
        .and_then(|l| {
            l.split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .map(str::to_owned)
        })
        .map_or(0, |n| n.parse().unwrap())
}

async fn reset_stats(server: &TestServer) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut server.conn().await)
        .await
        .unwrap();
}

/// `n` lock/unlock cycles of `name` by one task of `client`.
async fn cycles(client: &Client, name: &str, n: usize) {
    let lock = client.get_lock(name);
    for _ in 0..n {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streak_of_grants_makes_the_next_first_try_look_before_it_takes() {
    let (server, client) = with_client().await;
    reset_stats(&server).await;
    cycles(&client, "turns:look", STREAK).await;
    assert_eq!(
        calls(&server, "pttl").await,
        0,
        "a streak's tries take at once"
    );
    // The turn: the next acquire looks first (the lock is free: it takes it after the look).
    cycles(&client, "turns:look", 1).await;
    assert_eq!(
        calls(&server, "pttl").await,
        1,
        "the try after a streak looks first"
    );
    // That grant ended the turn: a new streak, no look.
    cycles(&client, "turns:look", STREAK - 1).await;
    assert_eq!(
        calls(&server, "pttl").await,
        1,
        "a new streak takes at once again"
    );
    assert_eq!(calls(&server, "evalsha").await, 2 * 2 * STREAK as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_given_away_leaves_a_held_lock_to_the_waiters_and_takes_the_next_release() {
    let (server, [a, b]) = two_clients().await;
    let name = "turns:held";
    cycles(&a, name, STREAK).await;
    // The other client holds it when this client's turn comes.
    let held = b.get_lock(name).lock().await.unwrap();
    reset_stats(&server).await;
    let waiter = tokio::spawn({
        let lock = a.get_lock(name);
        async move { lock.lock().await }
    });
    let channel = format!("redisson_lock__channel:{{{name}}}");
    assert!(
        channel_subscribers(&server, &channel, 1).await,
        "A never parked"
    );
    // Parked on the release message: its first try and the first try after subscribing looked
    // (the lock held), and neither sent the acquire script. (The lock script's own `PTTL` on a
    // held lock counts as a call too, so `evalsha` is what tells a look from a try.)
    let parked = eventually(std::time::Duration::from_secs(10), || async {
        calls(&server, "pttl").await == 2
    })
    .await;
    assert!(parked, "pttl calls: {}", calls(&server, "pttl").await);
    assert_eq!(calls(&server, "evalsha").await, 0, "a try that looked took");
    // The release's message wakes it; that try takes.
    held.unlock().await.unwrap();
    let guard = waiter.await.unwrap().unwrap();
    assert_eq!(calls(&server, "pttl").await, 2);
    guard.unlock().await.unwrap();
}
