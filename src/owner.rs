//! Lock owners: the `<id>` half of Redisson's `<client uuid>:<thread id>` hash field.

use std::cell::Cell;
use std::fmt;
use std::fmt::Write as _;
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
        if let Some(n) = tokio::task::try_id().and_then(task_number) {
            return LockOwner(n & !THREAD_TAG);
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
        let mut field = String::with_capacity(client_id.len() + 21);
        field.push_str(client_id);
        field.push(':');
        let _ = write!(field, "{}", self.0);
        field
    }
}

/// The number a `task::Id` displays (its non-zero u64, unique for the whole process), read
/// without the `String` that `to_string().parse()` would allocate on every `lock()`.
fn task_number(id: tokio::task::Id) -> Option<u64> {
    #[derive(Default)]
    struct Digits {
        n: u64,
        len: usize,
    }
    impl fmt::Write for Digits {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            for b in s.bytes() {
                let digit = b.checked_sub(b'0').filter(|d| *d < 10).ok_or(fmt::Error)?;
                self.n = self
                    .n
                    .checked_mul(10)
                    .and_then(|n| n.checked_add(u64::from(digit)))
                    .ok_or(fmt::Error)?;
                self.len += 1;
            }
            Ok(())
        }
    }
    let mut digits = Digits::default();
    write!(digits, "{id}").ok()?;
    (digits.len > 0 && digits.n != 0).then_some(digits.n)
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

    /// A task's owner id is the number its `task::Id` displays (what Java sees after the uuid).
    #[tokio::test]
    async fn a_task_owner_is_its_task_number() {
        // Enough tasks for ids of two digits and more.
        for _ in 0..30 {
            let (owner, shown) =
                tokio::spawn(async { (LockOwner::current(), tokio::task::id().to_string()) })
                    .await
                    .unwrap();
            assert_eq!(owner.id().to_string(), shown);
            assert_eq!(owner.field("uuid"), format!("uuid:{shown}"));
        }
    }
}
