//! Driver helpers for the second part of the Java tier (issue 20, part 2): peers on any
//! topology, killing a peer's JVM, the fair lock's queue, and parking probes that count the
//! scripts a waiter ran.

use std::time::Duration;

use redis::AsyncCommands;

use super::{peer_versions, JavaPeer, PeerTarget};
use crate::support::redisson::{calls, tagged};
use crate::support::{eventually, TestServer};

/// Starts one peer per pinned Redisson version against `target`, concurrently, in
/// [`peer_versions`] order.
pub async fn peers_on(target: PeerTarget, watchdog: Option<Duration>) -> Vec<JavaPeer> {
    let starts = peer_versions()
        .into_iter()
        .map(|v| {
            let target = target.clone();
            tokio::spawn(async move { JavaPeer::start(&v, target, watchdog).await })
        })
        .collect::<Vec<_>>();
    let mut peers = Vec::new();
    for s in starts {
        peers.push(s.await.expect("peer start-up panicked"));
    }
    peers
}

impl JavaPeer {
    /// Kills the JVM (SIGKILL) and waits until it is gone: whatever it had in Redis stays
    /// there, as after a crash.
    pub async fn kill(mut self) {
        self._child.kill().await.expect("kill the peer JVM");
    }
}

/// The fair lock's queue key: `redisson_lock_queue:{name}`.
pub fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{}", tagged(name))
}

/// The fair lock's deadlines: `redisson_lock_timeout:{name}`.
pub fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{}", tagged(name))
}

/// The fair lock's per-waiter channel of owner field `field`.
pub fn waiter_channel(name: &str, field: &str) -> String {
    format!("redisson_lock__channel:{}:{field}", tagged(name))
}

/// The read-write lock's channel: `redisson_rwlock:{name}`.
pub fn rw_channel(name: &str) -> String {
    format!("redisson_rwlock:{}", tagged(name))
}

/// The fair lock's queue, head first (`LRANGE`).
pub async fn queue(server: &TestServer, name: &str) -> Vec<String> {
    let mut raw = server.conn().await;
    raw.lrange(queue_key(name), 0, -1).await.unwrap()
}

/// A waiter's deadline in the fair lock's ZSET (epoch ms), if it has one.
pub async fn deadline(server: &TestServer, name: &str, field: &str) -> Option<i64> {
    let mut raw = server.conn().await;
    raw.zscore(timeout_key(name), field).await.unwrap()
}

/// Waits (generously) until the fair lock's queue is exactly `expected`, head first.
pub async fn queue_is(server: &TestServer, name: &str, expected: &[String]) {
    let ok = eventually(Duration::from_secs(30), || async {
        queue(server, name).await == expected
    })
    .await;
    assert!(
        ok,
        "the queue of {name} is {:?}, not {expected:?}",
        queue(server, name).await
    );
}

/// Calls of any of `commands` (lowercase) the server ran since the last `CONFIG RESETSTAT`.
pub async fn calls_of(server: &TestServer, commands: &[&str]) -> u64 {
    let mut n = 0;
    for c in commands {
        n += calls(server, c).await;
    }
    n
}

/// Waits until the server has run at least `n` calls of `commands` since the last reset:
/// `n / 2` waiters that each try, subscribe and try again have all made their second try (they
/// are parked).
pub async fn calls_at_least(server: &TestServer, commands: &[&str], n: u64, what: &str) {
    let ok = eventually(Duration::from_secs(30), || async {
        calls_of(server, commands).await >= n
    })
    .await;
    assert!(
        ok,
        "{what}: only {} calls of {commands:?}, {n} expected (the waiters did not park)",
        calls_of(server, commands).await
    );
}

/// Lock scripts: `EVALSHA` and `EVAL` (Redisson sends either, depending on its script cache).
pub const SCRIPTS: [&str; 2] = ["evalsha", "eval"];

/// [`calls_at_least`] of lock scripts. Warm the script cache first (one call of each script
/// the waiters run): a `NOSCRIPT` round counts too.
pub async fn scripts_at_least(server: &TestServer, n: u64, what: &str) {
    calls_at_least(server, &SCRIPTS, n, what).await
}

/// Waits until Java owner `owner` sleeps on Redisson's wake-up latch (its thread's stack, from
/// the peer's `frames` op, has `Semaphore.tryAcquire`), not on a reply. Redisson's
/// `READ_UNLOCK_MESSAGE` wakes only the threads already queued on that latch
/// (`release(getQueueLength())`): a reader still on its way there when the message comes sleeps
/// on, in Java as in this test, so the test waits for all of them to be there first.
pub async fn parked_on_latch(peer: &JavaPeer, owner: &str, what: &str) {
    let ok = eventually(Duration::from_secs(30), || async {
        latch_frame(&peer.ok("probe", &format!("frames {owner}")).await)
    })
    .await;
    assert!(
        ok,
        "{what}: Java owner {owner} never parked on Redisson's latch; its stack: {}",
        peer.ok("probe", &format!("frames {owner}")).await
    );
}

/// Whether a `frames` reply shows a thread parked on Redisson's latch.
fn latch_frame(frames: &str) -> bool {
    frames.split(',').any(|f| f == "Semaphore.tryAcquire")
}
