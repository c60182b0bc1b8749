//! The blocking API (feature `blocking`): the same client, locks, multi-locks and
//! synchronizers for synchronous code, as redis-rs and reqwest offer one.
//!
//! Every type here is a thin wrapper of its async namesake: [`Lock`], [`ReadWriteLock`],
//! [`MultiLock`] / [`RedLock`], [`FencedValue`], [`Semaphore`], [`CountDownLatch`],
//! [`PermitExpirableSemaphore`] and [`RateLimiter`] run the async method of the same name to
//! completion, so the semantics, the data in Redis and the errors are those of the async API.
//! (The watchdog-renewed [`PermitGuard`](crate::PermitGuard) is not wrapped: take ids with
//! `acquire` and give them back with `release`.)
//!
//! A [`Client`] owns a small multi-threaded tokio runtime (two worker threads) on which the
//! async client runs: the watchdog renews leases and the subscriber wakes waiters while your
//! threads do other work. Each call blocks the calling thread until its future completes.
//!
//! # Owners
//!
//! As in Java, the owner of a lock is the **calling thread** (Redisson's `Thread.getId()`): the
//! same thread locking again re-enters, another thread is another owner.
//! [`Lock::with_owner`] binds an explicit owner instead. A [`MultiLock`] acts, member by
//! member, for each member's bound owner or else the calling thread. The synchronizers have no
//! owners (a permit or a count is anyone's to release), as in Redisson.
//!
//! # Guards
//!
//! A [`LockGuard`] (and a [`MultiLockGuard`]) releases its hold when dropped, synchronously
//! (the drop returns once the release is done; an error is logged). Call
//! [`LockGuard::unlock`] to see the error instead.
//!
//! # Inside an async runtime
//!
//! From a `tokio::task::spawn_blocking` closure of a multi-thread runtime (the place tokio
//! gives blocking code) the blocking API works as on a plain thread; so does a call on one of
//! its workers, which `block_in_place` hands over first (the async API is the better choice
//! there). Inside a current-thread runtime (`#[tokio::main(flavor = "current_thread")]`,
//! `#[tokio::test]`) every blocking call returns [`LockError::InvalidArgument`] instead of
//! blocking its only thread (or panicking, as nested `block_on` would): use the async API
//! there. A guard dropped inside a runtime releases in the background.
//!
//! ```
//! # redisson_lock::__doctest::blocking(|_| {
//! use std::time::Duration;
//! let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".to_owned());
//! let client = redisson_lock::blocking::Client::connect(&url)?;
//! let lock = client.get_lock("stocktake");
//! if let Some(guard) = lock.try_lock_for(Duration::from_secs(2))? {
//!     // ... critical section, renewed by the watchdog ...
//!     guard.unlock()?;
//! }
//! # Ok(()) })
//! ```

mod lock;
mod multi;
mod sync;

pub use lock::{FencedValue, Lock, LockGuard, ReadWriteLock};
pub use multi::{MemberLock, MultiLock, MultiLockGuard, RedLock};
pub use sync::{CountDownLatch, PermitExpirableSemaphore, RateLimiter, Semaphore};

use std::future::Future;
use std::sync::Arc;

use crate::error::{LockError, Result};
use crate::raw::{Backoff, Fair, Fenced, NonReentrant, NonReentrantFair, Reentrant, Spin};
use crate::{client::ClientStats, config::Config};

