//! The owned lock guard.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::engine::Granted;
use super::{release_outcome, Lock, Target};
use crate::error::{LockError, Result};
use crate::holds::{GrantId, Hold};
use crate::observe;
use crate::owner::LockOwner;
use crate::raw::{LockKind, Release};

/// One hold of a lock, released by [`LockGuard::unlock`].
///
/// The guard is owned (`'static`, `Send`): move it into another task and unlock it there; it
/// remembers its owner, so the release is right from any task.
///
/// Release explicitly with `guard.unlock().await`, which reports what happened. Dropping a
/// guard still releases the hold, in a background task on the current tokio runtime, or on the
/// client's when dropped on a plain thread (Drop never blocks); should that runtime have shut
/// down, the hold expires with its lease.
///
/// # Dropped guards and the next acquire
///
/// As with `tokio::sync::Mutex`, a guard dropped at the end of its scope is released as far as
/// its owner can tell: the same task's next acquire of the lock waits for that background
/// release (one round trip) instead of finding the lock still held by itself, so Redis (and a
/// Java client) sees the hold count go 1, 0, 1, never 2. The wait counts against the acquire's
/// own wait bound; a [`try_lock`](Lock::try_lock) waits for it too. The same holds after an
/// [`unlock`](LockGuard::unlock) that returned an error: its guard's release goes on in the
/// background and is waited for. When that release cannot complete (the server unreachable), the
/// next acquire first trims the owner's hold back (`lua/trim.lua`) and fails with the
/// connection error if the server is still away; a release refused for good (a key of the wrong
/// type) is given up, and the hold expires with its lease.
///
/// ```
/// # async fn do_work() -> Result<(), redisson_lock::LockError> { Ok(()) }
/// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:guard:item");
/// for _ in 0..3 {
///     let _guard = lock.lock().await?;
///     do_work().await?;
/// } // each iteration's guard is released here
/// # Ok(()) })
/// ```
///
/// # Lost holds
///
/// A hold can be lost while you work: its fixed lease ran out, the watchdog found the key gone
/// (deleted, force-unlocked, server restarted empty) or could not reach the server for a whole
/// lease. [`is_lost`](LockGuard::is_lost) tells you, and [`lost`](LockGuard::lost) resolves
/// when it happens, so you can stop work that is no longer protected:
///
/// ```
/// # async fn work() {}
/// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:guard:LockGuard");
/// let guard = lock.lock().await?;
/// tokio::select! {
///     _ = work() => guard.unlock().await?,
///     _ = guard.lost() => eprintln!("lock lost; work abandoned"),
/// }
/// # Ok(()) })
/// ```
///
/// # At risk before lost
///
/// A watchdog hold is *at risk* while a renewal failed (an error or a timeout) or none was
/// confirmed for two renewal periods (two thirds of the watchdog timeout), but its lease is
/// still valid: Redis still has it, and if the next renewal gets through it is kept. This is an
/// early warning, before [`lost`](LockGuard::lost): [`is_at_risk`](LockGuard::is_at_risk) tells
/// you, [`at_risk`](LockGuard::at_risk) resolves when it happens, and the next confirmed renewal
/// clears it. A lost hold is always at risk too.
///
/// ```
/// # async fn work() {}
/// # async fn checkpoint() {}
/// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:guard:LockGuard2");
/// let guard = lock.lock().await?;
/// tokio::select! {
///     _ = work() => {}
///     // Save what can be saved while the hold is still valid.
///     _ = guard.at_risk() => checkpoint().await,
/// }
/// guard.unlock().await?;
/// # Ok(()) })
/// ```
///
/// A lock is a lease: a process paused past it (GC, SIGSTOP, swap) can still act after another
/// holder took over. Protect the resource itself with a fencing token when that matters.
#[must_use = "if unused the lock is immediately released"]
#[clippy::has_significant_drop]
pub struct LockGuard<K: LockKind> {
    lock: Lock<K>,
    hold: Arc<Hold>,
    epoch: u64,
    /// This acquisition within the owner's hold.
    grant: GrantId,
    /// The fixed lease and its deadline (from when the acquire was sent); `None`: watchdog.
    lease: Option<(Duration, Instant)>,
    token: Option<i64>,
    armed: bool,
    /// When the guard was handed out (for the hold-time metric).
    taken: Instant,
}

