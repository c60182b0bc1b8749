//! Time bounds shared by every lock: the longest duration we represent, instants that never
//! overflow, Redlock's clock-drift allowance, the time left before a deadline and the client's
//! epoch milliseconds.

use std::time::{Duration, Instant};

/// Longest lease, wait or setting: 100 years (longer ones overflow clocks and mean "forever"
/// anyway).
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Fixed part of the drift allowance (Redlock: 1 % of the lease + 2 ms).
const DRIFT_FIXED: Duration = Duration::from_millis(2);

/// `t + d`, with `d` capped at [`MAX_DURATION`] (and at `t` if even that overflows).
pub(crate) fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d.min(MAX_DURATION)).unwrap_or(t)
}

/// How much earlier than `lease` a client must stop trusting a hold, for the server's clock
/// running faster than ours: 1 % of the lease + 2 ms, as in Redlock.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + DRIFT_FIXED
}

/// Milliseconds since the Unix epoch on this client's clock (Redisson's fair-lock deadlines and
/// permit leases use client clocks).
pub(crate) fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Time left before `deadline`; `None` once it has passed. No deadline: forever.
pub(crate) fn remaining(deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        None => Some(Duration::MAX),
        Some(d) => d
            .checked_duration_since(Instant::now())
            .filter(|l| !l.is_zero()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_never_overflows() {
        let now = Instant::now();
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
        assert_eq!(later(now, Duration::MAX), now + MAX_DURATION);
    }

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(30)), Duration::from_millis(302));
    }
}