/// Blocking methods that run the async method of the same name to completion through the
/// wrapper's `call` (which hands the closure the async value, bound to the calling thread's
/// owner where there is one). `$of` is the async type, for the docs.
macro_rules! forward {
    ($of:literal: $( $(#[$m:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty; )*) => {
        $(
            $(#[$m])*
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`", $of, "::", stringify!($name), "`]; [`LockError::InvalidArgument`](crate::LockError::InvalidArgument) when called inside a current-thread async runtime (nothing is sent).")]
            pub fn $name(&self $(, $arg: $ty)*) -> $crate::Result<$ret> {
                self.call(move |x| async move { x.$name($($arg),*).await })
            }
        )*
    };
}
use forward;

/// A blocking wrapper type of an async value: the struct (the value and the runtime), `new`,
/// `as_async`, and the `call` that [`forward!`] goes through.
macro_rules! wrapper {
    ($(#[$m:meta])* $ty:ident($inner:ty)) => {
        $(#[$m])*
        #[derive(Clone, Debug)]
        pub struct $ty {
            inner: $inner,
            rt: Arc<Rt>,
        }

        impl $ty {
            pub(super) fn new(inner: $inner, rt: Arc<Rt>) -> $ty {
                $ty { inner, rt }
            }

            /// The async value underneath (for code that has both worlds).
            pub fn as_async(&self) -> &$inner {
                &self.inner
            }

            fn call<T, F: std::future::Future<Output = $crate::Result<T>>>(
                &self,
                f: impl FnOnce($inner) -> F,
            ) -> $crate::Result<T> {
                self.rt.block_on(f(self.inner.clone()))?
            }
        }
    };
}
use wrapper;

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

    /// Runs `f` to completion on the runtime, blocking the calling thread. Inside a
    /// multi-thread tokio runtime (a `spawn_blocking` closure, or a worker, which
    /// `block_in_place` hands over to another thread first) that is allowed; inside a
    /// current-thread runtime it is refused, as its one thread cannot be told from a
    /// `spawn_blocking` thread and blocking it could wait for a task that never runs.
    fn block_on<F: Future>(&self, f: F) -> Result<F::Output> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        let rt = self.runtime()?;
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Err(_) => Ok(rt.block_on(f)),
            Ok(RuntimeFlavor::MultiThread) => Ok(tokio::task::block_in_place(|| rt.block_on(f))),
            Ok(_) => Err(LockError::InvalidArgument(
                "the blocking API was called inside a current-thread tokio runtime: use the async \
                 API there, or call it from `spawn_blocking` on a multi-thread runtime",
            )),
        }
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
    inner: crate::shared::Client,
    rt: Arc<Rt>,
}

impl Client {
    /// Connects to one server (see [`crate::Client::connect`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::connect`]; [`LockError::InvalidArgument`] when called inside a
    /// current-thread async runtime.
    pub fn connect(url: &str) -> Result<Client> {
        Client::with_config(Config::new(url))
    }

    /// Connects with a full [`Config`] (cluster, sentinel, timeouts).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::with_config`]; [`LockError::InvalidArgument`] when called inside a
    /// current-thread async runtime.
    pub fn with_config(config: Config) -> Result<Client> {
        let rt = Rt::new()?;
        let inner = rt.block_on(crate::shared::Client::with_config(config))??;
        Ok(Client { inner, rt })
    }

    /// The async client underneath (for code that has both worlds).
    pub fn as_async(&self) -> &crate::shared::Client {
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

    /// The lock holds this client has now, oldest first (see
    /// [`Client::holds`](crate::Client::holds)); nothing is sent to Redis.
    pub fn holds(&self) -> Vec<crate::held::HeldLock> {
        self.inner.holds()
    }

    /// Shuts the client down: no new locks, the watchdog stopped, every hold of this client
    /// released (see [`crate::Client::shutdown`]).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] when called inside a current-thread async runtime; else the
    /// holds it could not release are in [`ShutdownReport::unreleased`](crate::ShutdownReport).
    pub fn shutdown(&self) -> Result<crate::shutdown::ShutdownReport> {
        self.rt.block_on(self.inner.shutdown())
    }

    fn wrap<K: crate::raw::LockKind>(&self, inner: crate::lock::Lock<K>) -> Lock<K> {
        Lock::new(inner, self.rt.clone())
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

    /// The value at `key` that refuses stale fencing tokens: see [`FencedValue`] and
    /// [`crate::Client::get_fenced_value`].
    pub fn get_fenced_value(&self, key: impl Into<String>) -> FencedValue {
        FencedValue::new(self.inner.get_fenced_value(key), self.rt.clone())
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
        ReadWriteLock::new(self.inner.get_read_write_lock(name), self.rt.clone())
    }

    /// The semaphore called `name` (Redisson's `getSemaphore`): see [`Semaphore`].
    pub fn get_semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.inner.get_semaphore(name), self.rt.clone())
    }

    /// The count-down latch called `name` (Redisson's `getCountDownLatch`): see
    /// [`CountDownLatch`].
    pub fn get_count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.inner.get_count_down_latch(name), self.rt.clone())
    }

    /// The rate limiter called `name` (Redisson's `getRateLimiter`): see [`RateLimiter`].
    pub fn get_rate_limiter(&self, name: impl Into<String>) -> RateLimiter {
        RateLimiter::new(self.inner.get_rate_limiter(name), self.rt.clone())
    }

    /// The permit-expirable semaphore called `name` (Redisson's
    /// `getPermitExpirableSemaphore`): see [`PermitExpirableSemaphore`].
    pub fn get_permit_expirable_semaphore(
        &self,
        name: impl Into<String>,
    ) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(
            self.inner.get_permit_expirable_semaphore(name),
            self.rt.clone(),
        )
    }
}

/// An async guard the blocking guards release: [`crate::LockGuard`], [`crate::MultiLockGuard`].
trait Release {
    fn release(self) -> impl Future<Output = Result<()>>;
}

impl<K: crate::raw::LockKind> Release for crate::lock::LockGuard<K> {
    fn release(self) -> impl Future<Output = Result<()>> {
        self.unlock()
    }
}

impl Release for crate::multi::MultiLockGuard {
    fn release(self) -> impl Future<Output = Result<()>> {
        self.unlock()
    }
}

/// The part every blocking guard shares: the async guard, released synchronously by
/// [`Held::unlock`] or on drop (in the background when dropped inside a runtime).
#[derive(Debug)]
struct Held<G: Release> {
    /// `None` once released or detached.
    inner: Option<G>,
    rt: Arc<Rt>,
}

impl<G: Release> Held<G> {
    fn new(inner: G, rt: Arc<Rt>) -> Held<G> {
        Held {
            inner: Some(inner),
            rt,
        }
    }

    fn get(&self) -> Option<&G> {
        self.inner.as_ref()
    }

    /// The async guard, no longer released by this one.
    fn take(&mut self) -> Option<G> {
        self.inner.take()
    }

    fn unlock(mut self) -> Result<()> {
        match self.inner.take() {
            Some(g) => self.rt.block_on(g.release())?,
            None => Ok(()),
        }
    }
}

impl<G: Release> Drop for Held<G> {
    fn drop(&mut self) {
        let Some(g) = self.inner.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside a runtime: the async guard's own drop releases in the background there.
            drop(g);
            return;
        }
        match self.rt.block_on(g.release()) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "release of a dropped blocking guard failed"),
            Err(e) => tracing::warn!(error = %e, "blocking guard dropped without its runtime"),
        }
    }
}
