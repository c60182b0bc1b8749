//! [`Semaphore`]: Redisson's `RSemaphore`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{check_permits, deadline, detached, no_reply, wait_for, Named, Step};
use crate::config::millis;
use crate::error::{LockError, Result};
use crate::keys::{self, prefix_name, SEMAPHORE_CHANNEL_PREFIX};
use crate::observe;
use crate::pubsub::Wake;
use crate::retry::{Retry, Transient};
use crate::scripts::{self, Call, SemKeys};
use crate::shared::Client;

/// The shortest life of a request receipt: how long an acquire whose reply was lost can still
/// be given back, or a release be repeated, exactly once (it is deleted as soon as the reply
/// is in, so only an unanswered request's receipt lives this long).
const MIN_RECEIPT_TTL: Duration = Duration::from_secs(60);

/// A distributed counting semaphore, wire-compatible with Redisson's `RSemaphore`
/// ([`Client::get_semaphore`]).
///
/// Permits are not owned: any client may release them. The semaphore does not exist until
/// [`try_set_permits`](Semaphore::try_set_permits) (or [`add_permits`](Semaphore::add_permits)
/// or [`release`](Semaphore::release)) creates it; acquiring from a missing semaphore waits.
///
/// # Redisson compatibility
///
/// * Key `<name>`: a STRING holding the available permits (decimal), as Java writes it.
/// * Channel `redisson_sc:{<name>}` (`prefix_name`); every change that can free permits
///   publishes the **new count** there (`release`, `add_permits`, `try_set_permits` publish
///   the count set). Java waiters are woken by our releases and ours by theirs.
/// * While a request is in flight, a receipt `redisson_semaphore_latch:{<name>}:<id>` (ours,
///   deleted once the reply is in; Java never reads it) makes the acquire and release scripts
///   safe to repeat after a lost reply.
///
/// # Waiting
///
/// A waiter tries, subscribes, registers for wake-ups, tries again and sleeps until a count
/// message (at most 30 s, a bound, not a poll). As Redisson's `SemaphorePubSub`, a message with
/// count `n` wakes up to `n` local waiters; a waiter that still finds too few permits (it wants
/// more than were freed) sleeps again. A reconnect of the subscriber wakes every waiter.
///
/// # Cancel safety
///
/// [`acquire`](Semaphore::acquire) and [`try_acquire`](Semaphore::try_acquire) are cancel
/// safe: every acquire script runs in a task of its own, and permits taken for a caller that
/// is gone, or whose reply was lost, are given back in the background (exactly once, by the
/// request's receipt) before the receipt expires (60 s at least). So an acquire that returns
/// an error or is dropped holds nothing once its give-back has run; only a server unreachable
/// for the receipt's whole life can keep such permits. A dropped
/// [`release`](Semaphore::release) still completes in the background once it was started. The
/// other methods send one script or command: dropped, it has run entirely or not at all.
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// use std::time::Duration;
/// let pool = client.get_semaphore("db-connections");
/// pool.try_set_permits(10).await?;
/// if pool.try_acquire_many_for(2, Duration::from_secs(5)).await? {
///     // ... use two connections ...
///     pool.release_many(2).await?;
/// }
/// # Ok(()) })
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    named: Named,
}

impl std::ops::Deref for Inner {
    type Target = Named;
    fn deref(&self) -> &Named {
        &self.named
    }
}

impl Inner {
    fn keys(&self) -> SemKeys<'_> {
        SemKeys {
            name: &self.name,
            channel: &self.channel,
            publish: self.client.publish_command(),
        }
    }

    fn receipt_ms(&self) -> u64 {
        millis(self.client.config().latch_ttl().max(MIN_RECEIPT_TTL))
    }

    /// One acquire script, repeated with the same receipt after a transient failure.
    async fn take(&self, permits: u32, receipt: &str) -> Result<bool> {
        let inv = scripts::semaphore_acquire(&self.name, receipt, permits, self.receipt_ms());
        match self.repeatable::<i64>(&inv).await? {
            1 => Ok(true),
            0 => Ok(false),
            other => Err(LockError::UnexpectedReply {
                key: self.name.clone(),
                reply: other.to_string(),
            }),
        }
    }

    /// Gives back what the request with `receipt` took, if anything, retrying until the
    /// receipt has expired.
    async fn give_back(&self, receipt: &str) {
        let until = Instant::now() + Duration::from_millis(self.receipt_ms());
        let mut retry = Retry::until(self.client.config(), until)
            .op("give_back")
            .kind("semaphore");
        loop {
            let inv = scripts::semaphore_undo(&self.keys(), receipt);
            let mut conn = self.client.conn_synced();
            match inv.invoke_async::<i64>(&mut conn).await {
                Ok(n) => {
                    tracing::debug!(semaphore = %self.name, permits = n, "gave back an unclaimed acquire");
                    return;
                }
                Err(e) if retry.again(&e).await => {}
                Err(e) => {
                    tracing::warn!(semaphore = %self.name, error = %e, "could not give back an unclaimed acquire");
                    return;
                }
            }
        }
    }
}

