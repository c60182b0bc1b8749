//! The lock handle: [`Lock<K>`], the public, documented face of the one lock algorithm.
//! The algorithm itself (acquire, wait, release, settle) is in [`engine`]; lock kinds
//! ([`LockKind`]) only supply scripts.

mod engine;
#[cfg(test)]
mod fair_model;
mod force;
mod guard;
#[cfg(test)]
mod model;
mod query;

pub(crate) use engine::Target;
use engine::{AcquireRequest, Engine, Granted};
pub use force::ForceUnlock;
pub use guard::LockGuard;
pub use query::LockTtl;

use std::sync::Arc;
use std::time::Duration;

use crate::error::{LockError, Result};
use crate::observe;
use crate::owner::LockOwner;
use crate::raw::{LockKind, Release};
use crate::shared::Client;
use crate::time::MAX_DURATION;

/// A distributed lock of kind `K`; [`RLock`](crate::RLock) is `Lock<Reentrant>`.
///
/// A `Lock` is a cheap handle (an `Arc`): clone it, share it, or create a new one per use with
/// [`Client::get_lock`]. State lives in Redis and in the client, never in the handle.
///
/// # Owners and reentrancy
///
/// Operations act for the [`LockOwner::current`] owner (the current tokio task, or the thread
/// outside a task) unless the handle was bound to an explicit owner with [`Lock::with_owner`].
///
/// Futures that run concurrently in one task (`join!`, `select!`, `FuturesUnordered`,
/// `buffer_unordered`, `for_each_concurrent`) share the task's owner. So that they still exclude
/// each other, the default owner never re-enters: while it holds a lock, or is acquiring it, in
/// this client, another acquire of that lock by it fails at once with [`LockError::Reentry`]
/// (nothing is sent). Run such acquisitions in separate tasks (`tokio::spawn`) to have them
/// wait for each other, as a `tokio::sync::Mutex` would.
///
/// Re-entry on purpose, Redisson's semantics (the hold count goes up and every hold must be
/// released), is one call away: through the hold you have ([`LockGuard::reenter`]), or with an
/// explicit owner ([`Lock::with_owner`]), which re-enters plainly as Java's thread does.
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:lock:Lock");
/// let a = lock.lock().await?;
/// // The same task again: refused, never a silent second hold.
/// assert!(lock.try_lock().await.unwrap_err().is_reentry());
/// // On purpose: through the guard.
/// let b = a.reenter().await?;
/// assert_eq!(lock.hold_count().await?, 2);
/// b.unlock().await?;
/// a.unlock().await?;
/// # Ok(()) })
/// ```
///
/// # Redisson compatibility
///
/// Wire-compatible with Java `RLock` on the same name: they exclude each other, wake each
/// other's waiters, and renew leases the same way. See [`Reentrant`](crate::Reentrant) for the
/// keys and channels touched.
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// use std::time::Duration;
/// let lock = client.get_lock("inventory");
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(2)).await? {
///     // ... critical section, renewed by the watchdog ...
///     guard.unlock().await?;
/// }
/// # Ok(()) })
/// ```
pub struct Lock<K: LockKind> {
    engine: Arc<Engine<K>>,
    owner: Bound,
}

/// Who a handle acts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    /// The default owner, looked up per call: the current task, or else the thread.
    Current,
    /// The default owner of the task that bound it (a multi-lock's members act for their
    /// caller from wherever they run). Checked as [`Bound::Current`] is.
    Default(LockOwner),
    /// An explicit owner ([`Lock::with_owner`], a guard's): Redisson's plain re-entry.
    Explicit(LockOwner),
}

impl<K: LockKind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Lock {
            engine: self.engine.clone(),
            owner: self.owner,
        }
    }
}

impl<K: LockKind> std::fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.engine.name)
            .field("kind", &self.engine.kind)
            .field("owner", &self.owner)
            .finish()
    }
}

impl<K: LockKind> Lock<K> {
    pub(crate) fn new(client: Client, name: String, kind: K) -> Self {
        Lock {
            engine: Arc::new(Engine::new(client, name, kind)),
            owner: Bound::Current,
        }
    }

    /// The lock name (its Redis key).
    pub fn name(&self) -> &str {
        &self.engine.name
    }

