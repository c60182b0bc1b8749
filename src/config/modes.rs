//! The small enums and records of the settings: `WAITAOF` (`AofSync`), what a refused `WAIT`
//! means (`ReplicaSync`), sharded pub/sub (`ShardedPubSub`).

use std::time::Duration;

/// `WAITAOF` after lock writes (Redis 7.2+): how many fsyncs must confirm a write before it
/// counts, beside (or instead of) `WAIT`'s replica acknowledgements. See
/// [`Config::with_aof_sync`](crate::Config::with_aof_sync).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AofSync {
    /// Whether the master itself must have fsynced the write to its AOF (`numlocal` 1; needs
    /// `appendonly yes`).
    pub local: bool,
    /// How many replicas must have fsynced it to theirs (`numreplicas`).
    pub replicas: u32,
    /// How long `WAITAOF` may wait.
    pub timeout: Duration,
}

/// What a client does when the server refuses `WAIT` or `WAITAOF` (a proxy or a serverless
/// offering that does not forward them, an ACL that denies them), which it finds out at connect
/// (a probe) or at the first refused lock write. See
/// [`Config::with_replica_sync_policy`](crate::Config::with_replica_sync_policy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicaSync {
    /// The confirmation is required (the default): [`Client::connect`] fails with
    /// [`LockError::SyncRefused`](crate::LockError::SyncRefused) when its probe is refused,
    /// and a lock write whose `WAIT` or `WAITAOF` is refused later fails with it too (an
    /// acquire is undone).
    ///
    /// [`Client::connect`]: crate::Client::connect
    #[default]
    Required,
    /// Go on without it: the first refusal is logged once (a `tracing` warning naming the
    /// command and the server's words), and from then on this client sends lock writes without
    /// the refused command. Its writes are then no longer confirmed on replicas (or fsyncs).
    BestEffort,
}

/// Whether unlock notifications use sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`) on a cluster,
/// Redisson's `shardedSubscriptionMode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardedPubSub {
    /// Sharded when the cluster supports it (`PUBSUB SHARDNUMSUB` succeeds, Redis 7+), as
    /// Redisson's default `AUTO`.
    #[default]
    Auto,
    /// Always sharded.
    On,
    /// Never sharded (`PUBLISH`/`SUBSCRIBE`); use when the Java side sets `OFF`.
    Off,
}
