//! The programs users write after reading the README, each asserting what the user expects
//! (issue 37): scoped guards in loops, `?` inside the critical section, timeouts, one client
//! shared by many tasks, panics, shutdown. Not the protocol's properties: the habits of Rust
//! code (`std::sync::Mutex`, `tokio::sync::Mutex`) applied to this crate.
//!
//! Every pattern runs for each kind it applies to ([`Kind`], through [`with_kind!`]), in each
//! runtime shape where the shape matters ([`shapes!`]: a current-thread runtime, a multi-thread
//! one, a spawned task), on whichever server the run uses (the suite runs twice: Redis, then
//! Valkey). `PATTERN_ITERATIONS` sets the iterations of the loops (default 30).
//!
//! Timing is never asserted: waits are event-driven, with generous bounds ([`WAIT`]) that only
//! turn a hang into a failure.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redisson_lock::{Client, LockError, LockOwner};

/// Runs `$body` with `$lock` bound to `$client`'s lock `$name` of kind `$kind` (a [`Kind`]):
/// the body is expanded once per kind, so it may call generic functions over `Lock<K>`. The
/// long form binds several locks of that one kind (other names, other clients):
/// `with_kind!(kind; a = (client, name_a), b = (other, name_b) => body)`.
macro_rules! with_kind {
    ($kind:expr, $client:expr, $name:expr, |$lock:ident| $body:expr) => {
        with_kind!($kind; $lock = ($client, $name) => $body)
    };
    ($kind:expr; $($lock:ident = ($client:expr, $name:expr)),+ => $body:expr) => {{
        match $kind {
            $crate::patterns::Kind::Reentrant => {
                $(let $lock = $client.get_lock($name);)+
                $body
            }
            $crate::patterns::Kind::Fair => {
                $(let $lock = $client.get_fair_lock($name);)+
                $body
            }
            $crate::patterns::Kind::NonReentrant => {
                $(let $lock = $client.get_non_reentrant_lock($name);)+
                $body
            }
            $crate::patterns::Kind::NonReentrantFair => {
                $(let $lock = $client.get_non_reentrant_fair_lock($name);)+
                $body
            }
            $crate::patterns::Kind::Fenced => {
                $(let $lock = $client.get_fenced_lock($name);)+
                $body
            }
            $crate::patterns::Kind::Spin => {
                $(let $lock = $client.get_spin_lock($name);)+
                $body
            }
            $crate::patterns::Kind::Read => {
                $(let $lock = $client.get_read_write_lock($name).read_lock();)+
                $body
            }
            $crate::patterns::Kind::Write => {
                $(let $lock = $client.get_read_write_lock($name).write_lock();)+
                $body
            }
        }
    }};
}

