//! Permits of a [`Semaphore`] held by a guard that gives them back when dropped, as tokio's
//! `SemaphorePermit` does: a `?` between acquire and release can no longer leak a permit.

use std::time::Duration;

use super::Semaphore;
use crate::error::Result;

/// Permits taken from a [`Semaphore`], given back by [`release`](SemaphoreGuard::release) or
/// when the guard is dropped (in the background, on the current tokio runtime or else on the
/// client's). Redisson's `RSemaphore` has no owner: the data is the same counter a Java
/// `release()` adds to, and [`forget`](SemaphoreGuard::forget) keeps the permits taken for
/// code that gives them back some other way.
///
/// # Examples
///
/// ```
/// # async fn call_api() -> Result<(), redisson_lock::LockError> { Ok(()) }
/// # redisson_lock::__doctest::run(|client| async move {
/// let slots = client.get_semaphore("api:slots");
/// slots.try_set_permits(10).await?;
/// let _permit = slots.acquire_guard().await?;
/// call_api().await?; // an error here still gives the permit back
/// # Ok(()) })
/// ```
#[must_use = "if unused the permits are given back at once"]
#[derive(Debug)]
pub struct SemaphoreGuard {
    sem: Semaphore,
    permits: u32,
    armed: bool,
}

impl Semaphore {
    /// [`acquire`](Semaphore::acquire) as a guard: the permit is given back when the guard is
    /// dropped, or by [`SemaphoreGuard::release`].
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Semaphore::acquire): a permit taken for a caller that is gone is given
    /// back in the background.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Semaphore::acquire).
    pub async fn acquire_guard(&self) -> Result<SemaphoreGuard> {
        self.acquire_many_guard(1).await
    }

    /// [`acquire_many`](Semaphore::acquire_many) as a guard that gives back all `permits`.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_many`](Semaphore::acquire_many).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Semaphore::acquire_many).
    pub async fn acquire_many_guard(&self, permits: u32) -> Result<SemaphoreGuard> {
        self.acquire_many(permits).await?;
        Ok(self.guard(permits))
    }

    /// [`try_acquire`](Semaphore::try_acquire) as a guard; `None` when no permit was free.
    ///
    /// # Cancel safety
    ///
    /// As [`try_acquire`](Semaphore::try_acquire).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Semaphore::try_acquire).
    pub async fn try_acquire_guard(&self) -> Result<Option<SemaphoreGuard>> {
        Ok(self.try_acquire().await?.then(|| self.guard(1)))
    }

    /// [`try_acquire_many_for`](Semaphore::try_acquire_many_for) as a guard; `None` when the
    /// permits were not free within `wait`.
    ///
    /// # Cancel safety
    ///
    /// As [`try_acquire_many_for`](Semaphore::try_acquire_many_for).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_many_for`](Semaphore::try_acquire_many_for).
    pub async fn try_acquire_many_guard_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<SemaphoreGuard>> {
        let taken = self.try_acquire_many_for(permits, wait).await?;
        Ok(taken.then(|| self.guard(permits)))
    }

    fn guard(&self, permits: u32) -> SemaphoreGuard {
        SemaphoreGuard {
            sem: self.clone(),
            permits,
            armed: permits > 0,
        }
    }
}

impl SemaphoreGuard {
    /// How many permits this guard gives back.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// Gives the permits back now and reports how it went.
    ///
    /// # Cancel safety
    ///
    /// As [`Semaphore::release_many`]: once started it completes in the background.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release_many`].
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        self.sem.release_many(self.permits).await
    }

    /// Keeps the permits taken: nothing is given back by this guard.
    pub fn forget(mut self) {
        self.armed = false;
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if !std::mem::take(&mut self.armed) {
            return;
        }
        let (sem, permits) = (self.sem.clone(), self.permits);
        self.sem.named().client.spawn(async move {
            if let Err(e) = sem.release_many(permits).await {
                tracing::warn!(semaphore = %sem.name(), error = %e, "release of a dropped semaphore guard failed");
            }
        });
    }
}
