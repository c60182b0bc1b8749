//! Client configuration: a builder with named, documented defaults. Settings only: turning
//! them into redis-rs clients is `endpoints`' work.
//!
//! `mod.rs` the builder and its getters; `modes` the small enums and records (`AofSync`,
//! `ReplicaSync`, `ShardedPubSub`); `topology` where the deployment is; `validate` the rules a
//! configuration must meet before anything connects; `redact` passwords out of URLs.

use std::time::Duration;

use crate::tls::Tls;

mod modes;
mod redact;
mod topology;
mod validate;

pub(crate) use modes::SentinelAuth;
pub use modes::{AofSync, ReplicaSync, ShardedPubSub};
pub use redact::{redact, url_with_password};
pub use topology::Topology;

/// Lease of a lock taken without an explicit lease, renewed every third of it (Redisson's
/// `lockWatchdogTimeout`). Use the same value as your Java fleet.
pub const DEFAULT_WATCHDOG_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one command may wait for its reply (Redisson's `timeout`). redis-rs defaults to
/// 500 ms, which turns a busy server into spurious failures; Redisson uses 3 s.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long opening a connection may take before the attempt fails.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a queued fair-lock waiter may be absent before the queue skips it (Redisson's
/// `fairLockWaitTimeout`, 5 minutes).
pub const DEFAULT_FAIR_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long subscribing to an unlock channel may take (Redisson's `subscriptionTimeout`).
pub const DEFAULT_SUBSCRIPTION_TIMEOUT: Duration = Duration::from_millis(7500);
/// How many times an idempotent command (unlock, renew) is tried, and how many consecutive
/// connection failures a waiting `lock()` rides out (Redisson's `retryAttempts`).
pub const DEFAULT_RETRY_ATTEMPTS: u32 = 4;
/// The cap of the first pause between tries; the cap doubles up to [`MAX_RETRY_DELAY`], and each
/// pause is drawn at random below its cap (full jitter), so clients do not retry in step.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);
/// Upper bound of the delay between tries.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(2);

/// How many latch deletions (semaphore receipts; lock releases write no latch) may wait for the
/// batched `UNLINK`; past that, a receipt is left to expire by its own PX, so memory stays bounded
/// at any release rate.
pub const DEFAULT_LATCH_QUEUE: usize = 16_384;
/// Default of [`Config::with_watchdog_batch_size`]: Redisson's `lockWatchdogBatchSize` (100).
pub const DEFAULT_WATCHDOG_BATCH_SIZE: usize = 100;

/// How long `WAIT` may take for replicas to confirm a lock write (Redisson's
/// `slavesSyncTimeout`).
pub const DEFAULT_REPLICA_SYNC_TIMEOUT: Duration = Duration::from_secs(1);

/// Configuration of a [`Client`](crate::Client).
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::Config;
///
/// let config = Config::new("redis://127.0.0.1:6379/")
///     .with_watchdog_timeout(Duration::from_secs(10))
///     .with_response_timeout(Duration::from_secs(1));
/// assert_eq!(config.watchdog_timeout(), Duration::from_secs(10));
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    topology: Topology,
    sharded_pubsub: ShardedPubSub,
    replica_sync: Option<Option<Duration>>,
    replica_sync_policy: ReplicaSync,
    watchdog_timeout: Duration,
    watchdog_batch_size: usize,
    response_timeout: Duration,
    connection_timeout: Duration,
    subscription_timeout: Duration,
    fair_lock_wait_timeout: Duration,
    writer_preference: bool,
    retry_attempts: u32,
    retry_delay: Duration,
    latch_queue: usize,
    aof_sync: Option<AofSync>,
    batching: bool,
    failover_awareness: bool,
    tls: Tls,
    client_name: Option<String>,
    sentinel_auth: Option<SentinelAuth>,
    read_only: bool,
}

/// The plain settings, one row each: a documented setter `with_<field>(value) -> Self` and its
/// getter `<field>()` ("See [`Config::with_<field>`].").
macro_rules! settings {
    ($($(#[$doc:meta])* $with:ident($arg:ident) -> $field:ident: $t:ty;)*) => {$(
        $(#[$doc])*
        pub fn $with(mut self, $arg: $t) -> Self {
            self.$field = $arg;
            self
        }

        #[doc = concat!("See [`Config::", stringify!($with), "`].")]
        pub fn $field(&self) -> $t {
            self.$field
        }
    )*};
}

impl Config {
    /// A configuration for the server at `url` (`redis://[user:password@]host:port[/db]`), with
    /// every other setting at its `DEFAULT_*` value.
    pub fn new(url: impl Into<String>) -> Self {
        Config::with_topology(Topology::Single { url: url.into() })
    }

    /// A configuration for a Redis Cluster reached through `nodes` (any subset of its nodes).
    ///
    /// ```
    /// use redisson_lock::Config;
    /// let config = Config::cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]);
    /// ```
    pub fn cluster<S: Into<String>>(nodes: impl IntoIterator<Item = S>) -> Self {
        Config::with_topology(Topology::Cluster {
            nodes: nodes.into_iter().map(Into::into).collect(),
        })
    }

    /// A configuration for the master `master` monitored by these sentinels.
    ///
    /// ```
    /// use redisson_lock::Config;
    /// let config = Config::sentinel(["redis://127.0.0.1:26379/"], "mymaster");
    /// ```
    pub fn sentinel<S: Into<String>>(
        sentinels: impl IntoIterator<Item = S>,
        master: impl Into<String>,
    ) -> Self {
        Config::with_topology(Topology::Sentinel {
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            master: master.into(),
        })
    }

    fn with_topology(topology: Topology) -> Self {
        Config {
            topology,
            sharded_pubsub: ShardedPubSub::Auto,
            replica_sync: None,
            replica_sync_policy: ReplicaSync::Required,
            watchdog_timeout: DEFAULT_WATCHDOG_TIMEOUT,
            watchdog_batch_size: DEFAULT_WATCHDOG_BATCH_SIZE,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
            subscription_timeout: DEFAULT_SUBSCRIPTION_TIMEOUT,
            fair_lock_wait_timeout: DEFAULT_FAIR_LOCK_WAIT_TIMEOUT,
            writer_preference: true,
            retry_attempts: DEFAULT_RETRY_ATTEMPTS,
            retry_delay: DEFAULT_RETRY_DELAY,
            latch_queue: DEFAULT_LATCH_QUEUE,
            aof_sync: None,
            batching: false,
            failover_awareness: true,
            tls: Tls::new(),
            client_name: None,
            sentinel_auth: None,
            read_only: false,
        }
    }

    settings! {
        /// Sharded pub/sub on a cluster: [`ShardedPubSub::Auto`] by default, as Redisson. Must match
        /// the Java side, or the two will not hear each other's unlock messages.
        with_sharded_pubsub(mode) -> sharded_pubsub: ShardedPubSub;

        /// What to do when the server refuses `WAIT` or `WAITAOF` ([`ReplicaSync`]): fail
        /// ([`ReplicaSync::Required`], the default) or go on without the refused command, saying so
        /// once through `tracing` ([`ReplicaSync::BestEffort`]). Never silent either way.
        ///
        /// ```
        /// use std::time::Duration;
        /// use redisson_lock::{Config, ReplicaSync};
        /// // Behind a proxy that may not forward WAIT: sync where the server allows it.
        /// let config = Config::sentinel(["redis://127.0.0.1:26379/"], "mymaster")
        ///     .with_replica_sync_policy(ReplicaSync::BestEffort);
        /// assert_eq!(config.replica_sync_policy(), ReplicaSync::BestEffort);
        /// assert_eq!(config.replica_sync(), Some(Duration::from_secs(1)));
        /// ```
        with_replica_sync_policy(policy) -> replica_sync_policy: ReplicaSync;

        /// `WAITAOF` after every lock write (acquire, release, renewal, force-unlock), Redis 7.2+:
        /// the write counts only once the master (`local`) and/or `replicas` replicas have fsynced
        /// it, so a crash or failover right after cannot forget it. A write not confirmed in time
        /// fails with [`LockError::ReplicaSync`](crate::LockError::ReplicaSync) and an acquire is
        /// undone, as with `WAIT`. Off by default (Redisson has no such option). [`Client::connect`]
        /// fails with `InvalidArgument` on a server without `WAITAOF` (before 7.2) or, with `local`,
        /// without `appendonly yes`, unless the [`ReplicaSync::BestEffort`] policy lets it go on
        /// without `WAITAOF` (with a warning).
        ///
        /// [`Client::connect`]: crate::Client::connect
        ///
        /// ```
        /// use std::time::Duration;
        /// use redisson_lock::{AofSync, Config};
        /// let config = Config::new("redis://127.0.0.1/").with_aof_sync(Some(AofSync {
        ///     local: true,
        ///     replicas: 0,
        ///     timeout: Duration::from_millis(500),
        /// }));
        /// ```
        with_aof_sync(sync) -> aof_sync: Option<AofSync>;

        /// The lease of watchdog-mode locks and of guarded permits
        /// ([`PermitExpirableSemaphore::acquire_guarded`](crate::PermitExpirableSemaphore::acquire_guarded));
        /// they are renewed every third of it.
        with_watchdog_timeout(lease) -> watchdog_timeout: Duration;

        /// How many holds the watchdog renews with one script (Redisson's `lockWatchdogBatchSize`,
        /// default [`DEFAULT_WATCHDOG_BATCH_SIZE`]): a client holding 1,000 watchdog locks sends 10
        /// renewal scripts per tick by default. Larger batches mean fewer round trips and longer
        /// scripts (the server runs nothing else meanwhile). At least 1.
        ///
        /// ```
        /// use redisson_lock::Config;
        /// let config = Config::new("redis://127.0.0.1/").with_watchdog_batch_size(500);
        /// assert_eq!(config.watchdog_batch_size(), 500);
        /// ```
        with_watchdog_batch_size(holds) -> watchdog_batch_size: usize;

        /// Reply timeout of each command.
        with_response_timeout(timeout) -> response_timeout: Duration;

        /// Timeout of each connection attempt.
        with_connection_timeout(timeout) -> connection_timeout: Duration;

        /// Bound on subscribing to an unlock channel.
        with_subscription_timeout(timeout) -> subscription_timeout: Duration;

        /// How long a queued fair-lock waiter may be absent (its process gone) before the queue
        /// skips it. Use the same value as your Java fleet's `fairLockWaitTimeout`.
        with_fair_lock_wait_timeout(timeout) -> fair_lock_wait_timeout: Duration;

        /// Writer preference of this client's read-write locks (default on): while a write acquire
        /// of this client waits on a name, new read acquires of this client on that name wait
        /// behind it (a `try_lock` of the read side fails at once), so a stream of local readers
        /// cannot starve a local writer. A read waits only for the writers that were waiting when
        /// it came, so local writers waiting in turn cannot starve local readers either. An owner
        /// that already holds the name's read or write side in this client is never held back
        /// (re-entry and downgrade cannot deadlock on it).
        ///
        /// Client-side only: nothing changes on the wire. Readers in other processes (Java
        /// Redisson's included) follow Redisson's read-preferring data as before: they enter
        /// whenever the lock is in read mode, waiting writers or not. Off: Redisson's behaviour, a
        /// read enters whenever the lock is in read mode.
        ///
        /// ```
        /// use redisson_lock::Config;
        /// let config = Config::new("redis://127.0.0.1:6379/").with_writer_preference(false);
        /// assert!(!config.writer_preference());
        /// ```
        with_writer_preference(on) -> writer_preference: bool;

        /// Tries of idempotent commands, and connection failures a waiter rides out (at least 1).
        with_retry_attempts(attempts) -> retry_attempts: u32;

        /// The cap of the first pause between tries (the cap doubles up to [`MAX_RETRY_DELAY`]; each
        /// pause is random below its cap, so clients that failed together do not retry together).
        with_retry_delay(delay) -> retry_delay: Duration;

        /// How many latch deletions may queue for the batched `UNLINK` ([`DEFAULT_LATCH_QUEUE`]).
        /// The latches are the semaphore's receipts (`redisson_semaphore_latch:...`, docs/protocol.md):
        /// lock releases write no unlock latch any more (their retries trim to the owner's known
        /// count), so this only matters to [`Semaphore`](crate::Semaphore) users. A receipt only
        /// guards its own request's retries; one that finds the queue full is not deleted but expires
        /// by its PX, so a rate the deleter cannot follow costs keys that live a while, never
        /// unbounded memory. At least 1. (The name is kept from when unlocks used it.)
        with_latch_queue(capacity) -> latch_queue: usize;

        /// Group commit of lock scripts (off by default). While fewer than 16 lone script calls are
        /// out on the client's connection, every acquire and release is sent at once as its own
        /// script, exactly as without batching. Beyond that the server is the bottleneck and
        /// operations queue; when any call lands, the queue leaves (on one of 4 flights) as **one**
        /// script call that runs each operation exactly as its own script would (same keys, values,
        /// channels, messages and TTLs, in order; see `docs/protocol.md`) when it holds 8 or more,
        /// or else as that many separate script calls written back to back (a batch that small
        /// costs the server more than it saves). Each operation keeps its own reply, errors and
        /// replica sync.
        ///
        /// Measured (`benches/results/HISTORY.md`, "Issue 24"; lock+unlock cycles per second on distinct
        /// names, server and client on their own cores, Redis 7.0 and Valkey 8.1): +9 to +19 % at
        /// 256 tasks, level at 16 (0.97-1.04 x) and within a few per cent at 64 (0.94-1.00 x), hence
        /// still off by default: it is for clients with hundreds of concurrent lock operations.
        ///
        /// ```
        /// let config = redisson_lock::Config::new("redis://127.0.0.1/").with_batching(true);
        /// assert!(config.batching());
        /// ```
        with_batching(on) -> batching: bool;

        /// Failover awareness (on by default). Through Sentinel, the client listens on the
        /// sentinels' own pub/sub for `+switch-master` of its master, and notices too when the
        /// command connection finds a different master after a connection error or a `READONLY`
        /// reply. On either, the watchdog re-verifies every watchdog hold on the new master at
        /// once, out of its turn: a hold the new master lacks (a write that never reached the
        /// promoted replica) is reported lost ([`LockGuard::is_lost`](crate::LockGuard::is_lost),
        /// `lost()`, the lost-lease metric) within about a second of the switch, not at the next
        /// renewal a third of the watchdog timeout later. Off: holds are checked only at the
        /// watchdog's regular renewals (the client still follows `+switch-master` to the new
        /// master at once, as Redisson does: that is not optional).
        ///
        /// On a Redis Cluster, where redis-rs follows `MOVED` without telling, the client polls
        /// the slot map instead: one `CLUSTER SLOTS` to one node every 500 ms. When a slot has a
        /// new master (a failover, a slot moved), the connection's own slot map is brought up to
        /// date and the watchdog runs the same out-of-turn pass, so a hold the new master lacks is
        /// reported lost within about a second of the switch. It has no effect on standalone
        /// servers.
        ///
        /// ```
        /// let config = redisson_lock::Config::sentinel(["redis://127.0.0.1:26379/"], "mymaster")
        ///     .with_failover_awareness(false);
        /// assert!(!config.failover_awareness());
        /// ```
        with_failover_awareness(on) -> failover_awareness: bool;
    }

    /// Replica synchronisation after lock writes: `Some(timeout)` sends `WAIT <replicas>
    /// <timeout>` after every lock script and fails the operation (undoing an acquire) when
    /// replicas exist but none confirmed; `None` turns it off. Default: on with
    /// [`DEFAULT_REPLICA_SYNC_TIMEOUT`] for Cluster and Sentinel (Redisson's
    /// `checkLockSyncedSlaves`), off for a single server, where Redisson never waits. A server
    /// that refuses `WAIT` (a proxy, an ACL) is found at connect: see
    /// [`Config::with_replica_sync_policy`].
    pub fn with_replica_sync(mut self, timeout: Option<Duration>) -> Self {
        self.replica_sync = Some(timeout);
        self
    }

    /// TLS settings for `rediss://` URLs: a CA of your own, a client certificate (mutual TLS),
    /// or, for test set-ups only, no verification at all. They apply to every connection the
    /// client opens: commands, the pub/sub subscriber, every cluster node, the sentinels and
    /// the master they name. A `rediss://` URL without settings trusts the host's CA store.
    /// Settings with a plain `redis://` URL are refused at connect (`InvalidUrl`), so a
    /// forgotten `s` never sends a password in the clear while you believe it is encrypted.
    ///
    /// ```
    /// use redisson_lock::{Config, Tls};
    /// let config = Config::new("rediss://default:secret@redis.example.com:6380/").with_tls(
    ///     Tls::new()
    ///         .with_ca_file("ca.pem")
    ///         .with_client_cert_files("client.pem", "client-key.pem"),
    /// );
    /// assert!(!config.tls().is_insecure());
    /// ```
    pub fn with_tls(mut self, tls: Tls) -> Self {
        self.tls = tls;
        self
    }

    /// See [`Config::with_tls`].
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// The name of this client's connections (`CLIENT SETNAME`), so that an operator finds them
    /// in `CLIENT LIST`: every connection the client opens (commands, the subscriber, each
    /// cluster node) is called `<name>:<client id>`, where the client id is
    /// [`Client::id`](crate::Client::id), the `<uuid>` part of the lock fields it writes. Without
    /// a name, `redisson-lock:<client id>`. So a lock's holder field leads to its connection,
    /// and the connection's address to the pod. The name must be printable ASCII without spaces
    /// (Redis' rule for connection names), at most 64 characters; anything else is refused at
    /// connect with [`LockError::InvalidArgument`](crate::LockError::InvalidArgument).
    ///
    /// The connections also tell the server their library (`CLIENT SETINFO LIB-NAME
    /// redisson-lock`, `LIB-VER`) where it knows the command (Redis 7.2+, Valkey).
    ///
    /// ```
    /// let config = redisson_lock::Config::new("redis://127.0.0.1/").with_client_name("billing-api");
    /// assert_eq!(config.client_name(), Some("billing-api"));
    /// ```
    pub fn with_client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// See [`Config::with_client_name`].
    pub fn client_name(&self) -> Option<&str> {
        self.client_name.as_deref()
    }

    /// Credentials for the sentinels themselves, apart from the data nodes' (Redisson's
    /// `sentinelUsername` / `sentinelPassword`). The data nodes (master and replicas) get the
    /// credentials of the sentinel URLs (`redis://user:password@sentinel:26379/`); the sentinels
    /// get these. Pass `""` as `username` for a sentinel with `requirepass` (the `default`
    /// user).
    ///
    /// Without this setting, as Redisson: a sentinel that answers without a password gets none
    /// (auth on the data nodes only, the common set-up), and one that asks for a password
    /// (`NOAUTH`) gets the URL's credentials. Only sentinel mode uses it.
    ///
    /// ```
    /// use redisson_lock::Config;
    /// let config = Config::sentinel(["redis://app:data-secret@10.0.0.5:26379/"], "mymaster")
    ///     .with_sentinel_auth("sentinel-user", "sentinel-secret");
    /// // Debug output never shows either password.
    /// assert!(!format!("{config:?}").contains("secret"));
    /// ```
    pub fn with_sentinel_auth(
        mut self,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        let username = username.into();
        self.sentinel_auth = Some(SentinelAuth {
            username: (!username.is_empty()).then_some(username),
            password: password.into(),
        });
        self
    }

    /// The sentinels' own credentials, when set ([`Config::with_sentinel_auth`]).
    pub(crate) fn sentinel_auth(&self) -> Option<&SentinelAuth> {
        self.sentinel_auth.as_ref()
    }

    /// Where the deployment is.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }
    /// A printable address: the URL, or the first seed node or sentinel.
    pub fn url(&self) -> &str {
        match &self.topology {
            Topology::Single { url } => url,
            Topology::Cluster { nodes } => nodes.first().map(String::as_str).unwrap_or(""),
            Topology::Sentinel { sentinels, .. } => {
                sentinels.first().map(String::as_str).unwrap_or("")
            }
        }
    }
    /// The effective replica sync timeout (see [`Config::with_replica_sync`]).
    pub fn replica_sync(&self) -> Option<Duration> {
        match self.replica_sync {
            Some(explicit) => explicit,
            None => match self.topology {
                Topology::Single { .. } => None,
                _ => Some(DEFAULT_REPLICA_SYNC_TIMEOUT),
            },
        }
    }
    /// Delay before try number `attempt` (0-based): `retry_delay * 2^attempt`, capped.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX);
        self.retry_delay.saturating_mul(factor).min(MAX_RETRY_DELAY)
    }

    /// Redisson's unlock latch TTL, `(timeout + retry delay) * retryAttempts`: long enough to
    /// outlive every retry of one request. Our unlocks write no latch; the semaphore's receipts
    /// live at least this long.
    pub(crate) fn latch_ttl(&self) -> Duration {
        (self.response_timeout + MAX_RETRY_DELAY).saturating_mul(self.retry_attempts.max(1))
    }
}

/// Milliseconds of a duration as Redis expects them, rounded up so a sub-millisecond lease is
/// never sent as `0`.
pub(crate) fn millis(d: Duration) -> u64 {
    let ms = d.as_millis();
    let ms = if Duration::from_millis(ms as u64) < d {
        ms + 1
    } else {
        ms
    };
    u64::try_from(ms).unwrap_or(u64::MAX)
}