/// Three tests named `$name::{current_thread, multi_thread, spawned}` running the async fn
/// `$f()` (in this module) on a current-thread runtime, on a multi-thread runtime, and inside a
/// task spawned on a multi-thread runtime.
macro_rules! shapes {
    ($name:ident => $f:ident) => {
        mod $name {
            #[tokio::test(flavor = "current_thread")]
            async fn current_thread() {
                super::$f().await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn multi_thread() {
                super::$f().await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn spawned() {
                tokio::spawn(super::$f()).await.unwrap()
            }
        }
    };
}

#[cfg(feature = "blocking")]
mod blocking;
mod cancel;
mod errors;
mod java;
mod lifecycle;
mod lost;
mod multi;
mod reentry;
mod scoped;
mod shared_client;
mod shared_rw;
mod sync;
mod tasks;

/// A generous bound for anything event-driven (a wake-up, a background release): it only turns
/// a hang into a failure, on a loaded machine too.
pub const WAIT: Duration = Duration::from_secs(20);

/// Iterations of every loop (`PATTERN_ITERATIONS`, default 30).
pub fn iterations() -> usize {
    std::env::var("PATTERN_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(30)
}

/// The lock kinds a pattern runs for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Reentrant,
    Fair,
    NonReentrant,
    NonReentrantFair,
    Fenced,
    Spin,
    Read,
    Write,
}

impl Kind {
    /// Every single-key kind, the two sides of a read-write lock included.
    pub const ALL: [Kind; 8] = [
        Kind::Reentrant,
        Kind::Fair,
        Kind::NonReentrant,
        Kind::NonReentrantFair,
        Kind::Fenced,
        Kind::Spin,
        Kind::Read,
        Kind::Write,
    ];

    /// The kinds that exclude each other's holders (every kind but the read side).
    pub const EXCLUSIVE: [Kind; 7] = [
        Kind::Reentrant,
        Kind::Fair,
        Kind::NonReentrant,
        Kind::NonReentrantFair,
        Kind::Fenced,
        Kind::Spin,
        Kind::Write,
    ];

    /// A lock name for this kind under `prefix` (kinds never share a key).
    pub fn name(self, prefix: &str) -> String {
        format!("{prefix}:{self:?}")
    }

    /// The hash field this kind's hold count is under, for `owner` of `client`: a write hold
    /// counts under `<field>:write`, everything else under `<field>`.
    pub fn field(self, client: &Client, owner: LockOwner) -> String {
        let f = crate::support::field(client, owner);
        match self {
            Kind::Write => format!("{f}:write"),
            _ => f,
        }
    }

    /// Whether the default owner's second acquire of a lock it holds is refused locally
    /// (`Reentry`); the non-reentrant kinds are refused by the server (`AlreadyHeld`), and
    /// readers share.
    pub fn refuses_reentry(self) -> bool {
        !matches!(
            self,
            Kind::NonReentrant | Kind::NonReentrantFair | Kind::Read
        )
    }
}

/// The hold count of `field` in the lock hash `name`, as a Java client reads it (`HGET`; 0 when
/// absent).
pub async fn count(raw: &mut MultiplexedConnection, name: &str, field: &str) -> i64 {
    let n: Option<i64> = redis::cmd("HGET")
        .arg(name)
        .arg(field)
        .query_async(raw)
        .await
        .unwrap();
    n.unwrap_or(0)
}

/// Asserts that `field` holds `name` exactly once right now (what Java's `getHoldCount` would
/// answer): never 2 after a guard of the same task was dropped.
pub async fn assert_held_once(raw: &mut MultiplexedConnection, name: &str, field: &str) {
    let n = count(raw, name, field).await;
    assert_eq!(
        n, 1,
        "`{name}`: the holder's field `{field}` counts {n} holds"
    );
}

/// Waits until nobody holds `name` (the key is gone), or fails after [`WAIT`].
pub async fn assert_freed(raw: &MultiplexedConnection, name: &str) {
    let freed = crate::support::eventually(WAIT, || async {
        !crate::support::exists(&mut raw.clone(), name).await
    })
    .await;
    assert!(freed, "`{name}` is still held: a hold leaked");
}

/// Whether `client` comes to have at least `n` channels with local waiters within [`WAIT`] (its
/// waiters are parked on pub/sub). Not an assertion: a wait that ends early only makes the
/// pattern's release come before the waiter parks.
pub async fn subscribed_at_least(client: &Client, n: usize) -> bool {
    crate::support::eventually(WAIT, || async { client.stats().subscribed_channels >= n }).await
}

/// A critical section's occupancy: [`Occupancy::enter`] fails the test when another holder is
/// already inside (mutual exclusion broken).
#[derive(Clone, Debug, Default)]
pub struct Occupancy {
    inside: Arc<AtomicUsize>,
    entries: Arc<AtomicUsize>,
}

impl Occupancy {
    /// Enters; the returned token leaves on drop.
    pub fn enter(&self, what: &str) -> Inside {
        let before = self.inside.fetch_add(1, Ordering::SeqCst);
        assert_eq!(before, 0, "{what}: two holders inside the critical section");
        self.entries.fetch_add(1, Ordering::SeqCst);
        Inside(self.inside.clone())
    }

    /// How many times the section was entered.
    pub fn entries(&self) -> usize {
        self.entries.load(Ordering::SeqCst)
    }
}

/// One holder inside an [`Occupancy`].
#[derive(Debug)]
pub struct Inside(Arc<AtomicUsize>);

impl Drop for Inside {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Some work inside the critical section: a yield, so other tasks run meanwhile.
pub async fn do_work() -> Result<(), LockError> {
    tokio::task::yield_now().await;
    Ok(())
}

/// A small pseudo-random delay (jitter for back-offs), from `seed` and the clock.
pub fn jitter(seed: u64, max_ms: u64) -> Duration {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    let x = (t ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0x2545_F491_4F6C_DD1D);
    Duration::from_millis(1 + (x >> 33) % max_ms.max(1))
}
