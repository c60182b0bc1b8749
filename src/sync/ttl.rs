//! Redisson's `RExpirable` on the synchronizers: `expire`, `clearExpire`, `remainTimeToLive`.
//! A semaphore and a latch have one key; the permit-expirable semaphore has two (its count and
//! its leases), which Redisson expires together; the rate limiter has five (its configuration,
//! the OVERALL window and this client's PER_CLIENT window, a value and takes each).

use std::time::Duration;

use super::{CountDownLatch, KeyTtl, PermitExpirableSemaphore, RateLimiter, Semaphore};
use crate::error::Result;

/// The three methods on a synchronizer type; `$keys` lists its keys.
macro_rules! expirable {
    ($ty:ty, $what:literal, $example:literal, |$s:ident| $keys:expr) => {
        impl $ty {
            #[doc = concat!("Deletes the ", $what, " `ttl` from now unless the TTL is changed again (Redisson's `expire(Duration)`): `true` when a key of it exists and got the TTL. Waiters are not woken.")]
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: one script; dropped, it has run entirely or not at all.
            ///
            /// # Errors
            ///
            /// [`LockError::InvalidArgument`](crate::LockError::InvalidArgument) for a zero TTL
            /// (use `delete()`) or one over 100 years, or a refused name (nothing is sent);
            /// connection errors.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("# redisson_lock::__doctest::run(|client| async move {")]
            #[doc = $example]
            /// assert!(matches!(x.remain_time_to_live().await?, redisson_lock::KeyTtl::Expires(_)));
            /// x.clear_expire().await?;
            /// # Ok(()) })
            /// ```
            pub async fn expire(&self, ttl: Duration) -> Result<bool> {
                let $s = self;
                self.named().expire_keys(&$keys, Some(ttl)).await
            }

            #[doc = concat!("Removes the ", $what, "'s time to live (Redisson's `clearExpire`): `true` when a key of it had one.")]
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: one script.
            ///
            /// # Errors
            ///
            /// [`LockError::InvalidArgument`](crate::LockError::InvalidArgument) for a refused
            /// name; connection errors.
            pub async fn clear_expire(&self) -> Result<bool> {
                let $s = self;
                self.named().expire_keys(&$keys, None).await
            }

            #[doc = concat!("The time to live of the ", $what, "'s key (Redisson's `remainTimeToLive`, a `PTTL` of its name).")]
            ///
            /// # Cancel safety
            ///
            /// Cancel safe (read only).
            ///
            /// # Errors
            ///
            /// [`LockError::InvalidArgument`](crate::LockError::InvalidArgument) for a refused
            /// name; connection errors.
            pub async fn remain_time_to_live(&self) -> Result<KeyTtl> {
                self.named().key_ttl().await
            }
        }
    };
}

expirable!(
    Semaphore,
    "semaphore",
    "let x = client.get_semaphore(\"quota\");\nx.try_set_permits(10).await?;\nx.expire(std::time::Duration::from_secs(3600)).await?;",
    |s| [s.name()]
);
expirable!(
    CountDownLatch,
    "latch",
    "let x = client.get_count_down_latch(\"batch\");\nx.try_set_count(3).await?;\nx.expire(std::time::Duration::from_secs(3600)).await?;",
    |s| [s.name()]
);
expirable!(
    PermitExpirableSemaphore,
    "semaphore (its count and its leases)",
    "let x = client.get_permit_expirable_semaphore(\"gpu\");\nx.try_set_permits(2).await?;\nx.expire(std::time::Duration::from_secs(3600)).await?;",
    |s| s.all_keys()
);
expirable!(
    RateLimiter,
    "rate limiter (its configuration and windows)",
    "let x = client.get_rate_limiter(\"api\");\nx.try_set_rate(redisson_lock::RateLimiterConfig::new(redisson_lock::RateType::Overall, 10, std::time::Duration::from_secs(1))).await?;\nx.expire(std::time::Duration::from_secs(3600)).await?;",
    |s| s.all_keys()
);
