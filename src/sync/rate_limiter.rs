//! [`RateLimiter`]: Redisson's `RRateLimiter` (4.x layout, `keepAliveTime` included).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use super::{deadline, epoch_ms, remaining, Named};
use crate::error::{from_script, LockError, Result};
use crate::keys::suffix_name;
use crate::observe;
use crate::scripts::{self, RateKeys};
use crate::shared::Client;

mod config;

pub use config::{RateLimiterConfig, RateType};

/// Redisson's message when the configuration hash is missing or incomplete.
const NOT_INITIALIZED: &str = "RateLimiter is not initialized";
/// Redisson's message when one request wants more permits than the rate.
const EXCEEDS_RATE: &str = "Requested permits amount cannot exceed defined rate";

/// A distributed rate limiter, wire-compatible with Redisson's `RRateLimiter`
/// ([`Client::get_rate_limiter`](crate::Client::get_rate_limiter)): at most `rate` permits are
/// taken in any window of `interval`, across every Java and Rust client sharing the name.
///
/// It must be configured first ([`try_set_rate`](RateLimiter::try_set_rate) or
/// [`set_rate`](RateLimiter::set_rate), from either side); until then every other operation
/// fails with [`LockError::RateLimiter`] ("RateLimiter is not initialized").
///
/// # Redisson compatibility
///
/// * Hash `<name>`: fields `rate`, `interval` (ms), `type` (`0` OVERALL, `1` PER_CLIENT) and
///   `keepAliveTime` (ms, `0`: none).
/// * `{<name>}:value` (OVERALL) or `{<name>}:value:<client id>` (PER_CLIENT): a STRING, the
///   permits left in the window.
/// * `{<name>}:permits` or `{<name>}:permits:<client id>`: a ZSET with one member per take,
///   `struct.pack('Bc0I', #id, id, permits)` (a 16-byte random id), scored by the taker's
///   clock in ms. Takes older than one interval flow back into the value.
/// * Like Redisson, the window uses the clients' clocks: clients whose clocks disagree by `d`
///   shift each other's windows by `d`.
///
/// docs/protocol.md, "Rate limiter", has the whole layout.
///
/// # Waiting
///
/// As Redisson's, a waiter does not subscribe to anything: a refused take answers how long
/// until the oldest take in the window expires, and the waiter sleeps that long (bounded by
/// its deadline), then tries again.
///
/// # Cancel safety
///
/// Every method sends one script per try. Dropped while a take is in flight, a
/// [`try_acquire`](RateLimiter::try_acquire) or [`acquire`](RateLimiter::acquire) may have
/// taken permits that nobody uses; they count against the window until the interval has
/// passed, as any take. A take whose reply was lost is never sent again (it could take twice).
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// use std::time::Duration;
/// use redisson_lock::{RateLimiterConfig, RateType};
/// let limiter = client.get_rate_limiter("api-calls");
/// limiter.try_set_rate(RateLimiterConfig::new(RateType::Overall, 100, Duration::from_secs(1))).await?;
/// if limiter.try_acquire_for(Duration::from_millis(500)).await? {
///     // ... call the API ...
/// }
/// # Ok(()) })
/// ```
#[derive(Clone, Debug)]
pub struct RateLimiter {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The name (the configuration hash); its `channel` is the OVERALL value key (a rate
    /// limiter has no channel).
    named: Named,
    client_value: String,
    permits: String,
    client_permits: String,
}

impl std::ops::Deref for Inner {
    type Target = Named;
    fn deref(&self) -> &Named {
        &self.named
    }
}

/// The metrics' `kind` label.
const KIND: &str = "rate_limiter";

impl Inner {
    fn keys(&self) -> RateKeys<'_> {
        RateKeys {
            name: &self.name,
            value: &self.channel,
            client_value: &self.client_value,
            permits: &self.permits,
            client_permits: &self.client_permits,
        }
    }

    fn refused(&self, reason: &'static str) -> LockError {
        LockError::RateLimiter {
            name: self.name.clone(),
            reason,
        }
    }

    /// A script's reply, where `-1` means the configuration is missing.
    fn initialized(&self, reply: i64) -> Result<i64> {
        match reply {
            -1 => Err(self.refused(NOT_INITIALIZED)),
            n => Ok(n),
        }
    }

