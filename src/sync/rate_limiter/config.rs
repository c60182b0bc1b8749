//! [`RateLimiterConfig`] and [`RateType`]: a rate limiter's configuration, its checks before
//! anything is sent, and its form in the limiter's hash.

use std::collections::HashMap;
use std::time::Duration;

use crate::config::millis;
use crate::error::{LockError, Result};

/// Redisson's message for a keep-alive shorter than the interval.
const KEEP_ALIVE_SHORT: &str =
    "The parameter keepAliveTime should be greater than or equal to rateInterval";

/// Whose window a [`RateLimiter`](super::RateLimiter) counts (Redisson's `RateType`; stored as
/// its ordinal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateType {
    /// One window shared by every client (`OVERALL`, stored as `0`).
    Overall,
    /// One window per client, i.e. per [`Client`](crate::Client) here and per `RedissonClient`
    /// in Java (`PER_CLIENT`, stored as `1`).
    PerClient,
}

/// A rate limiter's configuration: what
/// [`RateLimiter::try_set_rate`](super::RateLimiter::try_set_rate) and
/// [`RateLimiter::set_rate`](super::RateLimiter::set_rate) write and
/// [`RateLimiter::config`](super::RateLimiter::config) reads back from its hash.
///
/// The two durations are named, not positional: [`new`](Self::new) takes the window, and
/// [`with_keep_alive`](Self::with_keep_alive) the keys' lifetime.
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::{RateLimiterConfig, RateType};
/// let c = RateLimiterConfig::new(RateType::Overall, 100, Duration::from_secs(1))
///     .with_keep_alive(Duration::from_secs(3600));
/// assert_eq!((c.rate, c.keep_alive), (100, Some(Duration::from_secs(3600))));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimiterConfig {
    /// Whose window counts.
    pub rate_type: RateType,
    /// Permits per interval.
    pub rate: u32,
    /// The window's length.
    pub interval: Duration,
    /// How long the limiter's keys live after their last use (`None`: for ever; absent in data
    /// written by Redisson 3.x).
    pub keep_alive: Option<Duration>,
}

impl RateLimiterConfig {
    /// `rate` permits in any window of `interval`, counted as `rate_type` says; no keep-alive.
    /// Checked when it is written (a zero rate, an interval under 1 ms are refused there).
    pub fn new(rate_type: RateType, rate: u32, interval: Duration) -> Self {
        RateLimiterConfig {
            rate_type,
            rate,
            interval,
            keep_alive: None,
        }
    }

    /// Every key of the limiter expires `keep_alive` after its last use (Redisson's
    /// `keepAliveTime`); zero means none. It must be at least the interval.
    pub fn with_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = Some(keep_alive).filter(|k| !k.is_zero());
        self
    }

    /// The checks before anything is sent: `(rate, interval ms, keep-alive ms)`.
    pub(super) fn checked(&self) -> Result<(u64, u64, u64)> {
        let (rate, interval, keep_alive) = (u64::from(self.rate), self.interval, self.keep_alive);
        if rate == 0 {
            return Err(LockError::InvalidArgument("the rate must be at least 1"));
        }
        let interval_ms = millis(interval);
        if interval_ms == 0 {
            return Err(LockError::InvalidArgument(
                "the interval must be at least 1 ms",
            ));
        }
        let keep_ms = keep_alive.map_or(0, millis);
        if keep_ms != 0 && keep_ms < interval_ms {
            return Err(LockError::InvalidArgument(KEEP_ALIVE_SHORT));
        }
        if interval_ms > i64::MAX as u64 || keep_ms > i64::MAX as u64 {
            return Err(LockError::InvalidArgument(
                "the interval and keep-alive must fit Java's long in ms",
            ));
        }
        Ok((rate, interval_ms, keep_ms))
    }

    /// The configuration in a limiter's hash (Redisson's fields `rate`, `interval`, `type`,
    /// `keepAliveTime`); `None` for a hash that is not a rate limiter's.
    pub(super) fn from_hash(map: &HashMap<String, String>) -> Option<RateLimiterConfig> {
        let num = |field: &str| map.get(field)?.parse::<u64>().ok();
        let rate_type = match map.get("type")?.as_str() {
            "0" => RateType::Overall,
            "1" => RateType::PerClient,
            _ => return None,
        };
        let keep_alive = match map.get("keepAliveTime") {
            None => None,
            Some(_) => Some(num("keepAliveTime")?)
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis),
        };
        Some(RateLimiterConfig {
            rate_type,
            rate: u32::try_from(num("rate")?).ok()?,
            interval: Duration::from_millis(num("interval")?),
            keep_alive,
        })
    }
}

impl RateType {
    /// Redisson's ordinal, as the hash's `type` field stores it.
    pub(super) fn ordinal(self) -> u8 {
        match self {
            RateType::Overall => 0,
            RateType::PerClient => 1,
        }
    }
}
