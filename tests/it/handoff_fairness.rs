//! Issue 41 item 1: a client that keeps winning one lock name gives a turn away. After
//! `STREAK` grants of a name in a row that followed contention (a try of the client found it
//! held since the client's last grant), the client's next *first* tries (a new acquire, or the
//! first try after subscribing: tries no release message woke) look before they take (`PTTL`,
//! read-only): a held lock costs them no acquire script and they wait for its release message,
//! as parked waiters do; a free one they take one round trip after the waiters the release
//! woke, in this client and in others, could. The next grant to the client ends the turn
//! (`src/holds/turns.rs`). A name one task takes alone never looks.
//!
//! Counted, not timed: the server's command counts say which tries looked and which took.
//! With the turns switched off (`Engine::gives_way` answering `None`, as the code before them)
//! the two turn tests fail (every try sends its script); the first version of the turns, which
//! counted every grant, failed `a_name_taken_by_one_task_alone_never_looks` (it looked once per
//! `STREAK` acquires, a cost W2 showed).
//!
//! What this buys end to end is a race, measured rather than asserted: W3 (two processes × 4
//! tasks on one name) on the 2-core host, longest single wait 64.5 -> 16.3 ms at the same
//! handoff rate in one quiet pair, smaller gains in noisier rounds (docs/benchmarks.md, "W3's
//! longest wait"). The race does not reproduce inside one test process: before the change a
//! single waiter of another client against one or two busy tasks (through a delaying proxy, or
//! not) got the lock after 0-7 grants, and four busy tasks per client gave longest waits of
//! 96-160 grants with and without the change.

use crate::support::*;
use redisson_lock::{Client, Lock, LockKind};

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

/// `n` lock/unlock cycles of `name` by one task of `client`, nobody else asking.
async fn cycles(client: &Client, name: &str, n: usize) {
    let lock = client.get_lock(name);
    for _ in 0..n {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
}

/// `n` lock/unlock cycles of the lock `handle` gives by one task, another task trying it (and
/// finding it held, or looking) while it is held.
async fn contended_cycles_of<K: LockKind>(handle: impl Fn() -> Lock<K>, n: usize) {
    let lock = handle();
    for _ in 0..n {
        let guard = lock.lock().await.unwrap();
        let other = handle();
        let tried = tokio::spawn(async move { other.try_lock().await.unwrap().is_none() });
        assert!(tried.await.unwrap(), "the other task took a held lock");
        guard.unlock().await.unwrap();
    }
}

/// [`contended_cycles_of`] the RLock `name`.
async fn contended_cycles(client: &Client, name: &str, n: usize) {
    contended_cycles_of(|| client.get_lock(name), n).await;
}

/// The streak and the turn, counted in scripts, on the lock `handle` gives.
async fn streak_then_turn<K: LockKind>(server: &TestServer, handle: impl Fn() -> Lock<K>) {
    reset_stats(server).await;
    // The first grant follows no contention; the next `STREAK` do: the last of them gives the
    // turn away, and the other task's try in that cycle already looks (held: no script).
    contended_cycles_of(&handle, STREAK + 1).await;
    let scripts = 2 * (STREAK as u64 + 1) + STREAK as u64;
    assert_eq!(
        calls(server, "evalsha").await,
        scripts,
        "a try looked too early or not"
    );
    // The turn: the next acquire looks first (free: it takes it after the look), and its grant
    // ends the turn; the next try of the other task runs its script again.
    contended_cycles_of(&handle, 1).await;
    assert_eq!(calls(server, "evalsha").await, scripts + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_streak_makes_the_next_first_try_look_before_it_takes() {
    let (server, client) = with_client().await;
    streak_then_turn(&server, || client.get_lock("turns:look")).await;
}

/// The write side of a read-write lock takes turns as the RLock does: local writers that keep
/// winning let the readers and writers that a release woke (here and in other processes) have
/// the next grant. The read side never looks (readers share).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_lock_takes_turns_too() {
    let (server, client) = with_client().await;
    let rw = client.get_read_write_lock("turns:write");
    streak_then_turn(&server, || rw.write_lock()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_taken_by_one_task_alone_never_looks() {
    let (server, client) = with_client().await;
    reset_stats(&server).await;
    cycles(&client, "turns:alone", 4 * STREAK).await;
    // No contention, no turn: W1 and W2's loops pay nothing.
    assert_eq!(calls(&server, "pttl").await, 0);
    assert_eq!(calls(&server, "evalsha").await, 8 * STREAK as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_given_away_leaves_a_held_lock_to_the_waiters_and_takes_the_next_release() {
    let (server, [a, b]) = two_clients().await;
    let name = "turns:held";
    contended_cycles(&a, name, STREAK + 1).await;
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
