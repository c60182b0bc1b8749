//! Waiter scenarios shared by the lock and synchronizer tests: park a few waiting tasks, prove
//! they are parked from the server's side, then check that one event wakes them all.

use std::future::Future;
use std::time::Duration;

use redisson_lock::{Lock, LockKind};
use tokio::task::JoinHandle;

use super::redisson::calls;
use super::{eventually, TestServer};

/// Spawns `n` tasks running `wait()` and returns once the server has run `min_calls` calls of
/// `command` (lowercase, counted since the last `reset_stats`): each waiter tries, subscribes
/// and tries again, so the count says they are parked.
pub async fn park<T, Fut>(
    server: &TestServer,
    n: usize,
    command: &str,
    min_calls: u64,
    mut wait: impl FnMut() -> Fut,
) -> Vec<JoinHandle<T>>
where
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let waiters: Vec<_> = (0..n).map(|_| tokio::spawn(wait())).collect();
    assert!(
        eventually(Duration::from_secs(15), || async {
            calls(server, command).await >= min_calls
        })
        .await,
        "the {n} waiters did not park ({command} calls below {min_calls})"
    );
    waiters
}

/// Waits for every waiter to finish within `within`; each must have succeeded. `why` says what
/// a waiter still asleep means.
pub async fn all_woken<T, E: std::fmt::Debug>(
    waiters: Vec<JoinHandle<Result<T, E>>>,
    within: Duration,
    why: &str,
) -> Vec<T> {
    let mut out = Vec::with_capacity(waiters.len());
    for w in waiters {
        out.push(finished(w, within, why).await);
    }
    out
}

/// Waits for `task` to finish within `within` (`why` says what a timeout means); it must
/// have succeeded. Its value.
pub async fn finished<T, E: std::fmt::Debug>(
    task: JoinHandle<Result<T, E>>,
    within: Duration,
    why: &str,
) -> T {
    let joined = tokio::time::timeout(within, task).await.expect(why);
    joined.unwrap().unwrap()
}

/// Spawns `wait` and returns once `channel` has `subscribers` subscriber connections on
/// `server` (the waiter is parked on pub/sub).
pub async fn parked_on<T, Fut>(
    server: &TestServer,
    channel: &str,
    subscribers: i64,
    wait: Fut,
) -> JoinHandle<T>
where
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let waiting = tokio::spawn(wait);
    assert!(
        super::channel_subscribers(server, channel, subscribers).await,
        "the waiter never parked on {channel}"
    );
    waiting
}

/// Takes `lock` and releases it at once (warms the script cache, or shows the lock is free).
pub async fn take_and_release<K: LockKind>(lock: &Lock<K>) {
    lock.lock().await.unwrap().unlock().await.unwrap();
}

/// [`take_and_release`] with an explicit lease.
pub async fn take_and_release_with_lease<K: LockKind>(lock: &Lock<K>, lease: Duration) {
    lock.lock_with_lease(lease)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

/// `try_lock` must succeed at once (the lock is free); the hold is released again.
pub async fn free_now<K: LockKind>(lock: &Lock<K>) {
    let guard = lock.try_lock().await.unwrap().expect("the lock is free");
    guard.unlock().await.unwrap();
}

/// The cancelled-wait scenario: `wait` parks on `channel` (subscribed), then its task is
/// aborted; the channel must be unsubscribed and `client` left with no subscribed channel.
pub async fn cancelled_wait_unsubscribes<T, Fut>(
    server: &TestServer,
    client: &redisson_lock::Client,
    channel: &str,
    wait: Fut,
) where
    Fut: Future<Output = T> + Send + 'static,
    T: std::fmt::Debug + Send + 'static,
{
    let waiting = parked_on(server, channel, 1, wait).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert!(
        super::channel_subscribers(server, channel, 0).await,
        "left subscribed"
    );
    assert_eq!(client.stats().subscribed_channels, 0);
}
