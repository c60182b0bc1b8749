//! The blocking synchronizers: [`Semaphore`], [`CountDownLatch`], [`PermitExpirableSemaphore`],
//! [`RateLimiter`].
//! No owners: a permit or a count is anyone's to release, as in Redisson.

use std::sync::Arc;
use std::time::Duration;

use super::{forward, wrapper, Rt};
use crate::error::Result;
use crate::sync::{KeyTtl, PermitId, RateLimiterConfig};

/// A blocking wrapper type of the async synchronizer of the same name, with what they all
/// share: the name, the async value, and Redisson's `RExpirable` trio.
macro_rules! synchronizer {
    ($(#[$m:meta])* $ty:ident, $of:literal) => {
        wrapper!($(#[$m])* $ty(crate::$ty));

        impl $ty {
            /// Its name (its Redis key).
            pub fn name(&self) -> &str {
                self.inner.name()
            }

            forward! { $of:
                /// Deletes it `ttl` from now (Redisson's `expire`): `true` when it exists.
                fn expire(&self, ttl: Duration) -> bool;
                /// Removes its time to live (Redisson's `clearExpire`).
                fn clear_expire(&self) -> bool;
                /// Its key's time to live (Redisson's `remainTimeToLive`).
                fn remain_time_to_live(&self) -> KeyTtl;
                /// Deletes it (its waiters are not woken).
                fn delete(&self) -> bool;
            }
        }
    };
}

synchronizer!(
    /// A blocking [`crate::Semaphore`] (Redisson's `RSemaphore`).
    ///
    /// ```
    /// # redisson_lock::__doctest::blocking(|client| {
    /// use std::time::Duration;
    /// let workers = client.get_semaphore("crawlers");
    /// workers.try_set_permits_with_ttl(4, Duration::from_secs(3600))?;
    /// workers.acquire()?;
    /// // ... work ...
    /// workers.release()?;
    /// # Ok(()) })
    /// ```
    Semaphore,
    "crate::Semaphore"
);

impl Semaphore {
    forward! { "crate::Semaphore":
        /// Sets the number of permits if the semaphore does not exist.
        fn try_set_permits(&self, permits: i32) -> bool;
        /// Sets the number of permits and a time to live if the semaphore does not exist.
        fn try_set_permits_with_ttl(&self, permits: i32, ttl: Duration) -> bool;
        /// Takes one permit, blocking for as long as it takes.
        fn acquire(&self) -> ();
        /// Takes `permits` permits, blocking for as long as it takes.
        fn acquire_many(&self, permits: u32) -> ();
        /// Takes one permit if one is available now.
        fn try_acquire(&self) -> bool;
        /// Takes one permit if one becomes available within `wait`.
        fn try_acquire_for(&self, wait: Duration) -> bool;
        /// Takes `permits` permits if they are available now.
        fn try_acquire_many(&self, permits: u32) -> bool;
        /// Takes `permits` permits if they become available within `wait`.
        fn try_acquire_many_for(&self, permits: u32, wait: Duration) -> bool;
        /// Gives one permit back, waking waiters.
        fn release(&self) -> ();
        /// Gives `permits` permits back, waking waiters.
        fn release_many(&self, permits: u32) -> ();
        /// Gives `permits` permits back only if the semaphore still exists.
        fn release_if_exists(&self, permits: u32) -> bool;
        /// The permits available now.
        fn available_permits(&self) -> i64;
        /// Takes every available permit, returning how many.
        fn drain_permits(&self) -> i64;
        /// Adds (or, negative, removes) permits.
        fn add_permits(&self, permits: i32) -> ();
    }
}

synchronizer!(
    /// A blocking [`crate::CountDownLatch`] (Redisson's `RCountDownLatch`).
    ///
    /// ```
    /// # redisson_lock::__doctest::blocking(|client| {
    /// use std::time::Duration;
    /// let batch = client.get_count_down_latch("batch-43");
    /// batch.try_set_count(1)?;
    /// let done = batch.clone();
    /// std::thread::spawn(move || done.count_down());
    /// assert!(batch.wait_for(Duration::from_secs(10))?);
    /// # Ok(()) })
    /// ```
    CountDownLatch,
    "crate::CountDownLatch"
);

impl CountDownLatch {
    forward! { "crate::CountDownLatch":
        /// Sets the count if the latch does not exist.
        fn try_set_count(&self, count: i64) -> bool;
        /// Counts down by one, waking the waiters at zero.
        fn count_down(&self) -> ();
        /// The count now (0 when the latch does not exist).
        fn get_count(&self) -> i64;
        /// Blocks until the count reaches zero.
        fn wait(&self) -> ();
        /// Blocks at most `wait` for the count to reach zero: `true` when it did.
        fn wait_for(&self, wait: Duration) -> bool;
    }

    /// The old name of [`wait_for`](CountDownLatch::wait_for).
    ///
    /// # Errors
    ///
    /// As [`wait_for`](CountDownLatch::wait_for).
    #[deprecated(since = "0.2.0", note = "renamed to `wait_for`")]
    pub fn wait_timeout(&self, wait: Duration) -> Result<bool> {
        self.wait_for(wait)
    }
}

synchronizer!(
    /// A blocking [`crate::PermitExpirableSemaphore`] (Redisson's
    /// `RPermitExpirableSemaphore`): permits with ids and leases.
    ///
    /// ```
    /// # redisson_lock::__doctest::blocking(|client| {
    /// use std::time::Duration;
    /// let gpus = client.get_permit_expirable_semaphore("gpu-pool");
    /// gpus.try_set_permits(4)?;
    /// let ids = gpus.with_lease(Duration::from_secs(60)).acquire_many(2)?;
    /// assert_eq!(gpus.acquired_permits()?, 2);
    /// gpus.release_many(&ids)?;
    /// # Ok(()) })
    /// ```
    PermitExpirableSemaphore,
    "crate::PermitExpirableSemaphore"
);

impl PermitExpirableSemaphore {
    /// The same semaphore, whose acquires take permits that live `lease` (see
    /// [`crate::PermitExpirableSemaphore::with_lease`]).
    pub fn with_lease(&self, lease: Duration) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.inner.with_lease(lease), self.rt.clone())
    }

    /// The lease of the permits this handle takes (`None`: never expire).
    pub fn lease(&self) -> Option<Duration> {
        self.inner.lease()
    }

    forward! { "crate::PermitExpirableSemaphore":
        /// Sets the number of permits if the semaphore does not exist.
        fn try_set_permits(&self, permits: i32) -> bool;
        /// Sets the number of permits, whatever it was (Redisson's `setPermits`).
        fn set_permits(&self, permits: i32) -> ();
        /// Takes one permit with this handle's lease, blocking for as long as it takes.
        fn acquire(&self) -> PermitId;
        /// Takes one permit if one is available now.
        fn try_acquire(&self) -> Option<PermitId>;
        /// Takes one permit if one becomes available within `wait`.
        fn try_acquire_for(&self, wait: Duration) -> Option<PermitId>;
        /// Takes `permits` permits at once, all or none, blocking for as long as it takes.
        fn acquire_many(&self, permits: u32) -> Vec<PermitId>;
        /// Takes `permits` permits at once if they are available now (empty: none taken).
        fn try_acquire_many(&self, permits: u32) -> Vec<PermitId>;
        /// Takes `permits` permits at once if they become available within `wait` (empty: none
        /// taken).
        fn try_acquire_many_for(&self, permits: u32, wait: Duration) -> Vec<PermitId>;
        /// Releases the permit `id`.
        fn release(&self, id: &PermitId) -> ();
        /// Releases the permit `id` if it is still held: `true` when it was.
        fn try_release(&self, id: &PermitId) -> bool;
        /// Releases every permit of `ids` (an error names those that were not held).
        fn release_many(&self, ids: &[PermitId]) -> ();
        /// Releases those of `ids` still held, returning how many.
        fn try_release_many(&self, ids: &[PermitId]) -> u32;
        /// The permits available now.
        fn available_permits(&self) -> i64;
        /// The total number of permits, available and acquired (Redisson's `getPermits`).
        fn get_permits(&self) -> i64;
        /// The permits acquired and not yet expired (Redisson's `acquiredPermits`).
        fn acquired_permits(&self) -> i64;
        /// Adds (or, negative, removes) permits.
        fn add_permits(&self, permits: i32) -> ();
        /// The lease left on the permit `id` (`None`: no expiry).
        fn get_lease_time(&self, id: &PermitId) -> Option<Duration>;
        /// Sets a new lease on the permit `id`: `true` when it is still held.
        fn update_lease_time(&self, id: &PermitId, lease: Option<Duration>) -> bool;
    }
}

wrapper!(
    /// A blocking [`crate::RateLimiter`] (Redisson's `RRateLimiter`): waits are plain sleeps of
    /// the delay the server answers, on the calling thread.
    ///
    /// ```
    /// # redisson_lock::__doctest::blocking(|client| {
    /// use std::time::Duration;
    /// use redisson_lock::{RateLimiterConfig, RateType};
    /// let emails = client.get_rate_limiter("sms");
    /// emails.try_set_rate(RateLimiterConfig::new(RateType::Overall, 10, Duration::from_secs(60)))?;
    /// if emails.try_acquire_for(Duration::from_secs(1))? {
    ///     // ... send one ...
    /// }
    /// # Ok(()) })
    /// ```
    RateLimiter(crate::sync::RateLimiter)
);

impl RateLimiter {
    /// Its name (the key of its configuration hash).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    forward! { "crate::RateLimiter":
        /// Sets the rate if none is set (Redisson's `trySetRate`): `true` when it was set.
        fn try_set_rate(&self, config: RateLimiterConfig) -> bool;
        /// Sets the rate, starting a new window (Redisson's `setRate`).
        fn set_rate(&self, config: RateLimiterConfig) -> ();
        /// The rate set, if any (Redisson's `getConfig`).
        fn config(&self) -> Option<RateLimiterConfig>;
        /// The permits left in the current window (Redisson's `availablePermits`).
        fn available_permits(&self) -> i64;
        /// Takes one permit, waiting as long as it takes (Redisson's `acquire`).
        fn acquire(&self) -> ();
        /// Takes `permits`, waiting as long as it takes.
        fn acquire_many(&self, permits: u32) -> ();
        /// Takes one permit if the window has it now: `true` when taken.
        fn try_acquire(&self) -> bool;
        /// Takes one permit, waiting at most `wait`: `true` when taken.
        fn try_acquire_for(&self, wait: Duration) -> bool;
        /// Takes `permits` if the window has them now.
        fn try_acquire_many(&self, permits: u32) -> bool;
        /// Takes `permits`, waiting at most `wait`: `true` when taken (Redisson's `tryAcquire`).
        fn try_acquire_many_for(&self, permits: u32, wait: Duration) -> bool;
        /// Gives one permit back to the current window (Redisson's `release`).
        fn release(&self) -> ();
        /// Gives `permits` back to the current window.
        fn release_many(&self, permits: u32) -> ();
        /// Deletes it (Redisson's `delete`): `true` when a key of it existed.
        fn delete(&self) -> bool;
        /// Deletes it `ttl` from now (Redisson's `expire`): `true` when it exists.
        fn expire(&self, ttl: Duration) -> bool;
        /// Removes its time to live (Redisson's `clearExpire`).
        fn clear_expire(&self) -> bool;
        /// Its configuration key's time to live (Redisson's `remainTimeToLive`).
        fn remain_time_to_live(&self) -> KeyTtl;
    }
}
