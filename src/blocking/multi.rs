//! The blocking [`MultiLock`] / [`RedLock`] and their [`MultiLockGuard`].

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use super::{forward, Held, Lock, Rt};
use crate::error::{LockError, Result};
use crate::multi::{All, Majority, QuorumPolicy};
use crate::raw::LockKind;

/// A member of a blocking [`MultiLock`]: a blocking [`Lock`] of any kind (see
/// [`crate::MemberLock`]). Every blocking `Lock<K>` converts into one.
///
/// ```
/// # redisson_lock::__doctest::blocking(|a| { let b = redisson_lock::blocking::Client::connect(&redisson_lock::__doctest::url())?;
/// use redisson_lock::blocking::{MemberLock, MultiLock};
/// let both: MultiLock = MultiLock::new([
///     MemberLock::from(a.get_fair_lock("orders:44")),
///     MemberLock::from(b.get_read_write_lock("warehouse").write_lock()),
/// ])?;
/// both.lock()?.unlock()?;
/// # Ok(()) })
/// ```
#[derive(Clone)]
pub struct MemberLock {
    name: Arc<str>,
    /// The async member, bound to its owner (or the calling thread's) when called.
    bound: Arc<dyn Fn() -> crate::multi::MemberLock + Send + Sync>,
    rt: Arc<Rt>,
}

impl std::fmt::Debug for MemberLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberLock")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<K: LockKind> From<Lock<K>> for MemberLock {
    fn from(lock: Lock<K>) -> Self {
        MemberLock {
            name: Arc::from(lock.name()),
            rt: lock.runtime().clone(),
            bound: Arc::new(move || crate::multi::MemberLock::from(lock.bound())),
        }
    }
}

impl MemberLock {
    /// The member's lock name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A blocking [`crate::RedLock`]: a [`MultiLock`] that needs a majority of its members.
///
/// ```no_run
/// # fn main() -> Result<(), redisson_lock::LockError> {
/// use std::time::Duration;
/// use redisson_lock::blocking::{Client, RedLock};
///
/// let mut locks = Vec::new();
/// for url in ["redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/"] {
///     locks.push(Client::connect(url)?.get_lock("orders:42"));
/// }
/// let redlock = RedLock::new(locks)?;
/// if let Some(guard) = redlock.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10))? {
///     println!("valid for {:?}", guard.remaining_validity());
///     guard.unlock()?;
/// }
/// # Ok(()) }
/// ```
pub type RedLock = MultiLock<Majority>;

/// A blocking [`crate::MultiLock`]: several blocking [`Lock`]s taken and released as one, by
/// the algorithm of the async one (read its documentation).
///
/// Each member acts for its bound owner ([`Lock::with_owner`]), else for the calling thread,
/// bound when the call starts: the thread that takes the multi-lock holds every member, as in
/// Java. The members may come from different [`Client`](super::Client)s (independent masters);
/// the calls run on the first member's client's runtime.
///
/// ```
/// # redisson_lock::__doctest::blocking(|a| { let b = redisson_lock::blocking::Client::connect(&redisson_lock::__doctest::url())?;
/// use redisson_lock::blocking::MultiLock;
/// // Orders and stock live on different masters; take both or neither.
/// let both: MultiLock = MultiLock::new([a.get_lock("orders:45"), b.get_lock("stock:8")])?;
/// let guard = both.lock()?;
/// assert!(both.is_held_by_current()?);
/// guard.unlock()?;
/// # Ok(()) })
/// ```
pub struct MultiLock<P: QuorumPolicy = All> {
    members: Vec<MemberLock>,
    node_timeout: Option<Duration>,
    rt: Arc<Rt>,
    _policy: PhantomData<fn() -> P>,
}

impl<P: QuorumPolicy> Clone for MultiLock<P> {
    fn clone(&self) -> Self {
        MultiLock {
            members: self.members.clone(),
            node_timeout: self.node_timeout,
            rt: self.rt.clone(),
            _policy: PhantomData,
        }
    }
}

impl<P: QuorumPolicy> std::fmt::Debug for MultiLock<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("members", &self.members)
            .field("required", &self.required())
            .field("node_timeout", &self.node_timeout)
            .finish()
    }
}