impl<K: LockKind> std::fmt::Debug for LockGuard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock.name())
            .field("owner", &self.lock.owner())
            .field("lease", &self.lease.map(|l| l.0))
            .field("lost", &self.is_lost())
            .field("at_risk", &self.is_at_risk())
            .finish()
    }
}

impl<K: LockKind> LockGuard<K> {
    pub(super) fn new(lock: Lock<K>, g: Granted) -> Self {
        LockGuard {
            lock,
            hold: g.hold,
            epoch: g.epoch,
            grant: g.grant,
            lease: g.lease,
            token: g.token,
            armed: true,
            taken: Instant::now(),
        }
    }

    /// Re-applies this hold's lease from now (MultiLock re-applies the caller's lease to every
    /// member once all are taken): a fixed lease becomes `lease` from now; a watchdog hold is
    /// renewed. `Ok(false)`: the hold is gone.
    pub(crate) async fn reapply_lease(&mut self, lease: Duration) -> Result<bool> {
        let sent = Instant::now();
        let fixed = self.lease.map(|_| lease);
        let set = self
            .lock
            .engine
            .reapply_lease(&self.hold, self.epoch, self.grant, fixed)
            .await?;
        if let (true, Some(l)) = (set, fixed) {
            self.lease = Some((l, crate::time::later(sent, l)));
        }
        Ok(set)
    }

    /// The lock this guard holds (bound to the guard's owner).
    pub fn lock(&self) -> &Lock<K> {
        &self.lock
    }

    /// The owner this hold belongs to.
    pub fn owner(&self) -> LockOwner {
        self.lock.owner()
    }

    /// The fixed lease, or `None` when the watchdog renews this hold.
    pub fn lease(&self) -> Option<Duration> {
        self.lease.map(|l| l.0)
    }

    /// Whether this hold is known to be gone (see [Lost holds](LockGuard#lost-holds)).
    ///
    /// A watchdog hold counts as lost once its validity ran out: a whole lease (less a clock
    /// drift allowance) since the last renewal that Redis confirmed was sent. Past that point
    /// Redis may have expired it and handed the lock to someone else, even if the watchdog has
    /// not heard back yet (a partition, a stalled server or a stalled process); the hold is then
    /// treated as lost for good.
    ///
    /// `false` is a belief, not a promise: Redis may have lost the hold a moment ago.
    pub fn is_lost(&self) -> bool {
        if self.hold.epoch() != self.epoch {
            return true;
        }
        if Instant::now() < self.valid_until() {
            return false;
        }
        if self.lease.is_none() {
            // Final: a renewal that still gets through later must not revive it.
            self.hold.lose(self.epoch);
        }
        true
    }

    /// When this hold stops being valid. A fixed lease: its deadline (from when the acquire was
    /// sent) less Redlock's drift allowance (1% + 2 ms). A watchdog hold, unless
    /// renewed before: the last confirmed renewal (from when it was sent) plus the lease, less
    /// Redlock's drift allowance for the server's clock (1% + 2 ms).
    fn valid_until(&self) -> Instant {
        match self.lease {
            // The server's clock may run fast: trust a fixed lease a drift allowance less too
            // (Redlock's validity rule), as for watchdog holds.
            Some((lease, deadline)) => deadline
                .checked_sub(crate::time::drift(lease))
                .unwrap_or(deadline),
            None => {
                let lease = self.lock.client().config().watchdog_timeout();
                self.hold.renewed_at() + lease.saturating_sub(crate::time::drift(lease))
            }
        }
    }

