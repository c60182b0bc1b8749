//! [`PermitGuard`]: a permit of a [`PermitExpirableSemaphore`] that lives as long as its holder,
//! renewed by the client's watchdog and released by the guard.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::detached;
use super::permit_semaphore::{Inner, PermitExpirableSemaphore, PermitId};
use crate::error::{LockError, Result};
use crate::holds::permits::WatchedPermit;

impl PermitExpirableSemaphore {
    /// Takes one permit that lives as long as this client: leased for
    /// [`Config::watchdog_timeout`](crate::Config::watchdog_timeout) and renewed by the
    /// client's watchdog every third of it, until the guard is released or dropped. A holder
    /// that dies (process killed, client dropped, runtime shut down) stops renewing, and the
    /// permit returns to the pool within one watchdog lease. Waits for as long as it takes.
    ///
    /// To Java clients the permit is an ordinary one whose lease keeps moving, as after
    /// `updateLeaseTime`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: as [`acquire`](PermitExpirableSemaphore::acquire), a permit taken for a
    /// caller that is gone is given back in the background.
    ///
    /// # Errors
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let slots = client.get_permit_expirable_semaphore("render-slots");
    /// slots.try_set_permits(2).await?;
    /// let permit = slots.acquire_guarded().await?;
    /// // ... work for as long as it takes; if this process dies the slot comes back ...
    /// permit.release().await?;
    /// # Ok(()) })
    /// ```
    pub async fn acquire_guarded(&self) -> Result<PermitGuard> {
        match self.try_acquire_guarded_within(None).await? {
            Some(g) => Ok(g),
            None => Err(LockError::Timeout {
                what: "acquiring a permit",
                waited: Duration::MAX,
            }),
        }
    }

