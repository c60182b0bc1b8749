//! The small enums and records of the settings: `WAITAOF` (`AofSync`), what a refused `WAIT`
//! means (`ReplicaSync`), sharded pub/sub (`ShardedPubSub`), the sentinels' own credentials
//! (`SentinelAuth`); a client that only reads.

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
    /// [`LockError::SyncRefused`](crate::LockError::SyncRefused) when its `WAIT` probe is
    /// refused (with [`LockError::InvalidArgument`](crate::LockError::InvalidArgument) when its
    /// `WAITAOF` probe is), and a lock write whose `WAIT` or `WAITAOF` is refused later fails
    /// with `SyncRefused` (an acquire is undone).
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

/// Credentials for the sentinels themselves ([`Config::with_sentinel_auth`](crate::Config::with_sentinel_auth)). Its `Debug`
/// never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SentinelAuth {
    /// `None`: the `default` user (`AUTH <password>`, a sentinel with `requirepass`).
    pub(crate) username: Option<String>,
    pub(crate) password: String,
}

impl std::fmt::Debug for SentinelAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelAuth")
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

impl super::Config {
    /// A client that only reads (default `false`): connecting skips the checks that the user may
    /// load and run scripts (`SCRIPT LOAD`, `EVALSHA`), the scripts' preload and the `WAIT` /
    /// `WAITAOF` probes of replica sync (nothing is written to confirm), so a user
    /// allowed only read commands can connect and ask [`Lock::is_locked`](crate::Lock::is_locked),
    /// [`Lock::remain_time_to_live`](crate::Lock::remain_time_to_live) and the like (the
    /// operator CLI's `inspect`, `list` and `watch` connect so). Anything that writes still
    /// sends its script and fails with the server's `NOPERM` for such a user.
    ///
    /// ```
    /// use redisson_lock::Config;
    /// let config = Config::new("redis://oncall@127.0.0.1/").with_read_only(true);
    /// assert!(config.read_only());
    /// ```
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// See [`Config::with_read_only`](crate::Config::with_read_only).
    pub fn read_only(&self) -> bool {
        self.read_only
    }
}
