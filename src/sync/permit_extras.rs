//! The rest of Redisson's `RPermitExpirableSemaphore` on [`PermitExpirableSemaphore`]: totals,
//! `setPermits`, `getLeaseTime`, and releasing several permits at once.

use std::time::Duration;

use super::{detached, epoch_ms, PermitExpirableSemaphore, PermitId};
use crate::error::{LockError, Result};
use crate::scripts;

impl PermitExpirableSemaphore {
    /// The total number of permits: available plus held, after expired ones went back to the
    /// pool (Redisson's `getPermits`); 0 when the semaphore does not exist.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one script (it only reclaims expired permits, as every Redisson read of
    /// this object does).
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let slots = client.get_permit_expirable_semaphore("doc:permit_extras:get_permits"); slots.try_set_permits(4).await?;
    /// let total = slots.get_permits().await?;
    /// let held = slots.acquired_permits().await?;
    /// assert_eq!(total - held, slots.available_permits().await?);
    /// # Ok(()) })
    /// ```
    pub async fn get_permits(&self) -> Result<i64> {
        self.counts(false).await
    }

    /// The permits held now, after expired ones went back to the pool (Redisson's
    /// `acquiredPermits`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one script.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`]; connection errors.
    pub async fn acquired_permits(&self) -> Result<i64> {
        self.counts(true).await
    }

    async fn counts(&self, acquired: bool) -> Result<i64> {
        let c = &self.inner;
        c.check()?;
        let inv = scripts::pes_counts(&c.keys(), epoch_ms(), acquired);
        c.repeatable::<i64>(&inv).await
    }

    /// Sets the total number of permits to `permits` (Redisson's `setPermits`): the available
    /// count becomes `permits` minus those held (negative when more are held), the held
    /// permits keep their ids and leases, and `permits` is published (Redisson's message) when
    /// the total changed. Expired permits are not reclaimed first, as in Redisson.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one script; dropped, it has run entirely or not at all.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a negative total (nothing is sent);
    /// [`LockError::WrongType`]; connection errors (repeating it is harmless: it sets a total).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let slots = client.get_permit_expirable_semaphore("doc:permit_extras:set_permits"); slots.try_set_permits(4).await?;
    /// slots.set_permits(8).await?;
    /// assert_eq!(slots.get_permits().await?, 8);
    /// # Ok(()) })
    /// ```
    pub async fn set_permits(&self, permits: i32) -> Result<()> {
        let c = &self.inner;
        c.check()?;
        if permits < 0 {
            return Err(LockError::InvalidArgument(
                "the total number of permits must not be negative",
            ));
        }
        let inv = scripts::pes_set_permits(&c.keys(), permits);
        c.repeatable::<i64>(&inv).await.map(|_| ())
    }

    /// What is left of the lease of the held permit `id` (Redisson's `getLeaseTime`):
    /// `Some(left)`, or `None` for a permit that never expires.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// [`LockError::UnknownPermit`] when `id` is not held (never acquired, released, or its
    /// lease has ended; Java: `IllegalArgumentException`); connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let slots = client.get_permit_expirable_semaphore("doc:permit_extras:get_lease_time"); slots.try_set_permits(4).await?;
    /// use std::time::Duration;
    /// let id = slots.with_lease(Duration::from_secs(60)).acquire().await?;
    /// assert!(slots.get_lease_time(&id).await?.unwrap() <= Duration::from_secs(60));
    /// # Ok(()) })
    /// ```
    pub async fn get_lease_time(&self, id: &PermitId) -> Result<Option<Duration>> {
        let c = &self.inner;
        c.check()?;
        let inv = scripts::pes_lease_time(&c.keys(), id.bytes(), epoch_ms());
        match c.repeatable::<i64>(&inv).await? {
            -1 => Ok(None),
            left if left >= 0 => Ok(Some(Duration::from_millis(left.unsigned_abs()))),
            _ => Err(LockError::UnknownPermit {
                name: c.name.clone(),
                permit: id.to_string(),
            }),
        }
    }

    /// Releases every permit of `ids` (Redisson's `release(List)`); the amount released is
    /// published.
    ///
    /// # Cancel safety
    ///
    /// Once started it completes in the background, as [`release`](Self::release).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for an empty list (nothing is sent);
    /// [`LockError::UnknownPermit`] naming the ids when not all of them were held (as Java's
    /// `IllegalArgumentException`, the ones that were held **are** released); connection
    /// errors (not retried: a repeat could not tell which ids the first try released).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let slots = client.get_permit_expirable_semaphore("doc:permit_extras:release_many"); slots.try_set_permits(4).await?;
    /// let a = slots.acquire().await?;
    /// let b = slots.acquire().await?;
    /// slots.release_many(&[a, b]).await?;
    /// # Ok(()) })
    /// ```
    pub async fn release_many(&self, ids: &[PermitId]) -> Result<()> {
        let released = self.try_release_many(ids).await?;
        if usize::try_from(released).is_ok_and(|n| n >= distinct(ids)) {
            return Ok(());
        }
        Err(LockError::UnknownPermit {
            name: self.inner.name.clone(),
            permit: ids
                .iter()
                .map(PermitId::as_str)
                .collect::<Vec<_>>()
                .join(","),
        })
    }

