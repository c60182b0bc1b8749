//! Lock kinds: the per-kind scripts behind the one generic algorithm in [`Lock`](crate::Lock).
//!
//! A kind says which scripts acquire and release it, how their replies read, and which message
//! its release publishes. Everything else (owners, waiting, leases, the watchdog, cancellation)
//! is written once in `lock.rs`.

mod reentrant;

pub use reentrant::Reentrant;

use redis::{ScriptInvocation, Value};

/// What one acquire attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// Taken; the owner's hold count is now `count`.
    Taken { count: u32 },
    /// Held by someone else, who has `ttl_ms` left (`-1`: no expiry).
    Held { ttl_ms: i64 },
}

/// What one release found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The last hold went; the lock was deleted and waiters notified.
    Released,
    /// Holds remain (re-entered), lease re-applied.
    StillHeld,
    /// The owner held nothing.
    NotHeld,
}

/// The names one lock operation touches.
#[derive(Debug)]
pub struct Names<'a> {
    pub key: &'a str,
    pub channel: &'a str,
}

/// The scripts of one lock kind. Public only inside the crate (the module is private), which
/// seals [`LockKind`].
pub trait RawLock: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// Script that takes (or re-enters) the lock for `field` with `lease_ms`.
    fn acquire_script<'a>(
        &self,
        names: &Names<'_>,
        field: &str,
        lease_ms: u64,
    ) -> ScriptInvocation<'a>;

    /// Reads the acquire script's reply.
    fn parse_acquire(&self, reply: &Value) -> Option<Acquire>;

    /// Script that releases one hold of `field`, idempotent through `latch`.
    #[allow(clippy::too_many_arguments)]
    fn release_script<'a>(
        &self,
        names: &Names<'_>,
        field: &str,
        lease_ms: u64,
        latch: &str,
        latch_ttl_ms: u64,
        publish: &str,
    ) -> ScriptInvocation<'a>;

    /// Reads the release script's reply.
    fn parse_release(&self, reply: &Value) -> Option<Release>;
}

/// A kind of lock (sealed: the kinds are the ones this crate implements).
///
/// [`RLock`](crate::RLock) is `Lock<Reentrant>`; other kinds plug their scripts in here without
/// a second copy of the waiting, lease and watchdog logic.
pub trait LockKind: RawLock {}

impl<T: RawLock> LockKind for T {}
