//! [`PermitExpirableSemaphore`]: Redisson's `RPermitExpirableSemaphore`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{deadline, detached, epoch_ms, no_reply, wait_for, Named, Step};
use crate::config::millis;
use crate::error::{LockError, Result};
use crate::keys::{prefix_name, suffix_name, SEMAPHORE_CHANNEL_PREFIX};
use crate::observe;
use crate::pubsub::Wake;
use crate::retry::{Retry, Transient};
use crate::scripts::{self, PesKeys, SemKeys, NON_EXPIRABLE};
use crate::shared::Client;
use crate::time::MAX_DURATION;

mod id;

pub use id::PermitId;

/// How long a dropped or unanswered acquire keeps trying to give its permit back.
const GIVE_BACK_FOR: Duration = Duration::from_secs(60);

/// A distributed semaphore whose permits have ids and optional leases, wire-compatible with
/// Redisson's `RPermitExpirableSemaphore` ([`Client::get_permit_expirable_semaphore`]).
///
/// A permit whose lease runs out goes back to the pool (by the next operation on the semaphore,
/// as in Redisson: expiry itself publishes nothing, so waiters also wake up when the earliest
/// lease ends).
///
/// A permit that should live exactly as long as its holder (renewed by the client's watchdog,
/// back in the pool within one lease when the holder dies) is a [`PermitGuard`](crate::PermitGuard):
/// [`acquire_guarded`](PermitExpirableSemaphore::acquire_guarded).
///
/// # Redisson compatibility
///
/// * Key `<name>`: a STRING holding the available permits.
/// * Key `{<name>}:timeout` (`suffix_name`): a ZSET of the acquired permits, member = the id's
///   16 raw bytes, score = lease end in epoch milliseconds (client clock, as Redisson), or
///   `922337203685477` for a permit without lease. It takes the count key's TTL when it has one.
/// * Channel `redisson_sc:{<name>}` (shared with [`Semaphore`](crate::Semaphore)): the new
///   available count is published on release and when expired permits are reclaimed.
///
/// # Cancel safety
///
/// [`acquire`](PermitExpirableSemaphore::acquire) and
/// [`try_acquire_for`](PermitExpirableSemaphore::try_acquire_for) are cancel safe: the permit id is made
/// before the script is sent and the script takes nothing more for an id already held, so a
/// permit taken for a caller that is gone, or whose reply was lost, is released by its id in the
/// background. Releasing an id that was never taken changes nothing.
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// use std::time::Duration;
/// let slots = client.get_permit_expirable_semaphore("thumbnail-slots");
/// slots.try_set_permits(2).await?;
/// // A permit that returns to the pool by itself if this process dies.
/// let id = slots.with_lease(Duration::from_secs(30)).acquire().await?;
/// // ... work; extend the lease while it lasts ...
/// slots.update_lease_time(&id, Some(Duration::from_secs(30))).await?;
/// slots.release(&id).await?;
/// # Ok(()) })
/// ```
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    pub(super) inner: Arc<Inner>,
    /// The lease of the permits this handle takes (`None`: never expire).
    lease: Option<Duration>,
}

#[derive(Debug)]
pub(super) struct Inner {
    named: Named,
    /// The permits' lease ends: a sorted set `{<name>}:timeout`.
    pub(super) timeouts: String,
}

impl std::ops::Deref for Inner {
    type Target = Named;
    fn deref(&self) -> &Named {
        &self.named
    }
}

/// The metrics' `kind` label.
const KIND: &str = "permit_semaphore";

