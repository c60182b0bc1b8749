//! Redisson's RSpinLock: the RLock hash, taken and released without pub/sub; waiters poll with
//! a backoff instead.

use std::time::Duration;

use rand::RngExt;

use super::{KindSpec, Op, RawLock, Reentrant};
use crate::error::{LockError, Result};
use crate::scripts::Call;

/// The spin lock kind: Redisson's `RSpinLock` (`RedissonSpinLock`), for deployments where
/// pub/sub is unavailable or too costly (very large clusters).
///
/// Waiters never subscribe: each sleeps for the next [`Backoff`] delay and tries again. Re-entry,
/// leases and the watchdog are those of every other kind.
///
/// # Redisson compatibility
///
/// * Key `<name>`: the RLock hash, field `<client uuid>:<owner id>` -> hold count, PTTL = lease
///   (RLock and RSpinLock on one name exclude each other).
/// * Nothing is published: not on release, not on force-unlock (as Redisson's spin lock), so an
///   RLock waiter on the same name wakes only at its TTL bound.
/// * No unlock latch is written by our release (as the RLock).
#[derive(Clone, Copy, Debug, Default)]
pub struct Spin {
    backoff: Backoff,
}

impl Spin {
    /// The spin lock kind polling with `backoff`.
    pub fn new(backoff: Backoff) -> Self {
        Spin { backoff }
    }
}

/// The RLock's layout and scripts (the empty publish command of `Lock::op` silences its
/// releases); only the waiting differs.
impl RawLock for Spin {
    const SPEC: KindSpec = KindSpec {
        name: "spin",
        ..Reentrant::SPEC
    };

    fn acquire_script(&self, op: &Op<'_>, enqueue: bool) -> Call {
        Reentrant.acquire_script(op, enqueue)
    }

    fn release_script(&self, op: &Op<'_>) -> Call {
        Reentrant.release_script(op)
    }

    fn backoff(&self) -> Option<&Backoff> {
        Some(&self.backoff)
    }
}

/// How a [`SpinLock`](crate::SpinLock) waiter spaces its tries (Redisson's `LockOptions.BackOff`).
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::Backoff;
/// // Redisson's default: 1 ms, doubling (plus up to one more ms per failed try), at most 128 ms.
/// let default = Backoff::default();
/// assert_eq!(default, Backoff::exponential(Duration::from_millis(1), Duration::from_millis(128), 2)?);
/// let constant = Backoff::constant(Duration::from_millis(64))?;
/// assert!(Backoff::constant(Duration::ZERO).is_err());
/// # Ok::<(), redisson_lock::LockError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// Starts at `initial`, multiplied by `multiplier` after each try (plus a random jitter of
    /// up to one millisecond per failed try so far), never above `max`.
    Exponential {
        /// The first delay.
        initial: Duration,
        /// The longest delay.
        max: Duration,
        /// The growth factor.
        multiplier: u32,
    },
    /// The same delay before every try, plus a random jitter of up to an eighth of it (so that
    /// waiters released together do not keep trying in lockstep).
    Constant {
        /// The delay.
        delay: Duration,
    },
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::Exponential {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2,
        }
    }
}

impl Backoff {
    /// An exponential backoff.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] when a delay or the multiplier is zero, `initial` exceeds
    /// `max`, or `max` is over 100 years.
    pub fn exponential(initial: Duration, max: Duration, multiplier: u32) -> Result<Self> {
        if initial.is_zero() || multiplier == 0 || initial > max || max > crate::time::MAX_DURATION
        {
            return Err(LockError::InvalidArgument(
                "an exponential backoff needs 0 < initial <= max <= 100 years and a multiplier >= 1",
            ));
        }
        Ok(Backoff::Exponential {
            initial,
            max,
            multiplier,
        })
    }

    /// A constant backoff.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] when `delay` is zero or over 100 years.
    pub fn constant(delay: Duration) -> Result<Self> {
        if delay.is_zero() || delay > crate::time::MAX_DURATION {
            return Err(LockError::InvalidArgument(
                "a constant backoff needs a delay above zero and at most 100 years",
            ));
        }
        Ok(Backoff::Constant { delay })
    }

    /// The delays of one wait, one per try.
    pub(crate) fn delays(&self) -> Delays {
        Delays {
            backoff: *self,
            next: match *self {
                Backoff::Exponential { initial, .. } => initial,
                Backoff::Constant { delay } => delay,
            },
            fails: 0,
        }
    }
}

/// The delays of one wait (Redisson's `BackOffPolicy`).
#[derive(Debug)]
pub(crate) struct Delays {
    backoff: Backoff,
    next: Duration,
    fails: u32,
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let mut rng = rand::rng();
        Some(match self.backoff {
            Backoff::Exponential {
                max, multiplier, ..
            } => {
                let now = self.next;
                self.fails = self.fails.saturating_add(1);
                let jitter = Duration::from_millis(rng.random_range(0..u64::from(self.fails)));
                self.next = now
                    .saturating_mul(multiplier)
                    .saturating_add(jitter)
                    .min(max);
                now
            }
            Backoff::Constant { delay } => {
                let eighth = u64::try_from(delay.as_micros() / 8).unwrap_or(u64::MAX);
                delay.saturating_add(Duration::from_micros(rng.random_range(0..=eighth)))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_delays_grow_to_the_cap() {
        let ms = Duration::from_millis;
        let b = Backoff::exponential(ms(1), ms(128), 2).unwrap();
        let d: Vec<Duration> = b.delays().take(12).collect();
        assert_eq!(d[0], ms(1));
        // Each delay at least doubles (jitter only adds) until the cap, which is never passed.
        for w in d.windows(2) {
            assert!(w[1] >= (w[0] * 2).min(ms(128)), "{d:?}");
            assert!(w[1] <= ms(128), "{d:?}");
        }
        assert_eq!(d[11], ms(128));
    }

    #[test]
    fn constant_delays_stay_within_an_eighth() {
        let ms = Duration::from_millis;
        let b = Backoff::constant(ms(64)).unwrap();
        assert!(b.delays().take(100).all(|d| d >= ms(64) && d <= ms(72)));
    }

    #[test]
    fn bad_backoffs_are_refused() {
        let ms = Duration::from_millis;
        assert!(Backoff::exponential(ms(0), ms(1), 2).is_err());
        assert!(Backoff::exponential(ms(2), ms(1), 2).is_err());
        assert!(Backoff::exponential(ms(1), ms(2), 0).is_err());
        assert!(Backoff::constant(Duration::ZERO).is_err());
        assert!(Backoff::constant(Duration::MAX).is_err());
    }
}
