//! The blocking API (feature `blocking`): the same client and locks for synchronous code, as
//! redis-rs and reqwest offer one.
//!
//! A [`Client`] owns a small multi-threaded tokio runtime (two worker threads) on which the
//! async client runs: the watchdog renews leases and the subscriber wakes waiters while your
//! threads do other work. Each call blocks the calling thread until its future completes.
//!
//! # Owners
//!
//! As in Java, the owner of a lock is the **calling thread** (Redisson's `Thread.getId()`): the
//! same thread locking again re-enters, another thread is another owner.
//! [`Lock::with_owner`] binds an explicit owner instead.
//!
//! # Guards
//!
//! A [`LockGuard`] releases its hold when dropped, synchronously (the drop returns once the
//! release is done; an error is logged). Call [`LockGuard::unlock`] to see the error instead.
//!
//! # Inside an async runtime
//!
//! Blocking a runtime's thread would stall it, so every blocking call made from within a tokio
//! runtime returns [`LockError::InvalidArgument`] instead of blocking (or panicking, as nested
//! `block_on` would); there, use the async API. A guard dropped there releases in the
//! background.
//!
//! ```no_run
//! # fn main() -> Result<(), redisson_lock::LockError> {
//! use std::time::Duration;
//! let client = redisson_lock::blocking::Client::connect("redis://127.0.0.1/")?;
//! let lock = client.get_lock("inventory");
//! if let Some(guard) = lock.try_lock_for(Duration::from_secs(2))? {
//!     // ... critical section, renewed by the watchdog ...
//!     guard.unlock()?;
//! }
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{LockError, Result};
use crate::raw::{
    Backoff, Fair, Fenced, LockKind, NonReentrant, NonReentrantFair, Read, Reentrant, Spin, Write,
};
use crate::{ClientStats, Config, LockOwner, LockTtl};

/// The runtime, shut down in the background when the last handle goes (a plain drop would
/// panic when that happens inside another runtime).
#[derive(Debug)]
struct Rt(Option<tokio::runtime::Runtime>);

impl Rt {
    fn new() -> Result<Arc<Rt>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("redisson-lock")
            .enable_all()
            .build()
            .map_err(|e| LockError::Redis(e.into()))?;
        Ok(Arc::new(Rt(Some(rt))))
    }

    fn runtime(&self) -> Result<&tokio::runtime::Runtime> {
        self.0.as_ref().ok_or(LockError::InvalidArgument(
            "the blocking client's runtime is shut down",
        ))
    }

    /// Runs `f` to completion on the runtime, blocking the calling thread.
    fn block_on<F: Future>(&self, f: F) -> Result<F::Output> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(LockError::InvalidArgument(
                "the blocking API was called from within an async runtime: use the async API there",
            ));
        }
        Ok(self.runtime()?.block_on(f))
    }
}

impl Drop for Rt {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A blocking client: [`crate::Client`] on an internal runtime.
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
    rt: Arc<Rt>,
}

impl Client {
    /// Connects to one server (see [`crate::Client::connect`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::connect`]; [`LockError::InvalidArgument`] when called from within
    /// an async runtime.
    pub fn connect(url: &str) -> Result<Client> {
        Client::with_config(Config::new(url))
    }

    /// Connects with a full [`Config`] (cluster, sentinel, timeouts).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::with_config`]; [`LockError::InvalidArgument`] when called from
    /// within an async runtime.
    pub fn with_config(config: Config) -> Result<Client> {
        let rt = Rt::new()?;
        let inner = rt.block_on(crate::Client::with_config(config))??;
        Ok(Client { inner, rt })
    }

    /// The async client underneath (for code that has both worlds).
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// This client's uuid, the first half of every hash field it writes.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// A snapshot of the client's bookkeeping.
    pub fn stats(&self) -> ClientStats {
        self.inner.stats()
    }

