//! Quorum policies: the only thing that differs between a MultiLock and a RedLock.

use std::time::Duration;

/// How many member locks a [`MultiLock`](crate::MultiLock) may fail to take, and how long it
/// waits for each one: the two hooks Redisson's `RedissonRedLock` overrides in
/// `RedissonMultiLock` (`failedLocksLimit`, `calcLockWaitTime`).
///
/// The acquisition algorithm is the same for every policy; a policy only answers these two
/// questions. [`All`] makes a MultiLock (every member must be taken) and [`Majority`] makes a
/// [`RedLock`](crate::RedLock) (`n / 2 + 1` members are enough).
///
/// A custom policy may ask for any quorum; a limit of `n` or more is read as `n - 1`, so at least
/// one member is always required.
///
/// # Examples
///
/// A policy that tolerates one failed member, whatever the number of members:
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::{MultiLock, QuorumPolicy};
///
/// struct AllButOne;
///
/// impl QuorumPolicy for AllButOne {
///     fn failed_locks_limit(n: usize) -> usize {
///         n.saturating_sub(1).min(1)
///     }
///     fn lock_wait_time(remaining: Duration, n: usize) -> Duration {
///         remaining / n.max(1) as u32
///     }
/// }
///
/// type TolerantLock = MultiLock<AllButOne>;
/// assert_eq!(AllButOne::failed_locks_limit(4), 1);
/// ```
pub trait QuorumPolicy {
    /// How many of `n` member locks may be missing for the whole to count as taken.
    fn failed_locks_limit(n: usize) -> usize;

    /// How long one member may be waited for when `remaining` of the caller's wait budget is
    /// left.
    fn lock_wait_time(remaining: Duration, n: usize) -> Duration;

    /// The `kind` of a multi-lock with this policy in metrics and spans
    /// ([`observe`](crate::observe)): `multi` unless a policy says otherwise ([`Majority`]
    /// says `redlock`).
    const KIND: &'static str = "multi";
}

/// Every member lock must be taken: Redisson's `RedissonMultiLock`.
///
/// `failed_locks_limit = 0`, `lock_wait_time = remaining`.
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::{All, QuorumPolicy};
/// assert_eq!(All::failed_locks_limit(5), 0);
/// assert_eq!(All::lock_wait_time(Duration::from_secs(3), 5), Duration::from_secs(3));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct All;

impl QuorumPolicy for All {
    fn failed_locks_limit(_n: usize) -> usize {
        0
    }

    fn lock_wait_time(remaining: Duration, _n: usize) -> Duration {
        remaining
    }
}

/// A majority (`n / 2 + 1`) of the member locks is enough: Redisson's `RedissonRedLock`.
///
/// `failed_locks_limit = n - (n / 2 + 1)`, `lock_wait_time = max(remaining / n, 1 ms)`.
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::{Majority, QuorumPolicy};
/// assert_eq!(Majority::failed_locks_limit(3), 1);
/// assert_eq!(Majority::failed_locks_limit(5), 2);
/// assert_eq!(Majority::lock_wait_time(Duration::from_secs(3), 3), Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Majority;

impl QuorumPolicy for Majority {
    const KIND: &'static str = "redlock";

    fn failed_locks_limit(n: usize) -> usize {
        n - (n / 2 + 1).min(n)
    }

    fn lock_wait_time(remaining: Duration, n: usize) -> Duration {
        let n = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        (remaining / n).max(Duration::from_millis(1))
    }
}

/// How many of `n` members policy `P` requires (at least one).
pub(crate) fn required<P: QuorumPolicy>(n: usize) -> usize {
    n - P::failed_locks_limit(n).min(n.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorums_match_redisson() {
        let majority: Vec<usize> = (1..=7).map(required::<Majority>).collect();
        assert_eq!(majority, [1, 2, 2, 3, 3, 4, 4]);
        let all: Vec<usize> = (1..=7).map(required::<All>).collect();
        assert_eq!(all, [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(Majority::failed_locks_limit(0), 0);
    }

    #[test]
    fn wait_times_match_redisson() {
        let s = Duration::from_secs(1);
        assert_eq!(Majority::lock_wait_time(s, 4), Duration::from_millis(250));
        assert_eq!(
            Majority::lock_wait_time(Duration::ZERO, 3),
            Duration::from_millis(1)
        );
        assert_eq!(
            Majority::lock_wait_time(s, 0),
            s,
            "no division by zero on an empty set"
        );
        assert_eq!(All::lock_wait_time(s, 4), s);
    }

    struct Greedy;
    impl QuorumPolicy for Greedy {
        fn failed_locks_limit(n: usize) -> usize {
            n + 10
        }
        fn lock_wait_time(remaining: Duration, _n: usize) -> Duration {
            remaining
        }
    }

    #[test]
    fn at_least_one_member_is_required() {
        assert_eq!(required::<Greedy>(3), 1);
        assert_eq!(required::<Greedy>(1), 1);
    }
}