impl Inner {
    pub(super) fn keys(&self) -> PesKeys<'_> {
        PesKeys {
            name: &self.name,
            timeouts: &self.timeouts,
            channel: &self.channel,
            publish: self.client.publish_command(),
        }
    }

    /// Releases `id`: `Ok(0)` not held, `Ok(1)` released, `Ok(2)` released after its lease.
    /// Retried after transient failures; a retry that finds the id gone counts as released by
    /// the first try (an id is held by one caller only).
    pub(super) async fn release(&self, id: &PermitId) -> Result<i64> {
        let releasing = self.release_once(id);
        observe::release(
            self.observe_as("release", KIND),
            1,
            releasing,
            |&n| match n {
                0 => "not_held",
                _ => "released",
            },
        )
        .await
    }

    async fn release_once(&self, id: &PermitId) -> Result<i64> {
        let mut retry = Retry::attempts(self.client.config())
            .op("release")
            .kind(KIND);
        let mut repeated = false;
        loop {
            let inv = scripts::pes_release(&self.keys(), &id.bytes, epoch_ms());
            let mut conn = self.client.conn_synced();
            let outcome = inv.invoke_async::<i64>(&mut conn).await;
            if outcome.is_ok() {
                self.client.permit_gone(&id.bytes);
            }
            match outcome {
                Ok(0) if repeated => return Ok(1),
                Ok(n) => return Ok(n),
                Err(e) if retry.again(&e).await => repeated = true,
                Err(e) => return Err(super::write_error(KIND, &self.name, &mut conn, e)),
            }
        }
    }

    /// Gives back a permit nobody will use, retrying for a while.
    pub(super) async fn give_back(&self, id: &PermitId) {
        let until = Instant::now() + GIVE_BACK_FOR;
        let mut retry = Retry::until(self.client.config(), until)
            .op("give_back")
            .kind(KIND);
        loop {
            match self.release(id).await {
                Ok(_) => return,
                Err(e) if retry.again(&e).await => {}
                Err(e) => {
                    tracing::warn!(semaphore = %self.name, permit = %id, error = %e, "could not give back an unclaimed permit");
                    return;
                }
            }
        }
    }
}

/// The permits taken for one request: released when dropped, unless claimed.
struct Taken {
    inner: Option<Arc<Inner>>,
    ids: Vec<PermitId>,
}

impl Taken {
    fn claim(mut self) -> Vec<PermitId> {
        self.inner = None;
        std::mem::take(&mut self.ids)
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            for id in std::mem::take(&mut self.ids) {
                let inner = inner.clone();
                rt.spawn(async move { inner.give_back(&id).await });
            }
        }
    }
}

