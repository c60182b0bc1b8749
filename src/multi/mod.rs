//! MultiLock and RedLock: one quorum algorithm over member locks of any kind ([`MemberLock`])
//! that may live on independent Redis masters. The policy ([`QuorumPolicy`]) is the only
//! difference.

mod guard;
mod member;
mod policy;
mod query;
mod round;

use round::Outcome;

pub use crate::error::{QuorumError, QuorumOperation};
pub use guard::MultiLockGuard;
pub use member::MemberLock;
#[cfg(feature = "blocking")]
pub(crate) use policy::required;
pub use policy::{All, Majority, QuorumPolicy};

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::config::millis;
use crate::error::{LockError, Result};
use crate::observe;
use crate::time::MAX_DURATION;

/// Budget of one round of [`MultiLock::lock`] per member (Redisson's `baseWaitTime`).
const BASE_WAIT_PER_LOCK: Duration = Duration::from_millis(1500);
/// Upper bound of the random pause between two rounds, so contenders fall out of step.
const MAX_ROUND_PAUSE: Duration = Duration::from_millis(50);

/// Redisson's `RedissonRedLock`: a [`MultiLock`] that needs a majority of its members.
///
/// Build it from locks of the same name on `N` independent masters (one [`Client`](crate::Client)
/// each, usually N = 3 or 5): it is taken when `N / 2 + 1` of them are. It tolerates a minority
/// of nodes being down, slow or restarting. Read `docs/redlock.md` before relying on it for
/// correctness: when overlapping holders would corrupt data, a fencing token is the answer.
///
/// # Examples
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), redisson_lock::LockError> {
/// use std::time::Duration;
/// use redisson_lock::{Client, RedLock};
///
/// let mut locks = Vec::new();
/// for url in ["redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/"] {
///     locks.push(Client::connect(url).await?.get_lock("orders:42"));
/// }
/// let redlock = RedLock::new(locks)?;
/// if let Some(guard) = redlock.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10)).await? {
///     println!("valid for {:?}", guard.remaining_validity());
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
pub type RedLock = MultiLock<Majority>;

/// Several locks taken and released as one (Redisson's `RedissonMultiLock`, from
/// `getMultiLock`); with the [`Majority`] policy, a [`RedLock`].
///
/// The members may belong to different [`Client`](crate::Client)s, that is to independent Redis
/// masters, and may be of any kind, as in Redisson: [`RLock`](crate::RLock)s, fair, fenced,
/// spin or non-reentrant locks, and the read or write side of a
/// [`ReadWriteLock`](crate::ReadWriteLock), mixed as you like ([`MemberLock`]). Each member is
/// a plain lock of its kind: same keys, lease, watchdog and unlock channel as a Java lock of
/// that kind and name on that node, and no extra key anywhere.
///
/// # The algorithm
///
/// One call runs *rounds* until the quorum is reached or the wait budget is spent:
///
/// 1. Every member is tried **at once** (no waiting), each bounded by the node timeout.
/// 2. If too many failed for the quorum, but only because some members were held by others,
///    the members are waited for **in list order**, starting at the first busy one, each for at
///    most the policy's [`lock_wait_time`](QuorumPolicy::lock_wait_time). Members after the
///    first busy one are given back before waiting, so a waiter never holds a member that comes
///    after the one it waits for. The round stops as soon as the quorum is reached.
/// 3. A round that ends with more failures than the policy's
///    [`failed_locks_limit`](QuorumPolicy::failed_locks_limit) gives back everything it took and,
///    while the budget lasts, a new round starts after a short random pause.
/// 4. Once the quorum is reached, the lease is re-applied to every member taken with an
///    owner-checked `PEXPIRE` (the caller's lease, or the watchdog lease), which also confirms
///    each member is still ours. By the Redlock rule, the lock is valid only when the quorum is
///    confirmed and `elapsed + drift < lease`, with drift = 1 % of the lease + 2 ms and elapsed
///    counted from the moment the `PEXPIRE`s were sent; otherwise everything is given back and
///    the round counts as failed.
///
/// While members are being taken they carry a lease that outlives the whole round (Redisson
/// takes them with twice the wait time for the same reason); step 4 narrows it to the lease you
/// asked for. Without a lease, each member is renewed by its own client's watchdog.
///
/// # How this differs from Redisson, and why it is compatible
///
/// Redisson walks the members one by one, waiting on each in turn, so taking N free members
/// costs N round trips, and a dead node costs a whole response timeout before the next member is
/// even tried. Here the first attempt goes to every node at the same time, as the Redlock
/// description advises: one round trip when the lock is free, and a dead or stalled node costs
/// at most the node timeout ([`with_node_timeout`](Self::with_node_timeout)), in parallel with
/// the others. Waiting stays sequential and ordered, as in Redisson: two contenders that each
/// took part of the set can then never wait for each other's part (with waits on all nodes at
/// once they would, until both budgets ran out).
///
/// The success rule is Redisson's: the lock is taken when no more than `failed_locks_limit(n)`
/// members failed, with per-member waits from `lock_wait_time`. What lands in Redis is plain
/// `RLock` data on each node, written by the same scripts, so Java and Rust contenders exclude
/// each other member by member, whatever order either side takes them in.
///
/// Differences in behaviour, by design:
///
/// * A round where errors (unreachable nodes, timeouts) alone leave too few members for the
///   quorum ends the call at once with [`LockError::Quorum`], instead of retrying dead nodes
///   until the budget is spent.
/// * [`lock`](Self::lock) runs rounds with Redisson's budget (1.5 s per member), forever.
/// * [`MultiLockGuard::unlock`] releases every member concurrently and reports each node, where
///   Redisson's MultiLock stops at the first failure.
///
/// # Cancel safety
///
/// Every acquire method is cancel safe: dropping the future gives back every member it took or
/// may have taken. Members already taken are released in the background (as a dropped
/// [`LockGuard`](crate::LockGuard) is), and a member whose script was in flight is trimmed back
/// by its client, keyed to this acquisition, so an earlier hold of the same owner is never
/// touched.
///
/// # Owners
///
/// Each member acts for its own owner: the owner it was bound to with
/// [`Lock::with_owner`](crate::Lock::with_owner), else the task that calls the acquire method.
/// Two tasks are two contenders; the guard can be released from any task.
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|a| async move { let b = redisson_lock::__doctest::client().await;
/// use redisson_lock::MultiLock;
/// // Orders and stock live on different masters; take both or neither.
/// let both: MultiLock = MultiLock::new([a.get_lock("orders:49"), b.get_lock("stock:7")])?;
/// let guard = both.lock().await?;
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(()) })
/// ```
pub struct MultiLock<P: QuorumPolicy = All> {
    locks: Vec<MemberLock>,
    /// The members' names joined by `,` (the spans' `redisson_lock.name`).
    label: Arc<str>,
    node_timeout: Option<Duration>,
    _policy: PhantomData<fn() -> P>,
}

