//! The blocking locks: [`Lock`] (every kind), [`ReadWriteLock`] and [`LockGuard`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{forward, wrapper, Held, Rt};
use crate::error::Result;
use crate::raw::{Fenced, LockKind, Read, Write};
use crate::{lock::LockTtl, owner::LockOwner};

/// A blocking [`crate::ReadWriteLock`].
///
/// ```
/// # redisson_lock::__doctest::blocking(|client| {
/// let rw = client.get_read_write_lock("price-list");
/// let reading = rw.read_lock().lock()?;
/// drop(reading);
/// rw.write_lock().lock()?.unlock()?;
/// # Ok(()) })
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    inner: crate::rwlock::ReadWriteLock,
    rt: Arc<Rt>,
}

impl ReadWriteLock {
    pub(super) fn new(inner: crate::rwlock::ReadWriteLock, rt: Arc<Rt>) -> ReadWriteLock {
        ReadWriteLock { inner, rt }
    }

    /// The read side: shared with other readers.
    pub fn read_lock(&self) -> Lock<Read> {
        Lock::new(self.inner.read_lock(), self.rt.clone())
    }

    /// The write side: exclusive.
    pub fn write_lock(&self) -> Lock<Write> {
        Lock::new(self.inner.write_lock(), self.rt.clone())
    }
}

/// A blocking [`crate::Lock`]: the same operations, each blocking the calling thread, for the
/// calling thread as owner (unless bound with [`Lock::with_owner`]).
///
/// ```
/// # redisson_lock::__doctest::blocking(|client| {
/// let lock = client.get_fair_lock("payroll");
/// let guard = lock.lock()?;
/// assert!(lock.is_held_by_current()?);
/// guard.unlock()?;
/// # Ok(()) })
/// ```
#[derive(Clone, Debug)]
pub struct Lock<K: LockKind> {
    inner: crate::lock::Lock<K>,
    rt: Arc<Rt>,
    owner: Option<LockOwner>,
}

impl<K: LockKind> Lock<K> {
    pub(super) fn new(inner: crate::lock::Lock<K>, rt: Arc<Rt>) -> Lock<K> {
        Lock {
            inner,
            rt,
            owner: None,
        }
    }

    pub(super) fn runtime(&self) -> &Arc<Rt> {
        &self.rt
    }

    /// The lock name (its Redis key).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The async lock underneath, unbound: in async code it acts for the current task.
    pub fn as_async(&self) -> &crate::lock::Lock<K> {
        &self.inner
    }

    /// This handle acting for `owner` instead of the calling thread.
    pub fn with_owner(&self, owner: LockOwner) -> Self {
        Lock {
            owner: Some(owner),
            ..self.clone()
        }
    }

    /// The owner operations act for: the explicit one, or the calling thread.
    pub fn owner(&self) -> LockOwner {
        self.owner.unwrap_or_else(LockOwner::current)
    }

    /// The async lock bound to this call's owner (computed on the calling thread).
    pub(super) fn bound(&self) -> crate::lock::Lock<K> {
        self.inner.with_owner(self.owner())
    }

    fn call<T, F: Future<Output = Result<T>>>(
        &self,
        f: impl FnOnce(crate::lock::Lock<K>) -> F,
    ) -> Result<T> {
        self.rt.block_on(f(self.bound()))?
    }

    fn guard(&self, g: crate::lock::LockGuard<K>) -> LockGuard<K> {
        LockGuard {
            owner: g.owner(),
            token: g.fencing_token(),
            held: Held::new(g, self.rt.clone()),
        }
    }

    /// Blocks until the lock is taken, renewed by the watchdog ([`crate::Lock::lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::lock`].
    pub fn lock(&self) -> Result<LockGuard<K>> {
        self.call(|l| async move { l.lock().await })
            .map(|g| self.guard(g))
    }