/// The lease's end as Redisson stores it: epoch ms, or the "never" score.
fn expiry_of(lease: Option<Duration>) -> Result<u64> {
    match lease {
        None => Ok(NON_EXPIRABLE),
        Some(l) if l.is_zero() => Err(LockError::InvalidArgument(
            "a permit lease must be non-zero (None: the permit never expires)",
        )),
        Some(l) if l > MAX_DURATION => Err(LockError::InvalidArgument(
            "a permit lease must be at most 100 years",
        )),
        Some(l) => Ok(epoch_ms().saturating_add(millis(l))),
    }
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(client: Client, name: String) -> PermitExpirableSemaphore {
        let channel = prefix_name(SEMAPHORE_CHANNEL_PREFIX, &name);
        let timeouts = suffix_name(&name, "timeout");
        let named = Named::new(KIND, client, name, channel, &[&timeouts]);
        PermitExpirableSemaphore {
            inner: Arc::new(Inner { named, timeouts }),
            lease: None,
        }
    }

    /// The semaphore's name (its count key).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub(super) fn named(&self) -> &Named {
        &self.inner.named
    }

    /// Its keys: the count and the leases' sorted set `{<name>}:timeout`.
    pub(super) fn all_keys(&self) -> [&str; 2] {
        [&self.inner.name, &self.inner.timeouts]
    }

    /// Sets the number of permits if the semaphore does not exist (Redisson's `trySetPermits`)
    /// and publishes it. `Ok(false)`: it exists, nothing changed.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors.
    pub async fn try_set_permits(&self, permits: i32) -> Result<bool> {
        self.inner.check()?;
        let c = &self.inner;
        let k = SemKeys {
            name: &c.name,
            channel: &c.channel,
            publish: c.client.publish_command(),
        };
        // Redisson's script is the semaphore's, word for word.
        let inv = scripts::semaphore_try_set(&k, permits, 0);
        Ok(c.repeatable::<i64>(&inv).await? == 1)
    }

    /// The same semaphore, whose acquires take permits that live `lease` unless released or
    /// extended (Redisson's `leaseTime`); permits of the handle this came from, and of
    /// [`get_permit_expirable_semaphore`](crate::Client::get_permit_expirable_semaphore), never
    /// expire. The lease is checked when a permit is acquired.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let slots = client.get_permit_expirable_semaphore("doc:permit_semaphore:with_lease"); slots.try_set_permits(4).await?;
    /// use std::time::Duration;
    /// let leased = slots.with_lease(Duration::from_secs(60));
    /// if let Some(id) = leased.try_acquire_for(Duration::from_secs(1)).await? {
    ///     slots.release(&id).await?;
    /// }
    /// # Ok(()) })
    /// ```
    pub fn with_lease(&self, lease: Duration) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            inner: self.inner.clone(),
            lease: Some(lease),
        }
    }

    /// The lease of the permits this handle takes ([`with_lease`](Self::with_lease)); `None`:
    /// they never expire.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// Takes one permit, waiting for as long as it takes (Redisson's `acquire()`), with this
    /// handle's [`lease`](Self::lease).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: see the type's docs.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a zero lease or one over 100 years, or a refused name;
    /// [`LockError::WrongType`]; connection errors once the retries are spent.
    pub async fn acquire(&self) -> Result<PermitId> {
        match self.acquire_within(None, self.lease).await? {
            Some(id) => Ok(id),
            None => Err(LockError::Timeout {
                what: "acquiring a permit",
                waited: Duration::MAX,
            }),
        }
    }

    /// Takes one permit if one is available now (Redisson's `tryAcquire()`): one try.
    /// `Ok(None)`: none, nothing taken.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    pub async fn try_acquire(&self) -> Result<Option<PermitId>> {
        self.try_acquire_for(Duration::ZERO).await
    }

    /// Takes one permit if one becomes available within `wait` (`Duration::ZERO`: one try;
    /// Redisson's `tryAcquire(waitTime, leaseTime, unit)` with this handle's lease).
    /// `Ok(None)`: not within `wait`, nothing taken.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<PermitId>> {
        self.acquire_within(Some(wait), self.lease).await
    }

    async fn acquire_within(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<PermitId>> {
        let ids = self.acquire_many_within(wait, lease, 1).await?;
        Ok(ids.and_then(|ids| ids.into_iter().next()))
    }

    /// `n` permits in one script, all or none, waiting up to `wait` (`None`: forever).
    pub(super) async fn acquire_many_within(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
        n: u32,
    ) -> Result<Option<Vec<PermitId>>> {
        self.inner.check()?;
        expiry_of(lease)?;
        super::check_permits(n)?;
        if n == 0 {
            return Err(LockError::InvalidArgument("acquire at least one permit"));
        }
        let deadline = wait.and_then(deadline);
        let c = &self.inner;
        let waiting = wait_for(
            KIND,
            &c.client,
            &c.channel,
            Wake::Permits,
            deadline,
            || async { self.attempt(lease, n).await },
        );
        observe::acquire(c.observe_as("acquire", KIND), n.into(), waiting).await
    }

    /// One acquire request, in a task of its own (see "Cancel safety").
    async fn attempt(&self, lease: Option<Duration>, n: u32) -> Result<Step<Vec<PermitId>>> {
        let inner = self.inner.clone();
        let expiry = expiry_of(lease)?;
        let (tx, rx) = oneshot::channel::<Result<Step<Taken>>>();
        tokio::spawn(async move {
            let id: Vec<PermitId> = (0..n).map(|_| PermitId::random()).collect();
            let now = epoch_ms();
            let inv =
                scripts::pes_acquire(&inner.keys(), id.iter().map(|i| i.bytes()), expiry, now);
            // Safe to repeat: the script takes nothing more when the first id is already held.
            let reply = inner.repeatable::<(i64, i64)>(&inv).await;
            let taken = |inner: &Arc<Inner>, ids| Taken {
                inner: Some(inner.clone()),
                ids,
            };
            let outcome = match reply {
                Ok((1, _)) => Ok(Step::Done(taken(&inner, id))),
                Ok((0, t)) => {
                    Ok(Step::Wait(u64::try_from(t).ok().map(|t| {
                        Duration::from_millis(t.saturating_sub(now).max(1))
                    })))
                }
                Ok(other) => Err(LockError::UnexpectedReply {
                    key: inner.name.clone(),
                    reply: format!("{other:?}"),
                }),
                Err(e) => {
                    if e.is_transient() {
                        // Unknown outcome: release the id if it was taken.
                        drop(taken(&inner, id));
                    }
                    Err(e)
                }
            };
            // A caller that is gone drops the `Taken`, which releases the permit.
            let _ = tx.send(outcome);
        });
        match rx.await {
            Ok(Ok(Step::Done(t))) => {
                let c = &self.inner;
                for id in &t.ids {
                    let held = crate::shared::HeldPermit {
                        name: c.name.clone(),
                        timeouts: c.timeouts.clone(),
                        channel: c.channel.clone(),
                        hex: id.as_str().to_owned(),
                        expiry_ms: expiry,
                    };
                    if !c.client.permit_taken(id.bytes, held) {
                        // Shut down meanwhile: dropping `t` gives every permit back.
                        return Err(LockError::ShutDown);
                    }
                }
                Ok(Step::Done(t.claim()))
            }
            Ok(Ok(Step::Wait(hint))) => Ok(Step::Wait(hint)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(no_reply("acquire")),
        }
    }

    /// Releases the permit `id` (Redisson's `release(id)`); the new count is published.
    ///
    /// # Errors
    ///
    /// [`LockError::UnknownPermit`] when the semaphore does not hold `id` (nothing changed; an
    /// expired permit not yet reclaimed is returned to the pool, as Redisson does);
    /// connection errors.
    pub async fn release(&self, id: &PermitId) -> Result<()> {
        match self.try_release(id).await? {
            true => Ok(()),
            false => Err(LockError::UnknownPermit {
                name: self.inner.name.clone(),
                permit: id.to_string(),
            }),
        }
    }

    /// Releases the permit `id` if it is held and its lease has not run out (Redisson's
    /// `tryRelease`). `Ok(false)`: unknown id (nothing changed), or a permit whose lease had
    /// ended (returned to the pool now).
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors.
    pub async fn try_release(&self, id: &PermitId) -> Result<bool> {
        self.inner.check()?;
        let inner = self.inner.clone();
        let id = id.clone();
        // In a task of its own: a dropped release still completes.
        Ok(detached("release", async move { inner.release(&id).await }).await? == 1)
    }

    /// The permits available now, after expired ones went back to the pool (Redisson's
    /// `availablePermits`); 0 when the semaphore does not exist.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors.
    pub async fn available_permits(&self) -> Result<i64> {
        self.inner.check()?;
        let c = &self.inner;
        let inv = scripts::pes_available(&c.keys(), epoch_ms());
        c.repeatable::<i64>(&inv).await
    }

    /// Adds `permits` to the pool, or removes them when negative (Redisson's `addPermits`: the
    /// count may go negative; the key is created when missing and any TTL on it is cleared; a
    /// positive amount is published, which wakes waiters). Permits held keep their ids and
    /// leases.
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let slots = client.get_permit_expirable_semaphore("preview-slots");
    /// slots.add_permits(2).await?; // two more render slots from now on
    /// # Ok(()) })
    /// ```
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors (not retried: a repeat would add twice).
    pub async fn add_permits(&self, permits: i32) -> Result<()> {
        self.inner.check()?;
        let c = &self.inner;
        let inv = scripts::pes_add(&c.keys(), permits);
        c.once::<i64>(&inv).await.map(|_| ())
    }

    /// Sets the lease of the held permit `id` to `lease` from now (`None`: never expires).
    /// `Ok(false)`: the permit is not held (released, or expired: it is not revived).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a zero lease or one over 100 years (nothing sent);
    /// connection errors.
    pub async fn update_lease_time(&self, id: &PermitId, lease: Option<Duration>) -> Result<bool> {
        self.inner.check()?;
        let expiry = expiry_of(lease)?;
        let c = &self.inner;
        let inv = scripts::pes_update_lease(&c.keys(), &id.bytes, expiry, epoch_ms());
        let updated = c.repeatable::<i64>(&inv).await? == 1;
        if updated {
            c.client.permit_lease(&id.bytes, expiry);
        }
        Ok(updated)
    }

    /// Deletes the semaphore: its count and its acquired permits (Redisson's `delete`).
    ///
    /// # Errors
    ///
    /// Connection errors.
    pub async fn delete(&self) -> Result<bool> {
        self.inner.check()?;
        let c = &self.inner;
        let mut conn = c.client.conn_synced();
        let n: i64 = redis::cmd("DEL")
            .arg(&c.name)
            .arg(&c.timeouts)
            .query_async(&mut conn)
            .await?;
        Ok(n > 0)
    }
}