impl<P: QuorumPolicy> Clone for MultiLock<P> {
    fn clone(&self) -> Self {
        MultiLock {
            locks: self.locks.clone(),
            label: self.label.clone(),
            node_timeout: self.node_timeout,
            _policy: PhantomData,
        }
    }
}

impl<P: QuorumPolicy> std::fmt::Debug for MultiLock<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("locks", &self.locks)
            .field("required", &self.required())
            .field("node_timeout", &self.node_timeout)
            .finish()
    }
}

impl<P: QuorumPolicy> MultiLock<P> {
    /// A multi-lock over `locks`, in this order (waiting follows it): locks of one kind, or
    /// [`MemberLock`]s of several.
    ///
    /// Annotate the type for a MultiLock (`let m: MultiLock = MultiLock::new(..)?`), or use
    /// [`RedLock::new`](RedLock).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] when `locks` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|a| async move { let b = redisson_lock::__doctest::client().await;
    /// use redisson_lock::{MultiLock, RedLock};
    /// let multi: MultiLock = MultiLock::new([a.get_lock("x"), b.get_lock("y")])?;
    /// let red = RedLock::new([a.get_lock("x"), b.get_lock("x")])?;
    /// assert!(RedLock::new(Vec::<redisson_lock::RLock>::new()).is_err());
    /// # Ok(()) })
    /// ```
    pub fn new<L: Into<MemberLock>>(locks: impl IntoIterator<Item = L>) -> Result<Self> {
        let locks: Vec<MemberLock> = locks.into_iter().map(Into::into).collect();
        if locks.is_empty() {
            return Err(LockError::InvalidArgument(
                "a multi-lock needs at least one lock",
            ));
        }
        let names: Vec<&str> = locks.iter().map(MemberLock::name).collect();
        let label = names.join(",").into();
        Ok(MultiLock {
            locks,
            label,
            node_timeout: None,
            _policy: PhantomData,
        })
    }

