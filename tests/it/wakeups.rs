//! Lost wake-ups: a waiter registers for the release message *before* its attempt, so a release
//! that lands between the attempt and the wait is never missed (issue 10). The holder here is a
//! foreign client that set no expiry (Redis `PTTL` -1), so nothing but the message can wake a
//! waiter with no deadline: a missed message is a waiter asleep for good.
//!
//! (Checked by moving the registration after the attempt: the read-write test then loses a
//! reader in the first rounds. tokio's `notify_waiters` reaches every `Notified` created before
//! it, so what matters is creating the registration before the attempt.)
//!
//! To make the window likely, the waiters are kept cycling through attempts by a burst of
//! wake-up messages right before the real release, so at the release some of them are between
//! an attempt that saw the lock held and their next wait.

use std::time::Duration;

use crate::support::*;
use redis::AsyncCommands;

const ROUNDS: usize = 15;
const WAITERS: usize = 6;
/// Far longer than a hand-over takes; a waiter that missed the release never wakes at all.
const BOUND: Duration = Duration::from_secs(10);

async fn burst_then_release(
    raw: &mut redis::aio::MultiplexedConnection,
    key: &str,
    channel: &str,
    message: &str,
) {
    for _ in 0..200 {
        let _: i64 = raw.publish(channel, message).await.unwrap();
    }
    // The release itself: delete and publish in one step, as an unlock script does.
    let _: () =
        redis::Script::new("redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1])")
            .key(key)
            .key(channel)
            .arg(message)
            .invoke_async(raw)
            .await
            .unwrap();
}

async fn subscribed(server: &TestServer, channel: &str) {
    let ok = eventually(BOUND, || async {
        let mut raw = server.conn().await;
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(&mut raw)
            .await
            .unwrap();
        n > 0
    })
    .await;
    assert!(ok, "nobody subscribed to {channel}");
}

/// The read-write lock's wake-all (`1` wakes every reader at once, with no permit kept for a
/// reader that is not waiting yet): the case where a late registration loses the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_miss_a_writers_release() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for round in 0..ROUNDS {
        let name = format!("wake:rw:{round}");
        let channel = format!("redisson_rwlock:{{{name}}}");
        let _: () = raw.hset(&name, "mode", "write").await.unwrap();
        let _: () = raw.hset(&name, "foreign-client:1:write", 1).await.unwrap();
        let readers: Vec<_> = (0..WAITERS)
            .map(|_| {
                let lock = client.get_read_write_lock(name.clone()).read_lock();
                tokio::spawn(async move { lock.lock().await })
            })
            .collect();
        subscribed(&server, &channel).await;
        burst_then_release(&mut raw, &name, &channel, "1").await;
        for (i, r) in readers.into_iter().enumerate() {
            let guard = tokio::time::timeout(BOUND, r)
                .await
                .unwrap_or_else(|_| panic!("round {round}: reader {i} missed the release"))
                .unwrap()
                .unwrap();
            guard.unlock().await.unwrap();
        }
    }
}

/// The same for the reentrant lock (`0` wakes one waiter per client; the lock then passes from
/// waiter to waiter by their own releases).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_waiters_never_miss_a_release() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for round in 0..ROUNDS {
        let name = format!("wake:rlock:{round}");
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let _: () = raw.hset(&name, "foreign-client:1", 1).await.unwrap();
        let waiters: Vec<_> = (0..WAITERS)
            .map(|_| {
                let lock = client.get_lock(name.clone());
                tokio::spawn(async move {
                    let g = lock.lock().await?;
                    g.unlock().await
                })
            })
            .collect();
        subscribed(&server, &channel).await;
        burst_then_release(&mut raw, &name, &channel, "0").await;
        for (i, w) in waiters.into_iter().enumerate() {
            tokio::time::timeout(BOUND, w)
                .await
                .unwrap_or_else(|_| panic!("round {round}: waiter {i} missed a release"))
                .unwrap()
                .unwrap();
        }
    }
}
