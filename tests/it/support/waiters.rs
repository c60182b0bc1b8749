//! Waiter scenarios shared by the lock and synchronizer tests: park a few waiting tasks, prove
//! they are parked from the server's side, then check that one event wakes them all.

use std::future::Future;
use std::time::Duration;

use redisson_lock::{Lock, LockGuard, LockKind};
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

/// The wake-by-another-client's-release scenario: `wait` parks on `channel` (one subscriber),
/// `release` (another client's) must wake it within `within`, and `channel` is left with no
/// subscriber. The waiter's result.
pub async fn woken_by_release<T, E, W, R>(
    server: &TestServer,
    channel: &str,
    within: Duration,
    wait: W,
    release: R,
) -> T
where
    W: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: std::fmt::Debug + Send + 'static,
    R: Future<Output = ()>,
{
    let waiting = parked_on(server, channel, 1, wait).await;
    release.await;
    let got = finished(waiting, within, "waiter not woken by the release").await;
    assert!(
        super::channel_subscribers(server, channel, 0).await,
        "still subscribed to {channel}"
    );
    got
}

/// A hold of `lock` and its re-entry by the same owner, through the outer guard (the default
/// owner is refused a plain second `lock()`): `(outer, inner)`.
pub async fn held_twice<K: LockKind>(lock: &Lock<K>) -> (LockGuard<K>, LockGuard<K>) {
    let outer = lock.lock().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    (outer, inner)
}

/// Takes `lock` and releases it at once (warms the script cache, or shows the lock is free).
pub async fn take_and_release<K: LockKind>(lock: &Lock<K>) {
    lock.lock().await.unwrap().unlock().await.unwrap();
}

/// Takes `lock` with a one-minute lease: in a test it is held until released (or lost), and a
/// waiter woken in time was woken by the release, not by the expiry.
pub async fn held_for_a_minute<K: LockKind>(lock: &Lock<K>) -> LockGuard<K> {
    lock.lock_with_lease(Duration::from_secs(60)).await.unwrap()
}

/// `lock` taken within `within` (whatever holds it must let go by then); `why` says what a miss
/// means.
pub async fn taken_within<K: LockKind>(
    lock: &Lock<K>,
    within: Duration,
    why: &str,
) -> LockGuard<K> {
    lock.try_lock_for(within).await.unwrap().expect(why)
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

/// A task waiting up to a minute for `lock` (of `client`), returned once `client` has
/// subscribed to its channel (the waiter is parked on pub/sub).
pub async fn parked_minute_waiter(
    client: &redisson_lock::Client,
    lock: redisson_lock::RLock,
) -> JoinHandle<Result<Option<redisson_lock::RLockGuard>, redisson_lock::LockError>> {
    let waiter = tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(60)).await });
    assert!(super::subscribed(client, 1).await);
    waiter
}

/// A task that waits for `lock` and keeps the hold it gets (its guard detached); the task
/// returns the hold's owner.
pub fn spawn_keeping_waiter<K: LockKind>(lock: Lock<K>) -> JoinHandle<redisson_lock::LockOwner>
where
    Lock<K>: Send + 'static,
{
    tokio::spawn(async move {
        let g = lock.lock().await.unwrap();
        let owner = g.owner();
        g.detach();
        owner
    })
}

/// Asserts that `owner` of `client` is the only holder of the lock `name` (count 1), then
/// releases that hold owner-style: the key must be gone.
pub async fn release_sole_hold(
    raw: &mut redis::aio::MultiplexedConnection,
    client: &redisson_lock::Client,
    name: &str,
    owner: redisson_lock::LockOwner,
) {
    assert_eq!(
        super::fields(raw, name).await,
        std::collections::HashMap::from([(super::field(client, owner), 1)])
    );
    client
        .get_lock(name)
        .with_owner(owner)
        .unlock()
        .await
        .unwrap();
    assert!(!super::exists(raw, name).await);
}

/// `try_lock` once; a hold it takes is detached (kept on the server, not released on drop).
/// Whether it took one.
pub async fn try_lock_detached<K: LockKind>(
    lock: &Lock<K>,
) -> Result<bool, redisson_lock::LockError> {
    Ok(lock.try_lock().await?.map(|g| g.detach()).is_some())
}

/// Asserts that `lock` refuses a zero lease as an invalid argument, both waiting
/// (`lock_with_lease`) and bounded by `wait` (`try_lock_with_lease`).
pub async fn assert_zero_lease_refused<K: LockKind>(lock: &Lock<K>, wait: Duration) {
    assert_invalid(
        lock.lock_with_lease(Duration::ZERO).await,
        "lock_with_lease(0)",
    );
    assert_invalid(
        lock.try_lock_with_lease(wait, Duration::ZERO).await,
        "try_lock_with_lease(_, 0)",
    );
}

/// Asserts that `lock` is excluded by a foreign holder of its key: `try_lock` takes nothing, the
/// lock reads as locked but not by us, and an owner-style `unlock` is refused as not-owner.
pub async fn assert_excluded_by_foreign<K: LockKind>(lock: &Lock<K>) {
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(lock.is_locked().await.unwrap());
    assert!(!lock.is_held_by_current().await.unwrap());
    assert!(lock.unlock().await.unwrap_err().is_not_owner());
}

/// Asserts that `result` is a refusal as an invalid argument; `what` names the call.
pub fn assert_invalid<T: std::fmt::Debug>(result: Result<T, redisson_lock::LockError>, what: &str) {
    match result {
        Err(e) => assert!(e.is_invalid_argument(), "{what}: {e}"),
        Ok(v) => panic!("{what}: accepted ({v:?})"),
    }
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
