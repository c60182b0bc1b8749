//! Lock owners: the `<id>` half of Redisson's `<client uuid>:<thread id>` hash field.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Thread ids are tagged with the top bit so they can never equal a tokio task id.
const THREAD_TAG: u64 = 1 << 63;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_ID: Cell<u64> = const { Cell::new(0) };
}

/// Who holds a lock: the `<id>` in the hash field `<client uuid>:<id>`.
///
/// In Java Redisson the owner is the current thread (`Thread.getId()`). Async Rust code hops
/// between threads, so the default owner here is the **current tokio task**: a task re-entering a
/// lock it holds increments the hold count, and a spawned task is a different owner, just as a new
/// thread is in Java. Outside a tokio task the current OS thread is the owner. Task and thread ids
/// never collide (thread ids carry the top bit).
///
/// # Reentrancy across tasks
///
/// Pass an explicit owner when several tasks must act as one holder, the way Redisson's
/// `lockAsync(leaseTime, unit, threadId)` overloads are used:
///
/// ```
/// use redisson_lock::LockOwner;
/// let owner = LockOwner::new(42);
/// assert_eq!(owner.id(), 42);
/// ```
///
/// Guards remember the owner they were acquired with, so unlocking through a guard is correct
/// from any task.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockOwner(u64);

impl LockOwner {
    /// An explicit owner id. Any `u64` is valid on the wire; Java never parses it.
    pub const fn new(id: u64) -> Self {
        LockOwner(id)
    }

    /// The owner for the calling context: the current tokio task, or else the current thread.
    pub fn current() -> Self {
        if let Some(id) = tokio::task::try_id() {
            // `task::Id` displays as its non-zero u64; it is unique for the whole process.
            if let Ok(n) = id.to_string().parse::<u64>() {
                return LockOwner(n & !THREAD_TAG);
            }
        }
        LockOwner(THREAD_ID.with(|c| {
            if c.get() == 0 {
                c.set(THREAD_TAG | NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
            }
            c.get()
        }))
    }

    /// The numeric id written after the client uuid.
    pub const fn id(&self) -> u64 {
        self.0
    }

    /// The hash field this owner writes for a client: `<uuid>:<id>`.
    pub(crate) fn field(&self, client_id: &str) -> String {
        format!("{client_id}:{}", self.0)
    }
}

impl fmt::Debug for LockOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockOwner({})", self.0)
    }
}

impl fmt::Display for LockOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_differ_and_are_stable() {
        let a = LockOwner::current();
        assert_eq!(a, LockOwner::current());
        let b = std::thread::spawn(LockOwner::current).join().unwrap();
        assert_ne!(a, b);
        assert!(a.id() & THREAD_TAG != 0);
    }

    #[tokio::test]
    async fn tasks_differ_from_each_other_and_from_threads() {
        // The body of `block_on` is not a task: it is owned by its thread.
        assert_ne!(LockOwner::current().id() & THREAD_TAG, 0);
        let (a, a_again) = tokio::spawn(async { (LockOwner::current(), LockOwner::current()) })
            .await
            .unwrap();
        assert_eq!(a, a_again);
        assert_eq!(a.id() & THREAD_TAG, 0);
        let b = tokio::spawn(async { LockOwner::current() }).await.unwrap();
        assert_ne!(a, b);
    }
}