    /// Releases the permits of `ids` that are held and whose lease has not ended (Redisson's
    /// `tryRelease(List)`): how many were released. Expired ones go back to the pool first and
    /// do not count.
    ///
    /// # Cancel safety
    ///
    /// As [`release_many`](Self::release_many).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for an empty list (nothing is sent);
    /// [`LockError::WrongType`]; connection errors.
    pub async fn try_release_many(&self, ids: &[PermitId]) -> Result<u32> {
        let c = &self.inner;
        c.check()?;
        if ids.is_empty() {
            return Err(LockError::InvalidArgument(
                "releasing needs at least one permit id",
            ));
        }
        let inner = self.inner.clone();
        let ids = ids.to_vec();
        let n = detached("release", async move {
            let inv = scripts::pes_release_many(
                &inner.keys(),
                ids.iter().map(PermitId::bytes),
                epoch_ms(),
            );
            let n = inner.once::<i64>(&inv).await?;
            // Released or found gone: none of them is this client's to give back at shutdown.
            ids.iter()
                .for_each(|id| inner.client.permit_gone(&id.bytes));
            Ok(n)
        })
        .await?;
        u32::try_from(n).map_err(|_| LockError::UnexpectedReply {
            key: c.name.clone(),
            reply: n.to_string(),
        })
    }
}

/// How many different ids `ids` holds (a repeated id is released once).
fn distinct(ids: &[PermitId]) -> usize {
    let mut seen: Vec<&str> = ids.iter().map(PermitId::as_str).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

impl PermitExpirableSemaphore {
    /// Takes `permits` permits at once, all or none, waiting for as long as it takes
    /// (Redisson's `acquire(permits)` / `acquire(permits, leaseTime, unit)`): their ids, each
    /// with this handle's [`lease`](Self::lease).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire): the ids are made before the script is sent,
    /// and permits taken for a caller that is gone, or whose reply was lost, are released by
    /// their ids in the background.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for 0 permits, more than `i32::MAX`, a zero lease or one
    /// over 100 years, or a refused name (nothing is sent); [`LockError::WrongType`];
    /// connection errors once the retries are spent.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let slots = client.get_permit_expirable_semaphore("doc:permit_extras:acquire_many"); slots.try_set_permits(4).await?;
    /// use std::time::Duration;
    /// let ids = slots.with_lease(Duration::from_secs(60)).acquire_many(3).await?;
    /// assert_eq!(ids.len(), 3);
    /// slots.release_many(&ids).await?;
    /// # Ok(()) })
    /// ```
    pub async fn acquire_many(&self, permits: u32) -> Result<Vec<PermitId>> {
        match self
            .acquire_many_within(None, self.lease(), permits)
            .await?
        {
            Some(ids) => Ok(ids),
            None => Err(LockError::Timeout {
                what: "acquiring permits",
                waited: Duration::MAX,
            }),
        }
    }

    /// Takes `permits` permits at once if they are available now, all or none (Redisson's
    /// `tryAcquire(permits)`): their ids, or an empty list (nothing taken).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    pub async fn try_acquire_many(&self, permits: u32) -> Result<Vec<PermitId>> {
        self.try_acquire_many_for(permits, Duration::ZERO).await
    }

    /// Takes `permits` permits at once if they become available within `wait`
    /// (`Duration::ZERO`: one try), all or none (Redisson's `tryAcquire(permits, waitTime,
    /// leaseTime, unit)` with this handle's lease): their ids, or an empty list when not
    /// within `wait` (nothing taken).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let slots = client.get_permit_expirable_semaphore("doc:permit_extras:try_acquire_many_for"); slots.try_set_permits(4).await?;
    /// use std::time::Duration;
    /// let ids = slots.try_acquire_many_for(2, Duration::from_secs(1)).await?;
    /// if !ids.is_empty() {
    ///     slots.release_many(&ids).await?;
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_acquire_many_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Vec<PermitId>> {
        Ok(self
            .acquire_many_within(Some(wait), self.lease(), permits)
            .await?
            .unwrap_or_default())
    }
}