    /// Shuts the client down: no new locks, the watchdog stopped, every hold of this client
    /// released (see [`crate::Client::shutdown`]).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] when called from within an async runtime; otherwise the
    /// holds it could not release are in [`ShutdownReport::unreleased`](crate::ShutdownReport).
    pub fn shutdown(&self) -> Result<crate::ShutdownReport> {
        self.rt.block_on(self.inner.shutdown())
    }

    fn wrap<K: LockKind>(&self, inner: crate::Lock<K>) -> Lock<K> {
        Lock {
            inner,
            rt: self.rt.clone(),
            owner: None,
        }
    }

    /// The reentrant lock called `name` (Redisson's `getLock`).
    pub fn get_lock(&self, name: impl Into<String>) -> Lock<Reentrant> {
        self.wrap(self.inner.get_lock(name))
    }

    /// The fair lock called `name` (Redisson's `getFairLock`).
    pub fn get_fair_lock(&self, name: impl Into<String>) -> Lock<Fair> {
        self.wrap(self.inner.get_fair_lock(name))
    }

    /// The non-reentrant lock called `name` (Redisson's `getNonReentrantLock`).
    pub fn get_non_reentrant_lock(&self, name: impl Into<String>) -> Lock<NonReentrant> {
        self.wrap(self.inner.get_non_reentrant_lock(name))
    }

    /// The non-reentrant fair lock called `name` (Redisson's `getNonReentrantFairLock`).
    pub fn get_non_reentrant_fair_lock(&self, name: impl Into<String>) -> Lock<NonReentrantFair> {
        self.wrap(self.inner.get_non_reentrant_fair_lock(name))
    }

    /// The fenced lock called `name` (Redisson's `getFencedLock`).
    pub fn get_fenced_lock(&self, name: impl Into<String>) -> Lock<Fenced> {
        self.wrap(self.inner.get_fenced_lock(name))
    }

    /// The spin lock called `name` (Redisson's `getSpinLock`).
    pub fn get_spin_lock(&self, name: impl Into<String>) -> Lock<Spin> {
        self.wrap(self.inner.get_spin_lock(name))
    }

    /// The spin lock called `name`, polling with `backoff`.
    pub fn get_spin_lock_with(&self, name: impl Into<String>, backoff: Backoff) -> Lock<Spin> {
        self.wrap(self.inner.get_spin_lock_with(name, backoff))
    }

    /// The read-write lock called `name` (Redisson's `getReadWriteLock`).
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock {
            inner: self.inner.get_read_write_lock(name),
            client: self.clone(),
        }
    }
}

/// A blocking [`crate::ReadWriteLock`].
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    inner: crate::ReadWriteLock,
    client: Client,
}

impl ReadWriteLock {
    /// The read side: shared with other readers.
    pub fn read_lock(&self) -> Lock<Read> {
        self.client.wrap(self.inner.read_lock())
    }

    /// The write side: exclusive.
    pub fn write_lock(&self) -> Lock<Write> {
        self.client.wrap(self.inner.write_lock())
    }
}

/// A blocking [`crate::Lock`]: the same operations, each blocking the calling thread, for the
/// calling thread as owner (unless bound with [`Lock::with_owner`]).
#[derive(Clone, Debug)]
pub struct Lock<K: LockKind> {
    inner: crate::Lock<K>,
    rt: Arc<Rt>,
    owner: Option<LockOwner>,
}

impl<K: LockKind> Lock<K> {
    /// The lock name (its Redis key).
    pub fn name(&self) -> &str {
        self.inner.name()
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
    fn bound(&self) -> crate::Lock<K> {
        self.inner.with_owner(self.owner())
    }

    fn run<T, F: Future<Output = Result<T>>>(
        &self,
        f: impl FnOnce(crate::Lock<K>) -> F,
    ) -> Result<T> {
        let lock = self.bound();
        self.rt.block_on(f(lock))?
    }

    fn guard(&self, g: crate::LockGuard<K>) -> LockGuard<K> {
        LockGuard {
            owner: g.owner(),
            token: g.fencing_token(),
            inner: Some(g),
            rt: self.rt.clone(),
        }
    }

    /// Blocks until the lock is taken, renewed by the watchdog ([`crate::Lock::lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::lock`].
    pub fn lock(&self) -> Result<LockGuard<K>> {
        self.run(|l| async move { l.lock().await })
            .map(|g| self.guard(g))
    }

    /// Blocks until the lock is taken for `lease` ([`crate::Lock::lock_with_lease`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard<K>> {
        self.run(|l| async move { l.lock_with_lease(lease).await })
            .map(|g| self.guard(g))
    }