    /// Blocks until the lock is taken for `lease` ([`crate::Lock::lock_with_lease`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard<K>> {
        self.call(|l| async move { l.lock_with_lease(lease).await })
            .map(|g| self.guard(g))
    }

    /// One attempt, no waiting ([`crate::Lock::try_lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<LockGuard<K>>> {
        self.call(|l| async move { l.try_lock().await })
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// Waits at most `wait` ([`crate::Lock::try_lock_for`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<K>>> {
        self.call(|l| async move { l.try_lock_for(wait).await })
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// Waits at most `wait`, holds for `lease` ([`crate::Lock::try_lock_with_lease`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock_with_lease`].
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard<K>>> {
        self.call(|l| async move { l.try_lock_with_lease(wait, lease).await })
            .map(|g| g.map(|g| self.guard(g)))
    }

    forward! { "crate::Lock":
        /// Releases the owner's latest hold ([`LockError::NotOwner`](crate::LockError::NotOwner)
        /// when the owner holds nothing).
        fn unlock(&self) -> ();
        /// Deletes the lock whoever holds it.
        fn force_unlock(&self) -> bool;
        /// Whether anyone holds the lock.
        fn is_locked(&self) -> bool;
        /// Whether the calling thread (or the bound owner) holds the lock.
        fn is_held_by_current(&self) -> bool;
        /// How many times the calling thread (or the bound owner) holds the lock.
        fn hold_count(&self) -> u32;
        /// Time left before the lock expires.
        fn remain_time_to_live(&self) -> LockTtl;
    }
}

impl Lock<Fenced> {
    forward! { "crate::Lock":
        /// The fencing token counter's current value, without acquiring.
        fn current_token(&self) -> Option<i64>;
    }
}

/// A held lock; released when dropped (synchronously) or by [`LockGuard::unlock`].
#[derive(Debug)]
pub struct LockGuard<K: LockKind> {
    held: Held<crate::lock::LockGuard<K>>,
    owner: LockOwner,
    token: Option<i64>,
}

impl<K: LockKind> LockGuard<K> {
    /// The owner this hold belongs to.
    pub fn owner(&self) -> LockOwner {
        self.owner
    }

    /// Whether the hold is known to be gone (expired, deleted, not renewed).
    pub fn is_lost(&self) -> bool {
        self.held.get().is_none_or(|g| g.is_lost())
    }

    /// Releases this hold, reporting what happened.
    ///
    /// # Errors
    ///
    /// As [`crate::LockGuard::unlock`] ([`LockError::LeaseLost`](crate::LockError::LeaseLost)
    /// when the hold was gone).
    pub fn unlock(self) -> Result<()> {
        self.held.unlock()
    }

    /// Keeps the hold past this guard (no release on drop; the watchdog stops renewing it).
    pub fn detach(mut self) {
        if let Some(g) = self.held.take() {
            g.detach();
        }
    }
}

impl LockGuard<Fenced> {
    /// The fencing token of this acquisition (see [`crate::LockGuard::token`]).
    pub fn token(&self) -> i64 {
        self.token.unwrap_or(0)
    }
}

wrapper!(
    /// A blocking [`crate::FencedValue`]: a Redis value that refuses writes with a token below the
    /// greatest that wrote it, for a blocking fenced lock's holder.
    ///
    /// ```
    /// # redisson_lock::__doctest::blocking(|client| {
    /// let guard = client.get_fenced_lock("blocking-ledger").lock()?;
    /// let balance = client.get_fenced_value("blocking-ledger:balance");
    /// assert!(balance.set(guard.token(), "100")?); // refused (false) once a later holder wrote
    /// assert_eq!(balance.get()?.as_deref(), Some(&b"100"[..]));
    /// guard.unlock()?;
    /// # Ok(()) })
    /// ```
    FencedValue(crate::fencing::FencedValue)
);

impl FencedValue {
    /// The value's key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The fence's key (see [`crate::FencedValue::fence_key`]).
    pub fn fence_key(&self) -> &str {
        self.inner.fence_key()
    }

    /// Writes `value` if `token` is at least the greatest token that wrote it: `false` (nothing
    /// changed) when a greater one has (see [`crate::FencedValue::set`]).
    ///
    /// # Errors
    ///
    /// As [`crate::FencedValue::set`]; [`LockError::InvalidArgument`](crate::LockError::InvalidArgument)
    /// when called inside a current-thread async runtime (nothing is sent).
    pub fn set(&self, token: i64, value: impl AsRef<[u8]>) -> Result<bool> {
        self.call(move |x| async move { x.set(token, value).await })
    }

    forward! { "crate::FencedValue":
        /// The greatest token that wrote this value (`None`: never written through a fence).
        fn last_token(&self) -> Option<i64>;
        /// The value (`None` when the key does not exist).
        fn get(&self) -> Option<Vec<u8>>;
    }
}
