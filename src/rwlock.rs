//! Redisson's read-write lock: two lock handles over one hash.

use crate::lock::Lock;
use crate::raw::{Read, Write};
use crate::shared::Client;

/// A read-write lock (Redisson's `RReadWriteLock`): many readers or one writer.
///
/// Both sides are ordinary [`Lock`]s over the same hash, with the same waiting, lease, watchdog
/// and cancellation behaviour as [`RLock`](crate::RLock). An owner holding the write lock may
/// also take the read lock; an owner holding only read locks cannot upgrade (it waits, as in
/// Redisson: release the read holds first).
///
/// # Redisson compatibility
///
/// See [`Read`] and [`Write`]: hash `<name>` with a `mode` field, per-hold
/// `{<name>}:<uuid>:<id>:rwlock_timeout:<n>` keys, channel `redisson_rwlock:{<name>}`; a write
/// release publishes `1` (wakes all waiters), a read release `0`.
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// let rw = client.get_read_write_lock("config");
/// let r1 = rw.read_lock().lock().await?;
/// let r2 = rw.read_lock().with_owner(redisson_lock::LockOwner::unique()).lock().await?;
/// r1.unlock().await?;
/// r2.unlock().await?;
/// let w = rw.write_lock().lock().await?;
/// w.unlock().await?;
/// # Ok(()) })
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock<Read>,
    write: Lock<Write>,
}

impl ReadWriteLock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        ReadWriteLock {
            read: Lock::new(client.clone(), name.clone(), Read),
            write: Lock::new(client, name, Write),
        }
    }

    /// The read side (shared).
    pub fn read_lock(&self) -> Lock<Read> {
        self.read.clone()
    }

    /// The write side (exclusive).
    pub fn write_lock(&self) -> Lock<Write> {
        self.write.clone()
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        self.read.name()
    }
}