    /// One attempt, no waiting ([`crate::Lock::try_lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<LockGuard<K>>> {
        self.run(|l| async move { l.try_lock().await })
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// Waits at most `wait` ([`crate::Lock::try_lock_for`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<K>>> {
        self.run(|l| async move { l.try_lock_for(wait).await })
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
        self.run(|l| async move { l.try_lock_with_lease(wait, lease).await })
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// Releases the owner's latest hold ([`crate::Lock::unlock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::unlock`] ([`LockError::NotOwner`] when the owner holds nothing).
    pub fn unlock(&self) -> Result<()> {
        self.run(|l| async move { l.unlock().await })
    }

    /// Deletes the lock whoever holds it ([`crate::Lock::force_unlock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.run(|l| async move { l.force_unlock().await })
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        self.run(|l| async move { l.is_locked().await })
    }

    /// Whether the calling thread (or the bound owner) holds the lock.
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::is_held_by_current`].
    pub fn is_held_by_current(&self) -> Result<bool> {
        self.run(|l| async move { l.is_held_by_current().await })
    }

    /// How many times the calling thread (or the bound owner) holds the lock.
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::hold_count`].
    pub fn hold_count(&self) -> Result<u32> {
        self.run(|l| async move { l.hold_count().await })
    }

    /// Time left before the lock expires.
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::remain_time_to_live`].
    pub fn remain_time_to_live(&self) -> Result<LockTtl> {
        self.run(|l| async move { l.remain_time_to_live().await })
    }
}

impl Lock<Fenced> {
    /// The fencing token counter's current value, without acquiring.
    ///
    /// # Errors
    ///
    /// As [`crate::Lock::current_token`].
    pub fn current_token(&self) -> Result<Option<i64>> {
        self.run(|l| async move { l.current_token().await })
    }
}

/// A held lock; released when dropped (synchronously) or by [`LockGuard::unlock`].
#[derive(Debug)]
pub struct LockGuard<K: LockKind> {
    /// `None` once released or detached (only in `unlock`, `detach` and `drop`).
    inner: Option<crate::LockGuard<K>>,
    owner: LockOwner,
    token: Option<i64>,
    rt: Arc<Rt>,
}

impl<K: LockKind> LockGuard<K> {
    /// The owner this hold belongs to.
    pub fn owner(&self) -> LockOwner {
        self.owner
    }

    /// Whether the hold is known to be gone (expired, deleted, not renewed).
    pub fn is_lost(&self) -> bool {
        self.inner.as_ref().is_none_or(|g| g.is_lost())
    }

    /// Releases this hold, reporting what happened.
    ///
    /// # Errors
    ///
    /// As [`crate::LockGuard::unlock`] ([`LockError::LeaseLost`] when the hold was gone).
    pub fn unlock(mut self) -> Result<()> {
        match self.inner.take() {
            Some(g) => self.rt.block_on(g.unlock())?,
            None => Ok(()),
        }
    }

    /// Keeps the hold past this guard (no release on drop; the watchdog stops renewing it).
    pub fn detach(mut self) {
        if let Some(g) = self.inner.take() {
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

impl<K: LockKind> Drop for LockGuard<K> {
    fn drop(&mut self) {
        let Some(g) = self.inner.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside a runtime: the async guard's own drop releases in the background there.
            drop(g);
            return;
        }
        match self.rt.block_on(g.unlock()) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "release of a dropped blocking guard failed"),
            Err(e) => tracing::warn!(error = %e, "blocking guard dropped without its runtime"),
        }
    }
}