impl<P: QuorumPolicy> MultiLock<P> {
    /// A multi-lock over `locks`, in this order (waiting follows it): locks of one kind, or
    /// [`MemberLock`]s of several; see [`crate::MultiLock::new`].
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] when `locks` is empty.
    pub fn new<L: Into<MemberLock>>(locks: impl IntoIterator<Item = L>) -> Result<Self> {
        let members: Vec<MemberLock> = locks.into_iter().map(Into::into).collect();
        let rt = members
            .first()
            .map(|m| m.rt.clone())
            .ok_or(LockError::InvalidArgument(
                "a multi-lock needs at least one lock",
            ))?;
        Ok(MultiLock {
            members,
            node_timeout: None,
            rt,
            _policy: PhantomData,
        })
    }

    /// Bounds each node's part of an attempt (see [`crate::MultiLock::with_node_timeout`]).
    pub fn with_node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// The member locks, in order.
    pub fn locks(&self) -> &[MemberLock] {
        &self.members
    }

    /// How many members must be taken: all of them for [`All`], `n / 2 + 1` for [`Majority`].
    pub fn required(&self) -> usize {
        crate::multi::required::<P>(self.members.len())
    }

    /// The async multi-lock, every member bound to its owner on the calling thread.
    fn call<T, F: Future<Output = Result<T>>>(
        &self,
        f: impl FnOnce(crate::multi::MultiLock<P>) -> F,
    ) -> Result<T> {
        let mut multi =
            crate::multi::MultiLock::<P>::new(self.members.iter().map(|m| (m.bound)()))?;
        if let Some(t) = self.node_timeout {
            multi = multi.with_node_timeout(t);
        }
        self.rt.block_on(f(multi))?
    }

    fn guard(&self, g: crate::multi::MultiLockGuard) -> MultiLockGuard {
        MultiLockGuard {
            held: Held::new(g, self.rt.clone()),
        }
    }

    forward! { "crate::MultiLock":
        /// Whether the calling thread (or the members' bound owners) holds the multi-lock: at
        /// least [`required`](Self::required) members.
        fn is_held_by_current(&self) -> bool;
    }

    /// Blocks until the quorum is taken, renewed by the watchdogs ([`crate::MultiLock::lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::lock`].
    pub fn lock(&self) -> Result<MultiLockGuard> {
        self.call(|m| async move { m.lock().await })
            .map(|g| self.guard(g))
    }

    /// Blocks until the quorum is taken for `lease` ([`crate::MultiLock::lock_with_lease`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiLockGuard> {
        self.call(|m| async move { m.lock_with_lease(lease).await })
            .map(|g| self.guard(g))
    }

    /// One round, no waiting ([`crate::MultiLock::try_lock`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard>> {
        self.call(|m| async move { m.try_lock().await })
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// Tries for at most `wait` ([`crate::MultiLock::try_lock_for`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        self.call(|m| async move { m.try_lock_for(wait).await })
            .map(|g| g.map(|g| self.guard(g)))
    }

    /// Tries for at most `wait`, holds for `lease` ([`crate::MultiLock::try_lock_with_lease`]).
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLock::try_lock_with_lease`].
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiLockGuard>> {
        self.call(|m| async move { m.try_lock_with_lease(wait, lease).await })
            .map(|g| g.map(|g| self.guard(g)))
    }
}

/// A held blocking [`MultiLock`] or [`RedLock`]; every member is released when dropped
/// (synchronously) or by [`MultiLockGuard::unlock`]. See [`crate::MultiLockGuard`].
#[derive(Debug)]
pub struct MultiLockGuard {
    held: Held<crate::multi::MultiLockGuard>,
}

impl MultiLockGuard {
    fn get(&self) -> Option<&crate::multi::MultiLockGuard> {
        self.held.get()
    }

    /// Positions of the members this guard holds, ascending.
    pub fn held_nodes(&self) -> Vec<usize> {
        self.get().map(|g| g.held_nodes()).unwrap_or_default()
    }

    /// How many members must stay held for the lock to stand.
    pub fn required(&self) -> usize {
        self.get().map_or(0, |g| g.required())
    }

    /// The fixed lease, or `None` when every member is renewed by its client's watchdog.
    pub fn lease(&self) -> Option<Duration> {
        self.get().and_then(|g| g.lease())
    }

    /// Time left before a fixed-lease lock must be considered expired (the Redlock rule, see
    /// [`crate::MultiLockGuard::remaining_validity`]).
    pub fn remaining_validity(&self) -> Option<Duration> {
        self.get().and_then(|g| g.remaining_validity())
    }

    /// Whether the lock is known to be lost (fewer members than the quorum, or validity out).
    pub fn is_lost(&self) -> bool {
        self.get().is_none_or(|g| g.is_lost())
    }

    /// Releases every member, reporting each node that failed.
    ///
    /// # Errors
    ///
    /// As [`crate::MultiLockGuard::unlock`].
    pub fn unlock(self) -> Result<()> {
        self.held.unlock()
    }
}
