#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]
#![cfg_attr(not(test), forbid(clippy::panic))]
#![warn(rust_2018_idioms)]
// docs.rs (`--cfg docsrs`, nightly) shows which feature each gated item needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(hidden)]
#[path = "doctest_support.rs"]
pub mod __doctest;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod client;
mod config;
mod conn;
#[cfg(doctest)]
mod doctests;
mod endpoints;
mod error;
mod fencing;
mod held;
mod holds;
mod keys;
mod latches;
mod lock;
mod multi;
pub mod observe;
mod owner;
mod pubsub;
mod raw;
mod retry;
mod rwlock;
mod sched;
mod scripts;
mod shared;
mod shutdown;
mod sync;
mod time;
mod tls;
mod wait;
mod watchdog;

/// The redis-rs crate this one is built on, re-exported so that code using
/// [`Client::connection`], [`LockError::Redis`] or [`Connection`] needs no dependency of its
/// own pinned to the same major version.
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// use redisson_lock::redis::AsyncCommands;
/// let mut conn = client.connection();
/// let _: () = conn.set("greeting", "hello").await?;
/// # Ok(()) })
/// ```
pub use redis;

pub use client::{Client, ClientStats};
pub use config::{
    AofSync, Config, ReplicaSync, ShardedPubSub, Topology, DEFAULT_CONNECTION_TIMEOUT,
    DEFAULT_FAIR_LOCK_WAIT_TIMEOUT, DEFAULT_LATCH_QUEUE, DEFAULT_REPLICA_SYNC_TIMEOUT,
    DEFAULT_RESPONSE_TIMEOUT, DEFAULT_RETRY_ATTEMPTS, DEFAULT_RETRY_DELAY,
    DEFAULT_SUBSCRIPTION_TIMEOUT, DEFAULT_WATCHDOG_BATCH_SIZE, DEFAULT_WATCHDOG_TIMEOUT,
    MAX_RETRY_DELAY,
};
pub use conn::Connection;
#[doc(hidden)]
pub use endpoints::Endpoints;
// The one place URLs get credentials and lose them, shared with the operator CLI.
#[doc(hidden)]
pub use config::{redact as redact_url, url_with_password};
pub use error::{LockError, Result};
pub use fencing::FencedValue;
pub use held::HeldLock;
pub use lock::LockGuard;
pub use lock::{ForceUnlock, Lock, LockTtl};
pub use multi::{
    All, Majority, MemberLock, MultiLock, MultiLockGuard, QuorumError, QuorumOperation,
    QuorumPolicy, RedLock,
};
pub use owner::LockOwner;
pub use raw::{
    Backoff, Fair, Fenced, LockKind, NonReentrant, NonReentrantFair, Read, Reentrant, Spin, Write,
};
pub use rwlock::ReadWriteLock;
pub use shutdown::{ShutdownReport, Unreleased};
pub use sync::{
    CountDownLatch, KeyTtl, PermitExpirableSemaphore, PermitGuard, PermitId, RateLimiter,
    RateLimiterConfig, RateType, Semaphore, SemaphoreGuard,
};
pub use tls::Tls;

/// Redisson's reentrant lock (`RLock`): the lock [`Client::get_lock`] returns.
pub type RLock = Lock<Reentrant>;
/// A guard of an [`RLock`].
pub type RLockGuard = LockGuard<Reentrant>;
/// Redisson's fair lock (`RFairLock`): [`Client::get_fair_lock`].
pub type FairLock = Lock<Fair>;
/// Redisson's fenced lock (`RFencedLock`): [`Client::get_fenced_lock`].
pub type FencedLock = Lock<Fenced>;
/// Redisson's non-reentrant lock (4.4+): [`Client::get_non_reentrant_lock`].
pub type NonReentrantLock = Lock<NonReentrant>;
/// Redisson's non-reentrant fair lock (4.4+): [`Client::get_non_reentrant_fair_lock`].
pub type NonReentrantFairLock = Lock<NonReentrantFair>;
/// Redisson's spin lock (`RSpinLock`, no pub/sub): [`Client::get_spin_lock`].
pub type SpinLock = Lock<Spin>;