    /// As [`acquire_guarded`](PermitExpirableSemaphore::acquire_guarded), waiting at most
    /// `wait` (`Duration::ZERO`: one try). `Ok(None)`: no permit within `wait`, nothing taken.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_guarded`](PermitExpirableSemaphore::acquire_guarded).
    ///
    /// # Errors
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { client.get_permit_expirable_semaphore("encode-slots").try_set_permits(1).await?;
    /// use std::time::Duration;
    /// let slots = client.get_permit_expirable_semaphore("encode-slots");
    /// if let Some(permit) = slots.try_acquire_guarded_for(Duration::from_secs(5)).await? {
    ///     println!("got permit {}", permit.id());
    ///     drop(permit); // released in the background
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_acquire_guarded_for(&self, wait: Duration) -> Result<Option<PermitGuard>> {
        self.try_acquire_guarded_within(Some(wait)).await
    }

    /// The old name of [`try_acquire_guarded_for`](Self::try_acquire_guarded_for).
    ///
    /// # Cancel safety
    ///
    /// As [`try_acquire_guarded_for`](Self::try_acquire_guarded_for).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_guarded_for`](Self::try_acquire_guarded_for).
    #[deprecated(since = "0.2.0", note = "renamed to `try_acquire_guarded_for`")]
    pub async fn try_acquire_guarded(&self, wait: Duration) -> Result<Option<PermitGuard>> {
        self.try_acquire_guarded_for(wait).await
    }

    async fn try_acquire_guarded_within(
        &self,
        wait: Option<Duration>,
    ) -> Result<Option<PermitGuard>> {
        let client = self.named().client.clone();
        let lease = client.config().watchdog_timeout();
        let Some(mut ids) = self.acquire_many_within(wait, Some(lease), 1).await? else {
            return Ok(None);
        };
        let Some(id) = ids.pop() else {
            return Ok(None);
        };
        // No await from here on: the guard owns the permit before anything can cancel us.
        Ok(Some(PermitGuard::new(self.inner.clone(), id, lease)))
    }
}

/// A permit that lives as long as its holder ([`PermitExpirableSemaphore::acquire_guarded`]).
///
/// The client's watchdog moves the permit's lease end to now + `watchdog_timeout` every
/// `watchdog_timeout / 3` (one script per semaphore and batch). Dropping the guard releases the
/// permit in the background; [`release`](PermitGuard::release) reports how it went.
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move { client.get_permit_expirable_semaphore("export-slots").try_set_permits(1).await?;
/// let slots = client.get_permit_expirable_semaphore("export-slots");
/// let permit = slots.acquire_guarded().await?;
/// tokio::select! {
///     _ = permit.lost() => eprintln!("the permit was taken away"),
///     _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
/// }
/// permit.release().await?;
/// # Ok(()) })
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases the permit"]
pub struct PermitGuard {
    sem: Arc<Inner>,
    id: PermitId,
    watched: Arc<WatchedPermit>,
    watch: u64,
    lease: Duration,
    armed: bool,
    /// When the permit was taken (its hold time is recorded at the release).
    taken: std::time::Instant,
}

impl PermitGuard {
    fn new(sem: Arc<Inner>, id: PermitId, lease: Duration) -> PermitGuard {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(id.bytes());
        let watched = Arc::new(WatchedPermit::new(
            Arc::from(sem.name.as_str()),
            Arc::from(sem.timeouts.as_str()),
            Arc::from(sem.channel.as_str()),
            bytes,
        ));
        let watch = sem.client.registry().permits.watch(watched.clone());
        sem.client.wake_watchdog();
        PermitGuard {
            sem,
            id,
            watched,
            watch,
            lease,
            taken: std::time::Instant::now(),
            armed: true,
        }
    }

    /// The permit's id (Java's `getLeaseTime(id)` and `updateLeaseTime(id, ...)` take it).
    pub fn id(&self) -> &PermitId {
        &self.id
    }

    /// Whether the permit is known to be lost: a renewal found it gone (released by id,
    /// reclaimed after its lease, semaphore deleted), or it was not renewed for a whole lease
    /// (less the drift allowance). `false` is a belief, not a promise.
    pub fn is_lost(&self) -> bool {
        self.watched.is_lost() || Instant::now() >= self.valid_until()
    }

    fn valid_until(&self) -> Instant {
        let end = self.watched.renewed_at() + self.lease;
        end.checked_sub(crate::time::drift(self.lease))
            .unwrap_or(end)
    }

    /// Whether the permit is at risk: a renewal failed, or none was confirmed for two renewal
    /// periods (two thirds of the lease), or it is lost. The next confirmed renewal clears it
    /// (unless it is lost, which is final). An early warning before [`lost`](PermitGuard::lost),
    /// as for [`LockGuard::is_at_risk`](crate::LockGuard::is_at_risk).
    pub fn is_at_risk(&self) -> bool {
        if self.is_lost() || self.watched.is_at_risk() {
            return true;
        }
        if Instant::now() < self.late_after() {
            return false;
        }
        if self.watched.risk() {
            crate::observe::at_risk("permit_semaphore", "late");
            tracing::info!(semaphore = %self.sem.name, "permit at risk: no renewal confirmed for two renewal periods");
        }
        true
    }

    /// Two renewal periods after the last confirmed renewal was sent.
    fn late_after(&self) -> Instant {
        self.watched.renewed_at() + self.lease / 3 * 2
    }

    /// Resolves when the permit is at risk (see [`is_at_risk`](PermitGuard::is_at_risk)), at
    /// once if it is now; no later than [`lost`](PermitGuard::lost) would.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// # Errors
    ///
    /// None: it only waits, and never fails.
    pub async fn at_risk(&self) {
        loop {
            let deadline = self.late_after();
            let changed = self.watched.changed(|| self.is_at_risk());
            if tokio::time::timeout_at(deadline.into(), changed)
                .await
                .is_ok()
            {
                if self.is_at_risk() {
                    return;
                }
            } else if self.is_at_risk() {
                return;
            } else if self.late_after() <= deadline {
                // Timer and clock disagree (a paused test clock): don't spin.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// Resolves once the permit is lost (see [`is_lost`](PermitGuard::is_lost)); never while
    /// the watchdog keeps renewing it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// # Errors
    ///
    /// None: it only waits, and never fails.
    pub async fn lost(&self) {
        loop {
            let deadline = self.valid_until();
            match tokio::time::timeout_at(deadline.into(), self.watched.lost()).await {
                Ok(()) => return,
                Err(_) if self.is_lost() => return,
                Err(_) => {
                    if self.valid_until() <= deadline {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
        }
    }

    /// Stops the renewal and releases the permit; the new count is published (waking waiters,
    /// Java's included).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the release runs in a task of its own and completes when this future is
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`LockError::UnknownPermit`] when the permit was lost (gone, or its lease had run out:
    /// then it is returned to the pool now); connection errors once the retries are spent (the
    /// renewal has stopped: the permit then returns to the pool within one watchdog lease).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { client.get_permit_expirable_semaphore("upload-slots").try_set_permits(1).await?;
    /// let slots = client.get_permit_expirable_semaphore("upload-slots");
    /// let permit = slots.acquire_guarded().await?;
    /// permit.release().await?;
    /// # Ok(()) })
    /// ```
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        self.sem.client.registry().permits.unwatch(self.watch);
        let sem = self.sem.clone();
        let id = self.id.clone();
        let released = detached("release", async move { sem.release(&id).await }).await?;
        crate::observe::hold_time("permit_semaphore", self.taken.elapsed());
        match released {
            1 => Ok(()),
            _ => Err(LockError::UnknownPermit {
                name: self.sem.name.clone(),
                permit: self.id.to_string(),
            }),
        }
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        self.sem.client.registry().permits.unwatch(self.watch);
        if !self.armed {
            return;
        }
        self.armed = false;
        crate::observe::hold_time("permit_semaphore", self.taken.elapsed());
        // On the current runtime, else on the client's (a guard dropped on a plain thread).
        let (sem, id) = (self.sem.clone(), self.id.clone());
        self.sem
            .client
            .spawn(async move { sem.give_back(&id).await });
    }
}