/// Permits one acquire request took: given back when dropped, unless claimed.
struct Taken {
    inner: Option<Arc<Inner>>,
    receipt: String,
}

impl Taken {
    /// The caller has them: only the receipt is left to delete.
    fn claim(mut self) {
        if let Some(inner) = self.inner.take() {
            inner.client.delete_latch(std::mem::take(&mut self.receipt));
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let receipt = std::mem::take(&mut self.receipt);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { inner.give_back(&receipt).await });
        }
    }
}

impl Semaphore {
    pub(crate) fn new(client: Client, name: String) -> Semaphore {
        let channel = prefix_name(SEMAPHORE_CHANNEL_PREFIX, &name);
        let receipt = keys::semaphore_receipt(&name, "0");
        let named = Named::new("semaphore", client, name, channel, &[&receipt]);
        Semaphore {
            inner: Arc::new(Inner { named }),
        }
    }

    /// The semaphore's name (its key).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub(super) fn named(&self) -> &Named {
        &self.inner.named
    }

    /// Sets the number of permits if the semaphore does not exist yet (Redisson's
    /// `trySetPermits`), and publishes it. `Ok(false)`: it exists, nothing changed. Like
    /// Redisson, any `i32` is accepted (a negative count makes acquirers wait for releases).
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`] when the key holds another type; connection errors.
    pub async fn try_set_permits(&self, permits: i32) -> Result<bool> {
        self.try_set(permits, None).await
    }

    /// [`try_set_permits`](Semaphore::try_set_permits) with a time to live: the semaphore's
    /// key is deleted `ttl` after it was set (Redisson's `trySetPermits(permits,
    /// timeToLive)`). Releases keep the TTL; [`add_permits`](Semaphore::add_permits) and
    /// [`drain_permits`](Semaphore::drain_permits) clear it, as in Redisson.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one script; dropped, it has run entirely or not at all.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a zero TTL or one over 100 years (nothing is sent);
    /// [`LockError::WrongType`]; connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// use std::time::Duration;
    /// let today = client.get_semaphore("quota:2026-11-26");
    /// today.try_set_permits_with_ttl(1000, Duration::from_secs(24 * 3600)).await?;
    /// # Ok(()) })
    /// ```
    pub async fn try_set_permits_with_ttl(&self, permits: i32, ttl: Duration) -> Result<bool> {
        self.try_set(permits, Some(ttl)).await
    }

    async fn try_set(&self, permits: i32, ttl: Option<Duration>) -> Result<bool> {
        self.inner.check()?;
        ttl.map_or(Ok(()), super::check_ttl)?;
        let inv = scripts::semaphore_try_set(&self.inner.keys(), permits, ttl.map_or(0, millis));
        // Repeating it after a lost reply cannot set twice; it may report `false` for a set
        // that did happen.
        Ok(self.inner.repeatable::<i64>(&inv).await? == 1)
    }

    /// Takes one permit, waiting for as long as it takes (Redisson's `acquire()`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a permit taken for a caller that is gone, or whose reply was lost, is given
    /// back in the background.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a refused name; [`LockError::WrongType`];
    /// connection errors once the retries are spent.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let pool = client.get_semaphore("doc:semaphore:acquire"); pool.try_set_permits(2).await?;
    /// pool.acquire().await?;
    /// // ... work ...
    /// pool.release().await?;
    /// # Ok(()) })
    /// ```
    pub async fn acquire(&self) -> Result<()> {
        self.acquire_many(1).await
    }

    /// Takes `permits` at once, waiting for as long as it takes (Redisson's
    /// `acquire(permits)`). Zero permits succeed at once, sending nothing (as Redisson).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for more than `i32::MAX` permits or a refused name;
    /// [`LockError::WrongType`]; connection errors once the retries are spent.
    pub async fn acquire_many(&self, permits: u32) -> Result<()> {
        self.acquire_within(permits, None).await.map(|_| ())
    }

    /// Takes one permit if one is available now (Redisson's `tryAcquire()`): one try.
    /// `Ok(false)`: none, nothing taken.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let pool = client.get_semaphore("doc:semaphore:try_acquire"); pool.try_set_permits(2).await?;
    /// use std::time::Duration;
    /// if pool.try_acquire().await? || pool.try_acquire_for(Duration::from_secs(1)).await? {
    ///     pool.release().await?;
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_acquire(&self) -> Result<bool> {
        self.try_acquire_many_for(1, Duration::ZERO).await
    }

    /// Takes one permit if one becomes available within `wait` (Redisson's
    /// `tryAcquire(waitTime)`). `Ok(false)`: not within `wait`, nothing taken.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Semaphore::acquire).
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<bool> {
        self.try_acquire_many_for(1, wait).await
    }

    /// Takes `permits` if they are available now (Redisson's `tryAcquire(permits)`): one try.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Semaphore::acquire_many).
    pub async fn try_acquire_many(&self, permits: u32) -> Result<bool> {
        self.try_acquire_many_for(permits, Duration::ZERO).await
    }

    /// Takes `permits` if they become available within `wait` (`Duration::ZERO`: one try;
    /// Redisson's `tryAcquire(permits, waitTime)`). `Ok(false)`: not within `wait`, nothing
    /// taken.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Semaphore::acquire_many).
    pub async fn try_acquire_many_for(&self, permits: u32, wait: Duration) -> Result<bool> {
        self.acquire_within(permits, Some(wait)).await
    }

    async fn acquire_within(&self, permits: u32, wait: Option<Duration>) -> Result<bool> {
        self.inner.check()?;
        check_permits(permits)?;
        if permits == 0 {
            return Ok(true);
        }
        let deadline = wait.and_then(deadline);
        let inner = &self.inner;
        let waiting = wait_for(
            "semaphore",
            &inner.client,
            &inner.channel,
            Wake::Permits,
            deadline,
            || async {
                Ok(match self.attempt(permits).await? {
                    true => Step::Done(()),
                    false => Step::Wait(None),
                })
            },
        );
        let got = observe::acquire(
            inner.observe_as("acquire", "semaphore"),
            permits.into(),
            waiting,
        )
        .await?;
        Ok(got.is_some())
    }

    /// One acquire request, in a task of its own (see "Cancel safety").
    async fn attempt(&self, permits: u32) -> Result<bool> {
        let inner = self.inner.clone();
        let receipt = keys::semaphore_receipt(&inner.name, &keys::request_id());
        let (tx, rx) = oneshot::channel::<Result<Option<Taken>>>();
        tokio::spawn(async move {
            let outcome = match inner.take(permits, &receipt).await {
                Ok(true) => Ok(Some(Taken {
                    inner: Some(inner.clone()),
                    receipt,
                })),
                Ok(false) => Ok(None),
                Err(e) => {
                    if e.is_transient() {
                        // Unknown outcome: give back whatever it may have taken.
                        drop(Taken {
                            inner: Some(inner.clone()),
                            receipt,
                        });
                    }
                    Err(e)
                }
            };
            // A caller that is gone drops the `Taken`, which gives the permits back.
            let _ = tx.send(outcome);
        });
        match rx.await {
            Ok(Ok(Some(taken))) => {
                taken.claim();
                Ok(true)
            }
            Ok(Ok(None)) => Ok(false),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(no_reply("acquire")),
        }
    }

    /// Returns one permit (Redisson's `release()`).
    ///
    /// # Cancel safety
    ///
    /// As [`release_many`](Semaphore::release_many).
    ///
    /// # Errors
    ///
    /// As [`release_many`](Semaphore::release_many).
    pub async fn release(&self) -> Result<()> {
        self.release_many(1).await
    }

    /// Returns `permits` (Redisson's `release(permits)`: adds them and publishes the new
    /// count). Permits are not owned: releasing more than were taken raises the count. Zero
    /// sends nothing.
    ///
    /// # Cancel safety
    ///
    /// Once started it completes in the background; its retries share one receipt, so the
    /// permits are added at most once.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for more than `i32::MAX` permits; connection errors once
    /// the retries (all with one receipt, so the permits are added once) are spent.
    pub async fn release_many(&self, permits: u32) -> Result<()> {
        let released = self.release_with(permits, scripts::semaphore_release, |_| "released");
        released.await.map(|_| ())
    }

    /// Releases `permits` only if the semaphore exists (Redisson's `releaseIfExists`): `false`,
    /// with nothing changed, when its key is gone (never set, deleted, or expired after
    /// [`try_set_permits_with_ttl`](Semaphore::try_set_permits_with_ttl)), so a release after
    /// the expiry does not bring the semaphore back. Zero permits send nothing and answer
    /// `false`, as Redisson's. The key keeps its TTL.
    ///
    /// # Cancel safety
    ///
    /// As [`release_many`](Semaphore::release_many): once started it completes in the background; its
    /// retries share one receipt, so the permits are added at most once.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for more than `i32::MAX` permits; [`LockError::WrongType`];
    /// connection errors once the retries are spent.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let pool = client.get_semaphore("doc:semaphore:release_if_exists"); pool.try_set_permits(2).await?;
    /// if !pool.release_if_exists(1).await? {
    ///     println!("the pool expired: nothing to give back");
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn release_if_exists(&self, permits: u32) -> Result<bool> {
        let script = scripts::semaphore_release_if_exists;
        let released = self.release_with(permits, script, |&n| match n {
            1 => "released",
            _ => "not_held",
        });
        released.await.map(|n| n == 1)
    }

    /// A release `script` of `permits`, in a task of its own (a dropped release still
    /// completes), its retries sharing one receipt; `outcome` reads its reply for the metrics.
    /// Zero permits send nothing (`Ok(0)`).
    async fn release_with(
        &self,
        permits: u32,
        script: fn(&SemKeys<'_>, &str, u32, u64) -> Call,
        outcome: fn(&i64) -> &'static str,
    ) -> Result<i64> {
        self.inner.check()?;
        check_permits(permits)?;
        if permits == 0 {
            return Ok(0); // nothing sent
        }
        let inner = self.inner.clone();
        let releasing = detached("release", async move {
            let receipt = keys::semaphore_receipt(&inner.name, &keys::request_id());
            let inv = script(&inner.keys(), &receipt, permits, inner.receipt_ms());
            let r = inner.repeatable::<i64>(&inv).await;
            if r.is_ok() {
                inner.client.delete_latch(receipt);
            }
            r
        });
        let op = self.inner.observe_as("release", "semaphore");
        observe::release(op, permits.into(), releasing, outcome).await
    }

    /// The permits available now (Redisson's `availablePermits`): 0 when the semaphore does
    /// not exist; negative after [`add_permits`](Semaphore::add_permits) took more than there
    /// were.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors.
    pub async fn available_permits(&self) -> Result<i64> {
        self.inner.read_count().await
    }

    /// Takes every available permit and returns how many there were (Redisson's
    /// `drainPermits`: sets the count to 0, which also clears any TTL; publishes nothing).
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors (not retried: a repeat could drain permits
    /// released in between).
    pub async fn drain_permits(&self) -> Result<i64> {
        self.inner.check()?;
        let inv = scripts::semaphore_drain(&self.inner.name);
        self.inner.once::<i64>(&inv).await
    }

    /// Adds `permits`, or removes them when negative (Redisson's `addPermits`: the count may go
    /// negative; the key is created when missing, any TTL is cleared, and the new count is
    /// published).
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors (not retried: a repeat would add twice).
    pub async fn add_permits(&self, permits: i32) -> Result<()> {
        self.inner.check()?;
        let inv = scripts::semaphore_add(&self.inner.keys(), permits);
        self.inner.once::<i64>(&inv).await.map(|_| ())
    }

    /// Deletes the semaphore (its permit count). Waiters keep waiting for a new count.
    ///
    /// # Errors
    ///
    /// Connection errors.
    pub async fn delete(&self) -> Result<bool> {
        self.inner.check()?;
        let mut conn = self.inner.client.conn_synced();
        let n: i64 = redis::cmd("DEL")
            .arg(&self.inner.name)
            .query_async(&mut conn)
            .await?;
        Ok(n == 1)
    }
}