    /// The client this lock belongs to.
    pub fn client(&self) -> &Client {
        &self.engine.client
    }

    /// A handle on the same lock that acts for `owner` instead of the current task, so that
    /// several tasks can share one hold (Redisson's `*Async(..., threadId)` overloads).
    ///
    /// An explicit owner re-enters plainly, as Java's thread does: locking again while it holds
    /// the lock increments the hold count, whichever task or future does it (the default owner
    /// is refused with [`LockError::Reentry`] instead).
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// use redisson_lock::LockOwner;
    /// let lock = client.get_lock("jobs").with_owner(LockOwner::unique());
    /// let guard = lock.lock().await?;
    /// let lock2 = lock.clone();
    /// // Another task re-enters the same hold.
    /// tokio::spawn(async move { lock2.lock().await?.unlock().await }).await??;
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub fn with_owner(&self, owner: LockOwner) -> Self {
        Lock {
            engine: self.engine.clone(),
            owner: Bound::Explicit(owner),
        }
    }

    /// A handle that acts for this handle's owner as of now, wherever it is used: an explicit
    /// owner stays explicit, and the default owner stays checked against re-entry
    /// ([`LockError::Reentry`]) though it no longer follows the calling task.
    pub(crate) fn pinned(&self) -> Self {
        let owner = match self.owner {
            Bound::Current => Bound::Default(LockOwner::current()),
            bound => bound,
        };
        Lock {
            engine: self.engine.clone(),
            owner,
        }
    }

    /// Acquires as asked and wraps the grant in its guard.
    async fn take(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard<K>>> {
        // Boxed: a parked waiter then keeps one copy of the acquisition's state (a future moved
        // into another is otherwise laid out in both).
        let acquire = Box::pin(self.engine.acquire(self.request(wait, lease)));
        let r = observe::acquire(self.observed("acquire"), 0, acquire).await;
        Ok(r?.map(|g| self.guard(g)))
    }

    /// `op` on this lock, for its span and metrics.
    pub(super) fn observed(&self, op: &'static str) -> observe::Op<'_> {
        observe::Op::new(op, K::SPEC.name, self.name())
    }

    fn guard(&self, g: Granted) -> LockGuard<K> {
        LockGuard::new(self.with_owner(g.owner), g)
    }

    fn request(&self, wait: Option<Duration>, lease: Option<Duration>) -> AcquireRequest {
        AcquireRequest {
            owner: self.owner(),
            wait,
            lease,
            checked: !matches!(self.owner, Bound::Explicit(_)),
        }
    }

    /// The owner operations on this handle act for: the bound owner, else the current task.
    pub fn owner(&self) -> LockOwner {
        match self.owner {
            Bound::Current => LockOwner::current(),
            Bound::Default(owner) | Bound::Explicit(owner) => owner,
        }
    }

    /// Locks, waiting as long as it takes; the lease is renewed by the watchdog until the guard
    /// is released (Redisson's `lock()`).
    ///
    /// Waiters sleep on the lock's unlock channel and are woken by the release message, or when
    /// the holder's lease runs out (expiry publishes nothing, so each wait is bounded by the
    /// holder's TTL).
    ///
    /// With the default owner (the current task), a lock the task already holds or is acquiring
    /// (another future of the same task) is refused with [`LockError::Reentry`], never entered
    /// twice; re-enter on purpose with [`LockGuard::reenter`] or a [`Lock::with_owner`] handle
    /// (see [Owners and reentrancy](Lock#owners-and-reentrancy)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future at any point leaves no hold and no renewal behind. A
    /// hold that may have been taken is trimmed back in the background, keyed to this owner's
    /// known hold count, so a cancelled re-entry never removes an earlier hold.
    ///
    /// # Errors
    ///
    /// [`LockError::Reentry`] when the default owner already holds or is acquiring this lock
    /// in this client (nothing is sent),
    /// [`LockError::WrongType`] if the key is not a lock, [`LockError::InvalidArgument`] for an
    /// empty name, [`LockError::Timeout`] if subscribing to the unlock channel takes longer than
    /// the subscription timeout, [`LockError::ChannelDenied`] if the server's ACL refuses this
    /// user the unlock channel (it holds nothing then), and connection errors (after riding out
    /// `retry_attempts` consecutive failures while waiting).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:lock:lock");
    /// let guard = lock.lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn lock(&self) -> Result<LockGuard<K>> {
        self.take(None, None).await?.ok_or(LockError::Timeout {
            what: "lock",
            waited: Duration::MAX,
        })
    }

    /// Locks with a fixed lease: the lock expires `lease` after it was taken unless released
    /// first; no watchdog (Redisson's `lock(leaseTime, unit)`).
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::lock`].
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`], and [`LockError::InvalidArgument`] for a zero lease.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:lock:lock_with_lease");
    /// use std::time::Duration;
    /// let guard = lock.lock_with_lease(Duration::from_secs(5)).await?;
    /// assert!(!guard.is_lost());
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard<K>> {
        check_lease(lease)?;
        self.take(None, Some(lease))
            .await?
            .ok_or(LockError::Timeout {
                what: "lock",
                waited: Duration::MAX,
            })
    }