    /// Resolves when this hold is known to be lost (see [`is_lost`](LockGuard::is_lost));
    /// pending forever while it is held.
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
            let deadline = self.valid_until();
            let ended = self.hold.epoch_ended(self.epoch);
            match tokio::time::timeout_at(deadline.into(), ended).await {
                Ok(()) => return,
                // Renewed meanwhile (the deadline moved on): keep waiting.
                Err(_) if !self.is_lost() => {
                    if self.valid_until() <= deadline {
                        // Timer and clock disagree (a paused test clock): don't spin.
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// Whether this hold is at risk (see [At risk before lost](LockGuard#at-risk-before-lost)):
    /// a renewal failed, or none was confirmed for two renewal periods, or the hold is lost.
    /// The next confirmed renewal clears it (unless the hold is lost, which is final).
    ///
    /// A hold with a fixed lease is not renewed, so it is at risk only once it is lost.
    pub fn is_at_risk(&self) -> bool {
        if self.is_lost() {
            return true;
        }
        if self.lease.is_some() {
            return false;
        }
        if self.hold.is_at_risk() {
            return true;
        }
        if Instant::now() < self.late_after() {
            return false;
        }
        if self.hold.risk() {
            observe::at_risk(K::SPEC.name, "late");
            tracing::info!(
                lock = %self.lock.name(),
                "lock at risk: no renewal confirmed for two renewal periods (the lease is still valid)"
            );
        }
        true
    }

    /// When a watchdog hold's renewal counts as late: two renewal periods (the watchdog renews
    /// every third of its timeout) after the last confirmed one was sent. A fixed lease: when
    /// it stops being valid.
    fn late_after(&self) -> Instant {
        match self.lease {
            Some(_) => self.valid_until(),
            None => {
                let lease = self.lock.client().config().watchdog_timeout();
                self.hold.renewed_at() + lease / 3 * 2
            }
        }
    }

    /// Resolves when this hold is at risk (see [`is_at_risk`](LockGuard::is_at_risk)), at once
    /// if it is now; pending while it is held safely. It resolves no later than
    /// [`lost`](LockGuard::lost) would, and usually a while before.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    ///
    /// # Errors
    ///
    /// None: it only waits, and never fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(lock: redisson_lock::RLock) -> Result<(), redisson_lock::LockError> {
    /// let guard = lock.lock().await?;
    /// guard.at_risk().await;
    /// eprintln!("renewals are failing; the hold may be lost soon");
    /// # Ok(()) }
    /// ```
    pub async fn at_risk(&self) {
        loop {
            let changed = self.hold.changed();
            tokio::pin!(changed);
            // Registered before the check, so a change in between is not missed.
            changed.as_mut().enable();
            if self.is_at_risk() {
                return;
            }
            let deadline = self.late_after();
            if tokio::time::timeout_at(deadline.into(), changed)
                .await
                .is_err()
                && self.late_after() <= deadline
                && !self.is_at_risk()
            {
                // Timer and clock disagree (a paused test clock): don't spin.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// Releases this hold and reports how it went.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a release that may have been sent is completed in the background.
    ///
    /// # Errors
    ///
    /// [`LockError::LeaseLost`] when the hold was already gone (its lease expired or the key was
    /// deleted): whatever you did under it may have overlapped another holder. Connection errors
    /// after `retry_attempts` tries; the release is then completed in the background and its
    /// lease bounds it meanwhile.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:guard:unlock");
    /// let guard = lock.lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn unlock(mut self) -> Result<()> {
        // The guard stays armed until the release is in flight: dropped before that (e.g. while
        // waiting for the owner's gate), its `Drop` still releases the hold.
        let target = self.target();
        // Boxed (as the acquisition is): a task that awaits `lock()` and then `unlock()` keeps
        // the larger of the two futures in its state for its whole life, parked included.
        let release = Box::pin(
            self.lock
                .engine
                .release(&self.hold, target, &mut self.armed),
        );
        let op = self.lock.observed("release");
        let r = observe::release(op, 0, release, release_outcome).await;
        if r.is_ok() {
            self.armed = false;
        }
        self.observe(&r);
        match r? {
            Release::NotHeld => Err(LockError::LeaseLost {
                name: self.lock.name().to_owned(),
            }),
            Release::Released | Release::StillHeld => Ok(()),
        }
    }

    /// Takes the lock once more for this guard's owner, on purpose: Redisson's re-entry. The
    /// owner's hold count goes up by one; the new guard releases that one hold (watchdog lease)
    /// and this guard still releases its own.
    ///
    /// This is how one owner nests holds: with the default owner (the current task), a second
    /// `lock()` of a lock the task holds is refused with [`LockError::Reentry`], since another
    /// future of the same task would silently share the hold. A [`Lock::with_owner`] handle
    /// re-enters plainly, as Redisson does.
    ///
    /// It never waits: the owner holds the lock, so the re-entry is granted at once (the
    /// non-reentrant kinds refuse it with [`LockError::AlreadyHeld`]).
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::lock`]: a re-entry that may have been taken is trimmed back, and this guard's
    /// hold is never touched.
    ///
    /// # Errors
    ///
    /// [`LockError::LeaseLost`] when this guard's hold is gone (nothing is taken then),
    /// [`LockError::AlreadyHeld`] for the non-reentrant kinds, and connection errors as for
    /// [`Lock::lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:guard:reenter");
    /// let outer = lock.lock().await?;
    /// // `lock.lock()` here would be refused: this task holds it already.
    /// let inner = outer.reenter().await?; // hold count 2
    /// inner.unlock().await?;
    /// outer.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn reenter(&self) -> Result<LockGuard<K>> {
        self.reenter_as(None).await
    }

    /// [`reenter`](Self::reenter) with a fixed lease for the new hold (Redisson's
    /// `lock(leaseTime, unit)` by the holder). The key's expiry still covers every hold the
    /// owner has, so a shorter lease never cuts this guard's hold short.
    ///
    /// # Cancel safety
    ///
    /// As [`reenter`](Self::reenter).
    ///
    /// # Errors
    ///
    /// As [`reenter`](Self::reenter), and [`LockError::InvalidArgument`] for a zero lease.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:guard:reenter_with_lease");
    /// use std::time::Duration;
    /// let outer = lock.lock().await?;
    /// let inner = outer.reenter_with_lease(Duration::from_secs(5)).await?;
    /// assert_eq!(inner.lease(), Some(Duration::from_secs(5)));
    /// inner.unlock().await?;
    /// outer.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn reenter_with_lease(&self, lease: Duration) -> Result<LockGuard<K>> {
        self.reenter_as(Some(lease)).await
    }

    async fn reenter_as(&self, lease: Option<Duration>) -> Result<LockGuard<K>> {
        let lost = || LockError::LeaseLost {
            name: self.lock.name().to_owned(),
        };
        if self.is_lost() {
            return Err(lost());
        }
        // `self.lock` acts for this guard's owner explicitly: a plain re-entry.
        let taken = match lease {
            None => self.lock.try_lock().await?,
            Some(l) => self.lock.try_lock_with_lease(Duration::ZERO, l).await?,
        };
        match taken {
            Some(inner) if inner.epoch == self.epoch => Ok(inner),
            // Redis had lost this guard's hold: what was taken is a new hold, not a re-entry
            // (taking it ended this guard's epoch). Give it back.
            Some(fresh) => {
                if let Err(e) = fresh.unlock().await {
                    tracing::debug!(lock = %self.lock.name(), error = %e, "release of a hold taken for a lost re-entry failed");
                }
                Err(lost())
            }
            // Another owner holds it: this guard's hold is gone.
            None => Err(lost()),
        }
    }

    /// Keeps the hold but gives up the guard, for Redisson-style code that releases with
    /// [`Lock::unlock`] by the same owner. A watchdog hold keeps being renewed until then.
    pub fn detach(mut self) {
        self.armed = false;
    }

    fn target(&self) -> Target {
        Target::Grant {
            epoch: self.epoch,
            id: self.grant,
        }
    }

    async fn release(&self) -> Result<Release> {
        let r = self
            .lock
            .engine
            .release(&self.hold, self.target(), &mut true)
            .await;
        self.observe(&r);
        r
    }

    /// Hold time of a grant given back; a lost lease when it was already gone.
    fn observe(&self, r: &Result<Release>) {
        match r {
            Ok(Release::NotHeld) => observe::lease_lost(K::SPEC.name, "release"),
            Ok(_) => observe::hold_time(K::SPEC.name, self.taken.elapsed()),
            Err(_) => {}
        }
    }
}

impl<K: LockKind> LockGuard<K> {
    /// The fencing token, for kinds that issue one.
    #[cfg(feature = "blocking")]
    pub(crate) fn fencing_token(&self) -> Option<i64> {
        self.token
    }
}

impl LockGuard<crate::raw::Fenced> {
    /// The fencing token of this acquisition: strictly greater than every token handed out
    /// before it for this lock, by any client. Send it with every write to the protected
    /// resource and have the resource reject tokens lower than the highest it has seen (and
    /// writes from a token equal to it, if one holder writes only once per hold).
    ///
    /// Tokens are only as durable as the counter key `redisson_lock_token:{name}`: a server that
    /// restarts without persistence, or a failover to a replica that had not received the last
    /// `INCR`, hands out a token again. Keep the replica sync on (`WAIT`) and persistence enabled
    /// where stale writes matter; the fault suite pins this behaviour (`docs/reliability.md`).
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let guard = client.get_fenced_lock("audit-log").lock().await?;
    /// let token = guard.token();
    /// // storage.write_if_newer(token, ...)
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub fn token(&self) -> i64 {
        self.token.unwrap_or(0)
    }
}

mod dropped;
