//! The members of a MultiLock: a lock of any kind ([`MemberLock`]), as Redisson's
//! `getMultiLock(RLock...)` takes reentrant, fair, fenced, spin, non-reentrant and the read and
//! write sides of a read-write lock alike. Each member keeps its own kind's scripts and data; the
//! quorum algorithm only needs to take one with a wait and a lease, re-apply a lease to what it
//! took, ask whether the owner holds it, and give it back.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;

use crate::error::Result;
use crate::lock::{Lock, LockGuard};
use crate::raw::LockKind;
use crate::shared::Client;

/// One member of a [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock): a
/// [`Lock`] of any kind. Every `Lock<K>` converts into one (`From`), so a list of one kind is
/// passed as it is, and a list that mixes kinds names the conversion:
///
/// ```
/// # redisson_lock::__doctest::run(|a| async move { let b = redisson_lock::__doctest::client().await;
/// use redisson_lock::{MemberLock, MultiLock};
/// let both: MultiLock = MultiLock::new([
///     MemberLock::from(a.get_fair_lock("orders:48")),
///     MemberLock::from(b.get_read_write_lock("stock").write_lock()),
/// ])?;
/// let guard = both.lock().await?;
/// guard.unlock().await?;
/// # Ok(()) })
/// ```
#[derive(Clone)]
pub struct MemberLock(Arc<dyn Member>);

impl std::fmt::Debug for MemberLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt_member(f)
    }
}

impl<K: LockKind> From<Lock<K>> for MemberLock {
    fn from(lock: Lock<K>) -> Self {
        MemberLock(Arc::new(lock))
    }
}

impl MemberLock {
    /// The member's lock name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The client (the node) the member lives on.
    pub fn client(&self) -> &Client {
        self.0.client()
    }

    /// The same member bound to its current owner (the calling task unless bound already).
    pub(crate) fn bound(&self) -> MemberLock {
        self.0.bound()
    }

    /// One attempt: wait up to `wait`, then hold with `lease` (`None`: the watchdog).
    pub(crate) fn take(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> BoxFuture<'_, Result<Option<MemberGuard>>> {
        self.0.take(wait, lease)
    }

    pub(crate) fn is_held_by_current(&self) -> BoxFuture<'_, Result<bool>> {
        self.0.is_held_by_current()
    }
}

/// A member taken: the guard of its kind.
pub(crate) struct MemberGuard(Box<dyn Held>);

impl std::fmt::Debug for MemberGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt_held(f)
    }
}

impl MemberGuard {
    pub(crate) fn name(&self) -> &str {
        self.0.name()
    }

    pub(crate) fn watchdog_timeout(&self) -> Duration {
        self.0.watchdog_timeout()
    }

    pub(crate) fn reapply_lease(&mut self, lease: Duration) -> BoxFuture<'_, Result<bool>> {
        self.0.reapply_lease(lease)
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.0.is_lost()
    }

    pub(crate) fn lost(&self) -> BoxFuture<'_, ()> {
        self.0.lost()
    }

    pub(crate) fn unlock(self) -> BoxFuture<'static, Result<()>> {
        self.0.unlock()
    }
}

/// What the quorum algorithm asks of a member lock, whatever its kind.
trait Member: Send + Sync + 'static {
    fn fmt_member(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result;
    fn name(&self) -> &str;
    fn client(&self) -> &Client;
    fn bound(&self) -> MemberLock;
    fn take(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> BoxFuture<'_, Result<Option<MemberGuard>>>;
    fn is_held_by_current(&self) -> BoxFuture<'_, Result<bool>>;
}

impl<K: LockKind> Member for Lock<K> {
    fn fmt_member(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }

    fn name(&self) -> &str {
        Lock::name(self)
    }

    fn client(&self) -> &Client {
        Lock::client(self)
    }

    fn bound(&self) -> MemberLock {
        // `pinned`, not `with_owner`: a default owner keeps its re-entry check.
        MemberLock(Arc::new(self.pinned()))
    }

    fn take(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> BoxFuture<'_, Result<Option<MemberGuard>>> {
        async move {
            let guard = match lease {
                Some(l) => self.try_lock_with_lease(wait, l).await?,
                None => self.try_lock_for(wait).await?,
            };
            Ok(guard.map(|g| MemberGuard(Box::new(g))))
        }
        .boxed()
    }

    fn is_held_by_current(&self) -> BoxFuture<'_, Result<bool>> {
        Lock::is_held_by_current(self).boxed()
    }
}

/// What the quorum algorithm asks of a member it holds.
trait Held: Send + Sync {
    fn fmt_held(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result;
    fn name(&self) -> &str;
    fn watchdog_timeout(&self) -> Duration;
    fn reapply_lease(&mut self, lease: Duration) -> BoxFuture<'_, Result<bool>>;
    fn is_lost(&self) -> bool;
    fn lost(&self) -> BoxFuture<'_, ()>;
    fn unlock(self: Box<Self>) -> BoxFuture<'static, Result<()>>;
}

impl<K: LockKind> Held for LockGuard<K> {
    fn fmt_held(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }

    fn name(&self) -> &str {
        self.lock().name()
    }

    fn watchdog_timeout(&self) -> Duration {
        self.lock().client().config().watchdog_timeout()
    }

    fn reapply_lease(&mut self, lease: Duration) -> BoxFuture<'_, Result<bool>> {
        LockGuard::reapply_lease(self, lease).boxed()
    }

    fn is_lost(&self) -> bool {
        LockGuard::is_lost(self)
    }

    fn lost(&self) -> BoxFuture<'_, ()> {
        LockGuard::lost(self).boxed()
    }

    fn unlock(self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        LockGuard::unlock(*self).boxed()
    }
}