    /// Takes the lock if it is free right now, without waiting; watchdog lease. `Ok(None)`
    /// means another owner holds it (Redisson's `tryLock()`). An explicit owner
    /// ([`Lock::with_owner`]) that holds it re-enters; the default owner (the current task) is
    /// refused with [`LockError::Reentry`] instead, as for [`Lock::lock`].
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::lock`].
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:lock:try_lock");
    /// match lock.try_lock().await? {
    ///     Some(guard) => guard.unlock().await?,
    ///     None => println!("busy"),
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_lock(&self) -> Result<Option<LockGuard<K>>> {
        self.take(Some(Duration::ZERO), None).await
    }

    /// Waits at most `wait` for the lock; watchdog lease. `Ok(None)` when the wait ran out
    /// (Redisson's `tryLock(waitTime, unit)`).
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::lock`].
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`]; running out of `wait` is `Ok(None)`, not an error.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:lock:try_lock_for");
    /// use std::time::Duration;
    /// if let Some(guard) = lock.try_lock_for(Duration::from_millis(500)).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<K>>> {
        self.take(Some(wait), None).await
    }

    /// Waits at most `wait` for the lock, then holds it with a fixed `lease`
    /// (Redisson's `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// # Cancel safety
    ///
    /// As [`Lock::lock`].
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_for`], and [`LockError::InvalidArgument`] for a zero lease.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:lock:try_lock_with_lease");
    /// use std::time::Duration;
    /// let guard = lock.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10)).await?;
    /// if let Some(guard) = guard {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard<K>>> {
        check_lease(lease)?;
        self.take(Some(wait), Some(lease)).await
    }

    /// Releases one hold of the current owner, Redisson style (`unlock()`), for code that keeps
    /// holds without guards ([`LockGuard::detach`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a release that may have been sent is completed in the background.
    ///
    /// # Errors
    ///
    /// [`LockError::NotOwner`] when the owner holds nothing (nothing is changed), and connection
    /// errors after `retry_attempts` tries (the release is then completed in the background).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:lock:unlock");
    /// lock.lock().await?.detach();
    /// lock.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn unlock(&self) -> Result<()> {
        self.engine.check_name()?;
        let owner = self.owner();
        let hold = self.engine.hold(owner);
        let mut pending = true;
        let release = Box::pin(self.engine.release(&hold, Target::Latest, &mut pending));
        let r = observe::release(self.observed("unlock"), 0, release, release_outcome).await;
        self.client().registry().forget(&hold);
        match r? {
            Release::NotHeld => Err(LockError::NotOwner {
                name: self.name().to_owned(),
                field: self.engine.field(owner),
            }),
            _ => Ok(()),
        }
    }
}

/// How a release ended, for its span.
pub(super) fn release_outcome(r: &Release) -> &'static str {
    match r {
        Release::Released => "released",
        Release::StillHeld => "still_held",
        Release::NotHeld => "not_held",
    }
}

fn check_lease(lease: Duration) -> Result<()> {
    if lease.is_zero() {
        Err(LockError::InvalidArgument(
            "lease must be non-zero (use lock() for a watchdog-renewed lease)",
        ))
    } else if lease > MAX_DURATION {
        Err(LockError::InvalidArgument(
            "lease must be at most 100 years",
        ))
    } else {
        Ok(())
    }
}