    /// Bounds each node's part of an attempt: a member that has not answered within its wait
    /// plus `timeout` counts as failed, and the attempt goes on without it.
    ///
    /// Keep it far below the lease. The default is 5 % of the lease (of the watchdog lease
    /// without one), at most the member's client response timeout. A zero timeout is rejected
    /// by the acquire methods.
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let locks = vec![client.get_lock("doc:multi:with_node_timeout:1"), client.get_lock("doc:multi:with_node_timeout:2"), client.get_lock("doc:multi:with_node_timeout:3")];
    /// use std::time::Duration;
    /// let redlock = redisson_lock::RedLock::new(locks)?.with_node_timeout(Duration::from_millis(50));
    /// # Ok(()) })
    /// ```
    pub fn with_node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// The member locks, in order.
    pub fn locks(&self) -> &[MemberLock] {
        &self.locks
    }

    /// How many members must be taken: all of them for [`All`], `n / 2 + 1` for [`Majority`].
    pub fn required(&self) -> usize {
        policy::required::<P>(self.locks.len())
    }

    /// Locks, trying as long as it takes; every member is renewed by its client's watchdog until
    /// the guard is released (Redisson's `lock()`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: see [Cancel safety](MultiLock#cancel-safety).
    ///
    /// # Errors
    ///
    /// [`LockError::Quorum`] when, in a round, members failed with errors (node unreachable,
    /// node timeout, wrong key type) on more nodes than the policy tolerates; the error lists
    /// each node's error and nothing is left held. [`LockError::InvalidArgument`] for an empty
    /// lock name or a zero node timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:multi:lock");
    /// let guard = redlock.lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn lock(&self) -> Result<MultiLockGuard> {
        self.acquire(None, None).await?.ok_or(LockError::Timeout {
            what: "multi-lock",
            waited: Duration::MAX,
        })
    }

    /// Locks with a fixed lease, re-applied to every member once the quorum is reached; no
    /// watchdog (Redisson's `lock(leaseTime, unit)`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: see [Cancel safety](MultiLock#cancel-safety).
    ///
    /// # Errors
    ///
    /// As [`MultiLock::lock`], and [`LockError::InvalidArgument`] for a zero lease or one over 100
    /// years.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:multi:lock_with_lease");
    /// use std::time::Duration;
    /// let guard = redlock.lock_with_lease(Duration::from_secs(10)).await?;
    /// assert!(guard.remaining_validity() <= Some(Duration::from_secs(10)));
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<MultiLockGuard> {
        self.acquire(None, Some(lease))
            .await?
            .ok_or(LockError::Timeout {
                what: "multi-lock",
                waited: Duration::MAX,
            })
    }

    /// Takes the lock if the quorum of members is free right now, without waiting; watchdog
    /// leases (Redisson's `tryLock()`). `Ok(None)` when too many members are held by others.
    ///
    /// Contenders that all try at the same instant can split the members between them so that
    /// none reaches the quorum; use a wait ([`try_lock_for`](Self::try_lock_for)) when one of
    /// them should win.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: see [Cancel safety](MultiLock#cancel-safety).
    ///
    /// # Errors
    ///
    /// As [`MultiLock::lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:multi:try_lock");
    /// match redlock.try_lock().await? {
    ///     Some(guard) => guard.unlock().await?,
    ///     None => println!("busy"),
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_lock(&self) -> Result<Option<MultiLockGuard>> {
        self.acquire(Some(Duration::ZERO), None).await
    }

    /// Tries for at most `wait`; watchdog leases (Redisson's `tryLock(waitTime, unit)`).
    /// `Ok(None)` when the wait ran out without a valid quorum.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: see [Cancel safety](MultiLock#cancel-safety).
    ///
    /// # Errors
    ///
    /// As [`MultiLock::lock`]; running out of `wait` is `Ok(None)`, not an error.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:multi:try_lock_for");
    /// use std::time::Duration;
    /// if let Some(guard) = redlock.try_lock_for(Duration::from_secs(2)).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        self.acquire(Some(wait), None).await
    }

    /// Tries for at most `wait`, then holds the lock with a fixed `lease`, re-applied to every
    /// member once the quorum is reached (Redisson's `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: see [Cancel safety](MultiLock#cancel-safety).
    ///
    /// # Errors
    ///
    /// As [`MultiLock::try_lock_for`], and [`LockError::InvalidArgument`] for a zero lease or one
    /// over 100 years.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:multi:try_lock_with_lease");
    /// use std::time::Duration;
    /// let wait = Duration::from_millis(500);
    /// if let Some(guard) = redlock.try_lock_with_lease(wait, Duration::from_secs(10)).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiLockGuard>> {
        self.acquire(Some(wait), Some(lease)).await
    }

    // === the algorithm ===

    fn check(&self, lease: Option<Duration>) -> Result<()> {
        if lease.is_some_and(|l| l.is_zero()) {
            return Err(LockError::InvalidArgument(
                "lease must be non-zero (use lock() for watchdog-renewed leases)",
            ));
        }
        if lease.is_some_and(|l| l > MAX_DURATION) {
            return Err(LockError::InvalidArgument(
                "lease must not exceed 100 years",
            ));
        }
        if self.node_timeout.is_some_and(|t| t.is_zero()) {
            return Err(LockError::InvalidArgument("node timeout must be non-zero"));
        }
        if self.locks.iter().any(|l| l.name().is_empty()) {
            return Err(LockError::InvalidArgument("the name must not be empty"));
        }
        Ok(())
    }

    /// `wait`: `None` tries forever (rounds of Redisson's base wait), `Some(ZERO)` one round
    /// without waiting. `lease`: `None` = watchdog.
    /// One acquisition in its span, its wait recorded (as a lock's: `observe::acquire`).
    async fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<MultiLockGuard>> {
        let op = observe::Op::new("acquire", P::KIND, &self.label);
        // Boxed: the rounds' state lives only while an acquisition runs.
        observe::acquire(op, 0, Box::pin(self.rounds(wait, lease))).await
    }

    async fn rounds(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<MultiLockGuard>> {
        self.check(lease)?;
        let n = self.locks.len();
        let required = self.required();
        // Bind every member to its owner now: all of them act for the caller (a default owner
        // stays refused re-entry, as a plain lock's is).
        let locks: Vec<MemberLock> = self.locks.iter().map(MemberLock::bound).collect();
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let base_wait = BASE_WAIT_PER_LOCK.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX));
        loop {
            let budget = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => base_wait,
            };
            let (acquired, errors) = match self.round(&locks, budget, lease).await {
                Outcome::Won(guard) => return Ok(Some(guard)),
                Outcome::Missed { acquired, errors } => (acquired, errors),
            };
            if errors.len() > n - required {
                return Err(LockError::Quorum(QuorumError::new(
                    QuorumOperation::Acquire,
                    acquired,
                    required,
                    errors,
                )));
            }
            for (node, e) in &errors {
                tracing::debug!(node, error = %e, "multi-lock member failed; retrying");
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                return Ok(None);
            }
            let pause_ms = rand::random_range(0..=millis(MAX_ROUND_PAUSE.min(left)));
            tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        }
    }

    /// The default node timeout of a member: 5 % of its lease, at most its response timeout.
    fn node_timeout_for(&self, lock: &MemberLock, lease: Option<Duration>) -> Duration {
        self.node_timeout.unwrap_or_else(|| {
            let config = lock.client().config();
            let lease = lease.unwrap_or(config.watchdog_timeout());
            (lease / 20)
                .min(config.response_timeout())
                .max(Duration::from_millis(1))
        })
    }
}
