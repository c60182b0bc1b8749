//! Lock owners: the `<id>` half of Redisson's `<client uuid>:<thread id>` hash field.

use std::cell::Cell;
use std::fmt;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// Thread ids are tagged with the top bit so they can never equal a tokio task id.
const THREAD_TAG: u64 = 1 << 63;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// [`LockOwner::unique`] ids carry the top two bits: never a task's, nor a thread's (whose
/// counter would need 2^62 threads to reach them).
const UNIQUE_TAG: u64 = THREAD_TAG | (1 << 62);

static NEXT_UNIQUE: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_ID: Cell<u64> = const { Cell::new(0) };
}

/// Who holds a lock: the `<id>` in the hash field `<client uuid>:<id>`.
///
/// In Java Redisson the owner is the current thread (`Thread.getId()`). Async Rust code hops
/// between threads, so the default owner here is the **current tokio task**: a spawned task is a
/// different owner, just as a new thread is in Java. Outside a tokio task (the body of
/// `block_on` or `#[tokio::main]`) the current OS thread is the owner. Task and thread ids never
/// collide (thread ids carry the top bit).
///
/// # The default owner never re-enters
///
/// A task is not a thread: futures that run concurrently in one task (`join!`, `select!`,
/// `FuturesUnordered`, `buffer_unordered`, `for_each_concurrent`) all act for its owner. Were the
/// default owner re-entrant, two of them locking one name would both be inside. So an async
/// [`Lock`](crate::Lock) acting for the default owner refuses a lock that owner already holds or
/// is acquiring in the client, with [`LockError::Reentry`](crate::LockError::Reentry), as
/// `tokio::sync::Mutex` is never re-entrant. Readers of a read-write lock still share.
///
/// # Re-entry on purpose
///
/// Redisson's re-entry is kept, exactly as on the wire, where it is asked for: through a held
/// guard ([`LockGuard::reenter`](crate::LockGuard::reenter)), or with an explicit owner, which
/// re-enters plainly whichever task uses it. Pass one when several tasks must act as one holder,
/// the way Redisson's `lockAsync(leaseTime, unit, threadId)` overloads are used. The blocking API
/// binds the calling thread as an explicit owner: a thread runs one thing at a time, so it
/// re-enters as Java's thread does.
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

    /// A new explicit owner, different from every other owner of this process: from every
    /// task's and thread's default owner, and from every other `unique()` one. The way to make
    /// several tasks act as one holder without picking a number that might be a task's id
    /// (`LockOwner::new(1)` is the first task's default owner).
    ///
    /// ```
    /// use redisson_lock::LockOwner;
    /// let (a, b) = (LockOwner::unique(), LockOwner::unique());
    /// assert_ne!(a, b);
    /// assert_ne!(a, LockOwner::current());
    /// ```
    pub fn unique() -> Self {
        LockOwner(UNIQUE_TAG | NEXT_UNIQUE.fetch_add(1, Ordering::Relaxed))
    }

    /// The owner for the calling context: the current tokio task, or else the current thread.
    pub fn current() -> Self {
        if let Some(id) = tokio::task::try_id() {
            return LockOwner(task_number(id) & !THREAD_TAG);
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

/// A tokio task's process-unique number, derived without tokio's text form (which tokio does not
/// promise) and never from the thread: tokio's `task::Id` wraps the task's non-zero `u64` and
/// derives `Hash`, so hashing it writes exactly that number, which [`TaskNumber`] captures (it is
/// also the number `task::Id` displays, what a Java reader sees after the uuid; a unit test pins
/// that). Should a later tokio hash an `Id` differently, every byte it writes is folded into a
/// 64-bit FNV-1a value instead: still one stable owner per task, so a task never falls back to
/// sharing its worker thread's owner with every other task on that thread.
fn task_number(id: tokio::task::Id) -> u64 {
    let mut number = TaskNumber::default();
    id.hash(&mut number);
    number.finish()
}

/// The `Hasher` behind [`task_number`]: one `write_u64` is the number itself; anything else is
/// folded with FNV-1a.
struct TaskNumber {
    exact: Option<u64>,
    writes: u32,
    fold: u64,
}

impl Default for TaskNumber {
    fn default() -> Self {
        TaskNumber {
            exact: None,
            writes: 0,
            fold: 0xcbf2_9ce4_8422_2325,
        }
    }
}

impl Hasher for TaskNumber {
    fn write(&mut self, bytes: &[u8]) {
        self.writes += 1;
        for b in bytes {
            self.fold = (self.fold ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        if self.writes == 0 {
            self.exact = Some(n);
        }
        self.write(&n.to_le_bytes());
    }

    fn finish(&self) -> u64 {
        match self.exact {
            Some(n) if self.writes == 1 => n,
            _ => self.fold,
        }
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

    /// Should tokio ever hash a task id as something other than one `u64`, the owner is still
    /// one stable number per task (folded from every byte written), never the thread's.
    #[test]
    fn an_unexpected_id_shape_still_gives_one_stable_number_per_task() {
        let of = |parts: &[u64]| {
            let mut h = TaskNumber::default();
            for p in parts {
                h.write_u64(*p);
            }
            h.finish()
        };
        assert_eq!(of(&[7]), 7, "one u64 is the number itself");
        assert_eq!(of(&[7, 1]), of(&[7, 1]), "stable");
        assert_ne!(of(&[7, 1]), of(&[7, 2]));
        assert_ne!(of(&[7, 1]), of(&[8, 1]));
        let mut bytes = TaskNumber::default();
        bytes.write(b"task-7");
        let mut other = TaskNumber::default();
        other.write(b"task-8");
        assert_ne!(bytes.finish(), other.finish());
        assert_ne!(bytes.finish(), 0);
    }

    /// Every task on one worker thread is its own owner (a task never falls back to the
    /// thread's owner), and none of them carries the thread tag.
    #[test]
    fn tasks_on_one_thread_never_share_the_threads_owner() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let thread = LockOwner::current();
        let owners: Vec<LockOwner> = rt.block_on(async {
            let mut owners = Vec::new();
            for _ in 0..50 {
                owners.push(tokio::spawn(async { LockOwner::current() }).await.unwrap());
            }
            owners
        });
        let distinct: std::collections::HashSet<_> = owners.iter().collect();
        assert_eq!(distinct.len(), owners.len());
        assert!(owners
            .iter()
            .all(|o| *o != thread && o.id() & THREAD_TAG == 0));
    }
}
