//! [`CountDownLatch`]: Redisson's `RCountDownLatch`.

use std::sync::Arc;
use std::time::Duration;

use super::{deadline, detached, wait_for, Named, Step};
use crate::error::{LockError, Result};
use crate::keys::count_down_latch_channel;
use crate::observe;
use crate::pubsub::Wake;
use crate::scripts;
use crate::shared::Client;

/// A distributed count-down latch, wire-compatible with Redisson's `RCountDownLatch`
/// ([`Client::get_count_down_latch`]).
///
/// [`try_set_count`](CountDownLatch::try_set_count) arms it, every
/// [`count_down`](CountDownLatch::count_down) takes one off, and [`wait`](CountDownLatch::wait)
/// returns once the count is zero. Unlike `java.util.concurrent.CountDownLatch` it can be armed
/// again once open (the key is deleted at zero).
///
/// # Redisson compatibility
///
/// * Key `<name>`: a STRING holding the count (decimal); deleted when it reaches zero. A latch
///   that does not exist counts as zero (open).
/// * Channel `redisson_countdownlatch__channel__{<name>}`: always with braces, even when the name
///   has some (Redisson does not use its `prefixName` rule here).
/// * Messages: `0` when a count-down reaches zero (wakes every waiter, Java's and ours), `1` when
///   a count is set or the latch deleted (waiters re-read the count).
///
/// # Cancel safety
///
/// [`wait`](CountDownLatch::wait) and [`wait_timeout`](CountDownLatch::wait_timeout) only read:
/// dropping them leaves nothing behind (the subscription ends with the last local waiter). A
/// dropped [`count_down`](CountDownLatch::count_down) still completes in the background once
/// started. Like Redisson, a count-down is never retried: after a connection error its outcome
/// is unknown (read [`get_count`](CountDownLatch::get_count)).
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// let ready = client.get_count_down_latch("workers-ready");
/// ready.try_set_count(3).await?;
/// // ... each of three workers calls `count_down()` when ready ...
/// # for _ in 0..3 { ready.count_down().await?; }
/// ready.wait().await?;
/// # Ok(()) })
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    inner: Arc<Named>,
}

impl CountDownLatch {
    pub(crate) fn new(client: Client, name: String) -> CountDownLatch {
        let channel = count_down_latch_channel(&name);
        CountDownLatch {
            inner: Arc::new(Named::new("latch", client, name, channel, &[])),
        }
    }

    /// The latch's name (its key).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub(super) fn named(&self) -> &Named {
        &self.inner
    }

    /// Sets the count if the latch does not exist (Redisson's `trySetCount`) and publishes `1`.
    /// `Ok(false)`: it exists (is armed), nothing changed. A count of zero stores `0`: an open
    /// latch that still exists.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a negative count (nothing is sent); connection
    /// errors.
    pub async fn try_set_count(&self, count: i64) -> Result<bool> {
        self.inner.check()?;
        if count < 0 {
            return Err(LockError::InvalidArgument(
                "a count-down latch's count must not be negative",
            ));
        }
        let c = &self.inner;
        let inv = scripts::latch_try_set(&c.name, &c.channel, count, c.client.publish_command());
        // Safe to repeat: it sets only a missing key.
        Ok(c.repeatable::<i64>(&inv).await? == 1)
    }

    /// Counts down by one (Redisson's `countDown`); at zero the key is deleted and `0` is
    /// published, which wakes every waiter. Counting down a missing latch changes nothing.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors (not retried, see "Cancel safety").
    pub async fn count_down(&self) -> Result<()> {
        self.inner.check()?;
        let c = self.inner.clone();
        let counting = detached("count-down", async move {
            let inv = scripts::latch_count_down(&c.name, &c.channel, c.client.publish_command());
            c.once::<i64>(&inv).await
        });
        let op = self.inner.observe_as("count_down", "latch");
        observe::release(op, 0, counting, |_| "released")
            .await
            .map(|_| ())
    }

    /// The current count (Redisson's `getCount`): 0 when the latch does not exist.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors.
    pub async fn get_count(&self) -> Result<i64> {
        self.inner.read_count().await
    }

    /// Waits until the count is zero (Redisson's `await`), for as long as it takes. Returns at
    /// once when it is zero or the latch does not exist.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors once the retries are spent; a subscription
    /// timeout.
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(None).await.map(|_| ())
    }

    /// Waits at most `wait` for the count to reach zero (Redisson's `await(timeout)`).
    /// `Ok(false)`: still counting.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads and waits.
    ///
    /// # Errors
    ///
    /// As [`wait`](CountDownLatch::wait).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let batch = client.get_count_down_latch("doc:count_down_latch:wait_for");
    /// use std::time::Duration;
    /// if !batch.wait_for(Duration::from_secs(10)).await? {
    ///     println!("still {} to go", batch.get_count().await?);
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn wait_for(&self, wait: Duration) -> Result<bool> {
        self.wait_until(Some(wait)).await
    }

    /// The old name of [`wait_for`](CountDownLatch::wait_for).
    ///
    /// # Cancel safety
    ///
    /// As [`wait_for`](CountDownLatch::wait_for).
    ///
    /// # Errors
    ///
    /// As [`wait_for`](CountDownLatch::wait_for).
    #[deprecated(
        since = "0.2.0",
        note = "renamed to `wait_for`, as the other `_for` waits"
    )]
    pub async fn wait_timeout(&self, wait: Duration) -> Result<bool> {
        self.wait_for(wait).await
    }

    async fn wait_until(&self, wait: Option<Duration>) -> Result<bool> {
        self.inner.check()?;
        let deadline = wait.and_then(deadline);
        let c = &self.inner;
        let waiting = wait_for(
            "latch",
            &c.client,
            &c.channel,
            Wake::All,
            deadline,
            || async {
                Ok(match self.get_count().await? {
                    0 => Step::Done(()),
                    _ => Step::Wait(None),
                })
            },
        );
        let open = observe::acquire(c.observe_as("await", "latch"), 0, waiting).await?;
        Ok(open.is_some())
    }

    /// Deletes the latch (Redisson's `delete`): `1` is published when it existed. A deleted latch
    /// counts as zero, so our waiters, woken by that message, return (Java's waiters only
    /// return on a `0` message).
    ///
    /// # Errors
    ///
    /// Connection errors.
    pub async fn delete(&self) -> Result<bool> {
        self.inner.check()?;
        let c = &self.inner;
        let inv = scripts::latch_delete(&c.name, &c.channel, c.client.publish_command());
        Ok(c.repeatable::<i64>(&inv).await? == 1)
    }
}
