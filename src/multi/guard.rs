//! The guard of a MultiLock or RedLock: the member guards that were taken.

use std::time::{Duration, Instant};

use futures_util::future::{join_all, select_all};

use super::member::MemberGuard;
use crate::error::{LockError, Result};
use crate::error::{QuorumError, QuorumOperation};

/// A held [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock): the member locks that
/// were taken (all of them for a MultiLock, at least the quorum for a RedLock).
///
/// Release with `guard.unlock().await`, which releases every member concurrently and reports
/// each node's outcome. Dropping the guard releases every member in the background, as dropping
/// each [`LockGuard`](crate::LockGuard) does.
///
/// # Lost locks and validity
///
/// The multi-lock is lost when fewer members than the quorum are still held: a member's fixed
/// lease ran out, or its client's watchdog found it gone. [`is_lost`](Self::is_lost) tells you
/// and [`lost`](Self::lost) resolves when that happens. With a fixed lease the lock is also lost
/// when its validity ([`remaining_validity`](Self::remaining_validity), the Redlock rule: lease
/// minus elapsed time minus clock drift) runs out.
///
/// A lock is a lease: a process paused past it can still act after another holder took over.
/// When that matters, protect the resource with a fencing token (see `docs/redlock.md`).
///
/// # Examples
///
/// ```
/// # async fn work() {}
/// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:guard:MultiLockGuard");
/// use std::time::Duration;
/// let guard = redlock.lock_with_lease(Duration::from_secs(10)).await?;
/// tokio::select! {
///     _ = work() => guard.unlock().await?,
///     _ = guard.lost() => eprintln!("quorum lost; work abandoned"),
/// }
/// # Ok(()) })
/// ```
#[must_use = "if unused the multi-lock is immediately released"]
#[clippy::has_significant_drop]
pub struct MultiLockGuard {
    /// The multi-lock's kind and name (metrics and spans), and when it was taken.
    pub(crate) kind: &'static str,
    pub(crate) name: std::sync::Arc<str>,
    pub(crate) taken: Instant,
    /// (node position, member guard) for every member taken.
    pub(crate) guards: Vec<(usize, MemberGuard)>,
    pub(crate) nodes: usize,
    pub(crate) required: usize,
    pub(crate) lease: Option<Duration>,
    /// End of the Redlock validity of a fixed lease; `None` with watchdog renewal.
    pub(crate) valid_until: Option<Instant>,
}

impl std::fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("held_nodes", &self.held_nodes())
            .field("nodes", &self.nodes)
            .field("required", &self.required)
            .field("lease", &self.lease)
            .field("remaining_validity", &self.remaining_validity())
            .finish()
    }
}

impl MultiLockGuard {
    /// Positions (in the list given to [`MultiLock::new`](crate::MultiLock::new)) of the
    /// members this guard holds, ascending.
    pub fn held_nodes(&self) -> Vec<usize> {
        self.guards.iter().map(|(i, _)| *i).collect()
    }

    /// How many members must stay held for the lock to stand (the policy's quorum).
    pub fn required(&self) -> usize {
        self.required
    }

    /// The fixed lease, or `None` when every member is renewed by its client's watchdog.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// Time left before a fixed-lease lock must be considered expired, by the Redlock rule:
    /// the lease, minus the time elapsed since it was (re)applied to the members, minus the clock
    /// drift allowance (1 % of the lease + 2 ms). Zero once it has run out.
    ///
    /// `None` when the members are renewed by the watchdog: the lock then stands until
    /// released or [lost](Self::is_lost).
    pub fn remaining_validity(&self) -> Option<Duration> {
        self.valid_until
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the lock is known to be lost: fewer than [`required`](Self::required) members
    /// are still held, or a fixed lease's validity ran out.
    ///
    /// `false` is a belief, not a promise: a node may have lost its member a moment ago.
    pub fn is_lost(&self) -> bool {
        let held = self.guards.iter().filter(|(_, g)| !g.is_lost()).count();
        held < self.required || self.valid_until.is_some_and(|d| Instant::now() >= d)
    }

    /// Resolves when the lock is known to be lost (see [`is_lost`](Self::is_lost)); pending
    /// while it stands.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    ///
    /// # Errors
    ///
    /// None: it only waits, and never fails.
    pub async fn lost(&self) {
        loop {
            if self.is_lost() {
                return;
            }
            let watching: Vec<_> = self
                .guards
                .iter()
                .filter(|(_, g)| !g.is_lost())
                .map(|(_, g)| Box::pin(g.lost()))
                .collect();
            if watching.is_empty() {
                return;
            }
            let any_member = select_all(watching);
            match self.valid_until {
                Some(deadline) => {
                    let _ = tokio::time::timeout_at(deadline.into(), any_member).await;
                }
                None => {
                    any_member.await;
                }
            }
        }
    }

    /// Releases every member concurrently and reports how it went on each node. Members on
    /// reachable nodes are released even when other nodes fail.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: each member's release that may have been sent is completed in the
    /// background, as with [`LockGuard::unlock`](crate::LockGuard::unlock).
    ///
    /// # Errors
    ///
    /// [`LockError::Quorum`] with [`QuorumOperation::Unlock`] when any member failed, listing
    /// each failed node with its error: [`LockError::LeaseLost`] when that member was already
    /// gone, connection errors (after the client's `retry_attempts`) when the node could not be
    /// reached; such a member is released in the background or expires with its lease.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:guard:unlock2");
    /// let guard = redlock.lock().await?;
    /// if let Err(e) = guard.unlock().await {
    ///     eprintln!("some nodes were not released: {e}");
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn unlock(self) -> Result<()> {
        let MultiLockGuard {
            guards,
            kind,
            name,
            taken,
            ..
        } = self;
        let op = crate::observe::Op::new("release", kind, &name);
        let r = crate::observe::release(op, 0, Box::pin(release_all(guards)), |()| "released");
        let r = r.await;
        if r.is_ok() {
            crate::observe::hold_time(kind, taken.elapsed());
        }
        r
    }
}

/// Releases every member taken; the failures as a [`QuorumError`].
async fn release_all(guards: Vec<(usize, MemberGuard)>) -> Result<()> {
    let held = guards.len();
    let results = join_all(
        guards
            .into_iter()
            .map(|(i, g)| async move { (i, g.unlock().await) }),
    )
    .await;
    let errors: Vec<(usize, LockError)> = results
        .into_iter()
        .filter_map(|(i, r)| r.err().map(|e| (i, e)))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(LockError::Quorum(QuorumError::new(
            QuorumOperation::Unlock,
            held - errors.len(),
            held,
            errors,
        )))
    }
}