    /// One take: `None` when taken, else how long until a retry can succeed.
    async fn take(&self, permits: u64) -> Result<Option<Duration>> {
        let mut id = [0u8; 16];
        rand::rng().fill_bytes(&mut id);
        let inv = scripts::rate_acquire(&self.keys(), permits, epoch_ms(), &id);
        match self.once::<Option<i64>>(&inv).await? {
            None => Ok(None),
            Some(-1) => Err(self.refused(NOT_INITIALIZED)),
            Some(-2) => Err(self.refused(EXCEEDS_RATE)),
            Some(ms) if ms >= 0 => Ok(Some(Duration::from_millis(ms as u64))),
            Some(other) => Err(LockError::UnexpectedReply {
                key: self.name.clone(),
                reply: other.to_string(),
            }),
        }
    }
}

impl RateLimiter {
    pub(crate) fn new(client: Client, name: String) -> RateLimiter {
        let value = suffix_name(&name, "value");
        let permits = suffix_name(&name, "permits");
        let client_value = suffix_name(&value, client.id());
        let client_permits = suffix_name(&permits, client.id());
        let named = Named::new(
            KIND,
            client,
            name,
            value,
            &[&client_value, &permits, &client_permits],
        );
        RateLimiter {
            inner: Arc::new(Inner {
                named,
                client_value,
                permits,
                client_permits,
            }),
        }
    }

    /// The rate limiter's name (its configuration hash).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub(super) fn named(&self) -> &Named {
        &self.inner.named
    }

    /// Its keys as Redisson's `delete` and `expire` name them: the configuration, the OVERALL
    /// value and takes, and this client's PER_CLIENT value and takes.
    pub(super) fn all_keys(&self) -> [&str; 5] {
        let i = &self.inner;
        [
            &i.name,
            &i.channel,
            &i.client_value,
            &i.permits,
            &i.client_permits,
        ]
    }

    /// Deletes the rate limiter (Redisson's `delete`): its configuration, the OVERALL window
    /// and this client's PER_CLIENT window (other clients' PER_CLIENT windows are theirs, as in
    /// Redisson). `true` when any of them existed. Until it is configured again, every other
    /// operation fails with [`LockError::RateLimiter`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one `DEL`.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a refused name; connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let limiter = client.get_rate_limiter("doc:rate_limiter:delete"); limiter.try_set_rate(redisson_lock::RateLimiterConfig::new(redisson_lock::RateType::Overall, 10, std::time::Duration::from_secs(1))).await?;
    /// limiter.delete().await?;
    /// assert!(limiter.config().await?.is_none());
    /// # Ok(()) })
    /// ```
    pub async fn delete(&self) -> Result<bool> {
        self.inner.check()?;
        let mut conn = self.inner.client.conn_synced();
        let n: i64 = redis::cmd("DEL")
            .arg(&self.all_keys()[..])
            .query_async(&mut conn)
            .await?;
        Ok(n > 0)
    }

    /// Configures the limiter if it has no configuration yet (Redisson's `trySetRate`):
    /// `config.rate` permits per `config.interval`, and with a keep-alive every key expires
    /// that long after its last use. `Ok(false)`: a configuration exists, nothing changed.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] (nothing sent) for a zero rate, an interval under 1 ms,
    /// or a keep-alive shorter than the interval (Redisson's message);
    /// [`LockError::WrongType`] when the key holds another type; connection errors.
    ///
    /// # Cancel safety
    ///
    /// One script: dropped, it ran entirely or not at all.
    pub async fn try_set_rate(&self, config: RateLimiterConfig) -> Result<bool> {
        let (rate, interval_ms, rate_type, keep_ms) = self.checked(&config)?;
        let inv = scripts::rate_try_set(&self.inner.name, rate, interval_ms, rate_type, keep_ms);
        // Repeating it after a lost reply cannot set twice; it may report `false` for a set
        // that did happen.
        let set: i64 = self.inner.repeatable(&inv).await?;
        Ok(set == 1)
    }

    /// Replaces the configuration and starts a fresh window (Redisson's `setRate`): the state of
    /// the new type is deleted (for PER_CLIENT, this client's only).
    ///
    /// # Errors
    ///
    /// As [`try_set_rate`](RateLimiter::try_set_rate).
    ///
    /// # Cancel safety
    ///
    /// One script: dropped, it ran entirely or not at all.
    pub async fn set_rate(&self, config: RateLimiterConfig) -> Result<()> {
        let (rate, interval_ms, rate_type, keep_ms) = self.checked(&config)?;
        let inv = scripts::rate_set(&self.inner.keys(), rate, interval_ms, rate_type, keep_ms);
        self.inner.repeatable::<i64>(&inv).await.map(|_| ())
    }

    /// `config` checked ([`RateLimiterConfig::checked`]), then the name: `(rate, interval ms, type, keep ms)`.
    fn checked(&self, config: &RateLimiterConfig) -> Result<(u64, u64, u8, u64)> {
        let (rate, interval_ms, keep_ms) = config.checked()?;
        self.inner.check()?;
        Ok((rate, interval_ms, config.rate_type.ordinal(), keep_ms))
    }

    /// The configuration (Redisson's `getConfig`); `None` when the limiter is not configured
    /// (where Java answers OVERALL, rate 0, interval 0).
    ///
    /// # Errors
    ///
    /// [`LockError::UnexpectedReply`] for a hash that is not a rate limiter's;
    /// [`LockError::WrongType`]; connection errors.
    ///
    /// # Cancel safety
    ///
    /// A read: dropping it changes nothing.
    pub async fn config(&self) -> Result<Option<RateLimiterConfig>> {
        self.inner.check()?;
        let name = &self.inner.name;
        let mut conn = self.inner.client.conn();
        let map: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(name)
            .query_async(&mut conn)
            .await
            .map_err(|e| from_script(KIND, name, e))?;
        if map.is_empty() {
            return Ok(None);
        }
        RateLimiterConfig::from_hash(&map)
            .map(Some)
            .ok_or_else(|| LockError::UnexpectedReply {
                key: name.clone(),
                reply: format!("{map:?}"),
            })
    }

    /// The permits left in the current window (Redisson's `availablePermits`). Like Redisson's,
    /// it writes: it creates the window's value and returns expired takes to it.
    ///
    /// # Errors
    ///
    /// [`LockError::RateLimiter`] when not configured; [`LockError::WrongType`]; connection
    /// errors.
    ///
    /// # Cancel safety
    ///
    /// One script: dropped, it ran entirely or not at all (and what it writes changes no count).
    pub async fn available_permits(&self) -> Result<i64> {
        self.inner.check()?;
        let inv = scripts::rate_available(&self.inner.keys(), epoch_ms());
        self.inner
            .initialized(self.inner.repeatable::<i64>(&inv).await?)
    }

    /// Takes one permit, waiting for as long as it takes (Redisson's `acquire()`).
    ///
    /// # Errors
    ///
    /// [`LockError::RateLimiter`] when not configured or when the permits asked exceed the
    /// rate (it could never succeed); [`LockError::InvalidArgument`] for a refused name;
    /// [`LockError::WrongType`]; connection errors.
    ///
    /// # Cancel safety
    ///
    /// See the type's docs: a take in flight when dropped may have counted.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let limiter = client.get_rate_limiter("doc:rate_limiter:acquire"); limiter.try_set_rate(redisson_lock::RateLimiterConfig::new(redisson_lock::RateType::Overall, 10, std::time::Duration::from_secs(1))).await?;
    /// limiter.acquire().await?;
    /// limiter.acquire_many(3).await?;
    /// # Ok(()) })
    /// ```
    pub async fn acquire(&self) -> Result<()> {
        self.acquire_many(1).await
    }

    /// Takes `permits` at once, waiting for as long as it takes (Redisson's
    /// `acquire(permits)`). Zero permits succeed at once, sending nothing.
    ///
    /// # Errors
    ///
    /// As [`acquire`](RateLimiter::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RateLimiter::acquire).
    pub async fn acquire_many(&self, permits: u32) -> Result<()> {
        self.wait_for(permits, None).await.map(|_| ())
    }

    /// Takes one permit if the window has it now (Redisson's `tryAcquire()`): one try.
    ///
    /// # Errors
    ///
    /// As [`acquire`](RateLimiter::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RateLimiter::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let limiter = client.get_rate_limiter("doc:rate_limiter:try_acquire"); limiter.try_set_rate(redisson_lock::RateLimiterConfig::new(redisson_lock::RateType::Overall, 10, std::time::Duration::from_secs(1))).await?;
    /// use std::time::Duration;
    /// if limiter.try_acquire().await? || limiter.try_acquire_for(Duration::from_millis(500)).await? {
    ///     // ... call the API ...
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_acquire(&self) -> Result<bool> {
        self.try_acquire_many_for(1, Duration::ZERO).await
    }

    /// Takes one permit, waiting up to `wait` for it (Redisson's `tryAcquire(timeout)`).
    ///
    /// # Errors
    ///
    /// As [`acquire`](RateLimiter::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RateLimiter::acquire).
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<bool> {
        self.try_acquire_many_for(1, wait).await
    }

    /// Takes `permits` if the window has them now (Redisson's `tryAcquire(permits)`): one try.
    ///
    /// # Errors
    ///
    /// As [`acquire`](RateLimiter::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RateLimiter::acquire).
    pub async fn try_acquire_many(&self, permits: u32) -> Result<bool> {
        self.try_acquire_many_for(permits, Duration::ZERO).await
    }

    /// Takes `permits`, waiting up to `wait` (zero: one try) for them (Redisson's
    /// `tryAcquire(permits, timeout)`). Zero permits succeed at once, sending nothing.
    ///
    /// # Errors
    ///
    /// As [`acquire`](RateLimiter::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RateLimiter::acquire).
    pub async fn try_acquire_many_for(&self, permits: u32, wait: Duration) -> Result<bool> {
        self.wait_for(permits, deadline(wait)).await
    }

    async fn wait_for(&self, permits: u32, deadline: Option<std::time::Instant>) -> Result<bool> {
        let permits = u64::from(permits);
        self.inner.check()?;
        if permits == 0 {
            return Ok(true);
        }
        let taking = async {
            let mut parked = None;
            loop {
                let Some(delay) = self.inner.take(permits).await? else {
                    return Ok(true);
                };
                // The last try is at the deadline; after it, give up.
                let Some(left) = remaining(deadline) else {
                    return Ok(false);
                };
                parked.get_or_insert_with(|| observe::Parked::new(KIND));
                tokio::time::sleep(delay.min(left)).await;
            }
        };
        observe::acquire(self.inner.observe_as("acquire", KIND), permits, taking).await
    }

    /// Gives one permit back to the window before its interval ends (Redisson 4.x's
    /// `release()`).
    ///
    /// # Errors
    ///
    /// As [`release_many`](RateLimiter::release_many).
    ///
    /// # Cancel safety
    ///
    /// As [`release_many`](RateLimiter::release_many).
    pub async fn release(&self) -> Result<()> {
        self.release_many(1).await
    }

    /// Gives `permits` back to the window before their interval ends (Redisson 4.x's
    /// `release(permits)`): the oldest takes are forgotten first, and the window never holds
    /// more than the rate. Zero permits send nothing.
    ///
    /// # Errors
    ///
    /// [`LockError::RateLimiter`] when not configured; [`LockError::InvalidArgument`] for a
    /// refused name; [`LockError::WrongType`]; connection errors.
    ///
    /// # Cancel safety
    ///
    /// One script: dropped, it ran entirely or not at all. It is not sent again after a lost
    /// reply (it could give back twice).
    pub async fn release_many(&self, permits: u32) -> Result<()> {
        let permits = u64::from(permits);
        self.inner.check()?;
        if permits == 0 {
            return Ok(());
        }
        let inv = scripts::rate_release(&self.inner.keys(), permits);
        let named = &self.inner.named;
        let releasing = named.once::<i64>(&inv);
        let op = named.observe_as("release", KIND);
        let n = observe::release(op, permits, releasing, |_| "released").await?;
        self.inner.initialized(n).map(|_| ())
    }
}
