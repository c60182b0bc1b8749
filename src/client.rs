//! Connecting a [`Client`] and the factories of its locks. The client's state itself lives in
//! `shared.rs`, below the locks, so that the locks depend on it and not on this module.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::{Config, ReplicaSync, ShardedPubSub, Topology};
use crate::conn::Conn;
use crate::endpoints::Endpoints;
use crate::error::{is_auth_error, LockError, Result};
use crate::holds::Holds;
use crate::lock::Lock;
use crate::pubsub::{PubSub, Source};
use crate::raw::{Backoff, Fair, Fenced, NonReentrant, NonReentrantFair, Reentrant, Spin};
use crate::rwlock::ReadWriteLock;
pub use crate::shared::Client;
use crate::shared::ClientInner;
use crate::shutdown::ShutdownReport;
use crate::sync::{CountDownLatch, PermitExpirableSemaphore, RateLimiter, Semaphore};
use crate::watchdog;

impl Client {
    /// Connects to `url` with the default [`Config`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the half-made connection.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidUrl`] for a URL that does not parse, [`LockError::Auth`] when the
    /// server wants a password that was not given (or refuses the one given), and connection
    /// errors when the server cannot be reached within the connection timeout.
    pub async fn connect(url: &str) -> Result<Client> {
        Client::with_config(Config::new(url)).await
    }

    /// Connects with an explicit [`Config`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the half-made connection.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a bad setting (e.g. a zero timeout),
    /// [`LockError::InvalidUrl`] for a URL that does not parse, [`LockError::Auth`] for missing
    /// or wrong credentials (checked with a `PING` before this returns), and connection errors
    /// when the server cannot be reached.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|_| async move {
    /// use std::time::Duration;
    /// use redisson_lock::{Client, Config};
    /// let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".to_owned());
    /// let config = Config::new(url).with_watchdog_timeout(Duration::from_secs(10));
    /// let client = Client::with_config(config).await?;
    /// # Ok(()) })
    /// ```
    pub async fn with_config(config: Config) -> Result<Client> {
        config.validate()?;
        // Settings become clients in one place, once: every URL parsed, certificates read.
        let endpoints = Arc::new(Endpoints::new(&config)?);
        let id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let name = format!(
            "{}:{id}",
            config
                .client_name()
                .unwrap_or(crate::conn::DEFAULT_CLIENT_NAME)
        );
        let mut conn = match Conn::connect(&endpoints, &config, name.clone()).await {
            Ok(conn) => conn,
            Err(e) => return Err(endpoints.connect_error(auth_error(e)).await),
        };
        // A server that wants a password accepts the connection and refuses every command:
        // find out now, not at the first lock call. (A TLS server that wants a client
        // certificate it was not given says so at the first reply too.)
        if let Err(e) = redis::cmd("PING")
            .query_async::<redis::Value>(&mut conn)
            .await
        {
            return Err(endpoints.connect_error(auth_error(e.into())).await);
        }
        // A user whose ACL lacks what every lock needs finds out now, with the server naming
        // the command (docs/locks.md, "Least privilege"): `SCRIPT LOAD` (after a restart or
        // failover the scripts are loaded again) and `EVALSHA`, both tried on a script that
        // touches nothing. Keys and channels depend on the lock names: those are refused at
        // the lock call, before anything is acquired.
        crate::conn::warn_if_evicting(&mut conn).await;
        if !config.read_only() {
            crate::scripts::probe(&mut conn).await?;
            crate::scripts::preload(&conn).await;
        }
        // A read-only client writes nothing: no replica or fsync to confirm, no probe.
        if let Some(aof) = config.aof_sync().filter(|_| !config.read_only()) {
            // WAITAOF exists from Redis 7.2, and `numlocal` needs `appendonly yes`: find out
            // now rather than at the first lock write.
            let probe = redis::cmd("WAITAOF")
                .arg(u8::from(aof.local))
                .arg(0)
                .arg(1)
                .query_async::<redis::Value>(&mut conn)
                .await;
            if let Err(e) = probe {
                if config.replica_sync_policy() != ReplicaSync::BestEffort {
                    // An ACL refusal (`is_permission_denied`) or a lost connection speaks for
                    // itself; anything else is a server without the command or the AOF.
                    if e.code().is_none() || e.code() == Some("NOPERM") {
                        return Err(e.into());
                    }
                    return Err(LockError::InvalidArgument(
                        "WAITAOF was refused: it needs Redis 7.2+ (and appendonly yes for local fsync)",
                    ));
                }
                conn.refused_at_connect("WAITAOF", e.to_string())?;
            }
        }
        if config.replica_sync().is_some() && !config.read_only() {
            // A proxy or serverless offering may not forward WAIT, an ACL may deny it: find out
            // now (`WAIT 0 0` answers at once) rather than at every lock write.
            let probe = redis::cmd("WAIT")
                .arg(0)
                .arg(0)
                .query_async::<redis::Value>(&mut conn)
                .await;
            match probe {
                Err(e) if e.code().is_some() => conn.refused_at_connect("WAIT", e.to_string())?,
                Err(e) => return Err(e.into()),
                Ok(_) => {}
            }
        }
        let sharded = match (config.topology(), config.sharded_pubsub()) {
            (Topology::Cluster { .. }, ShardedPubSub::On) => true,
            (Topology::Cluster { .. }, ShardedPubSub::Auto) => {
                // Redisson's AUTO probe: sharded when the cluster knows the command (Redis 7+).
                redis::cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .query_async::<redis::Value>(&mut conn)
                    .await
                    .is_ok()
            }
            _ => false,
        };
        let source = match config.topology() {
            Topology::Single { .. } => Source::Fixed {
                client: Box::new(endpoints.client()?),
                name: name.clone(),
            },
            Topology::Cluster { .. } => Source::Cluster {
                endpoints: endpoints.clone(),
                sharded,
                name,
            },
            Topology::Sentinel { .. } => match conn.sentinel() {
                Some(sentinel) => Source::Sentinel {
                    sentinel,
                    name: name.clone(),
                },
                None => {
                    return Err(LockError::InvalidArgument(
                        "sentinel topology without a sentinel connection",
                    ))
                }
            },
        };
        let pubsub = PubSub::start(source, &config);
        let wake = Arc::new(Notify::new());
        let latches = crate::latches::Latches::start(conn.clone(), &config);
        let inner = Arc::new_cyclic(|weak| ClientInner {
            id,
            latches,
            conn,
            publish: if sharded { "SPUBLISH" } else { "PUBLISH" },
            pubsub,
            holds: Holds::default(),
            watchdog_wake: wake.clone(),
            watchdog: tokio::spawn(watchdog::run(weak.clone(), wake.clone())),
            closed: Default::default(),
            permits: Default::default(),
            runtime: tokio::runtime::Handle::current(),
            config,
        });
        // Only now may the watchdog look at the client (see `watchdog::run`).
        wake.notify_one();
        Ok(Client { inner })
    }

    /// The reentrant lock called `name` (Redisson's `getLock`).
    ///
    /// This only builds a handle; nothing is sent until you lock. Handles are cheap and may be
    /// created per use.
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let lock = client.get_lock("{user1}:lock");
    /// assert_eq!(lock.name(), "{user1}:lock");
    /// # Ok(()) })
    /// ```
    pub fn get_lock(&self, name: impl Into<String>) -> Lock<Reentrant> {
        Lock::new(self.clone(), name.into(), Reentrant)
    }

    /// The fair lock called `name` (Redisson's `getFairLock`): granted in arrival order.
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let guard = client.get_fair_lock("plotter").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub fn get_fair_lock(&self, name: impl Into<String>) -> Lock<Fair> {
        Lock::new(self.clone(), name.into(), Fair)
    }

    /// The non-reentrant lock called `name` (Redisson 4.4+'s `getNonReentrantLock`): an RLock
    /// (same data) that its holder cannot take twice. See [`NonReentrant`].
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let lock = client.get_non_reentrant_lock("report");
    /// let guard = lock.lock().await?;
    /// // The holder's second acquire is refused (Java: IllegalMonitorStateException).
    /// assert!(lock.try_lock().await.unwrap_err().is_already_held());
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub fn get_non_reentrant_lock(&self, name: impl Into<String>) -> Lock<NonReentrant> {
        Lock::new(self.clone(), name.into(), NonReentrant)
    }

    /// The non-reentrant fair lock called `name` (Redisson 4.4+'s `getNonReentrantFairLock`):
    /// a fair lock (same data, same queue) that its holder cannot take twice. See
    /// [`NonReentrantFair`].
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let guard = client.get_non_reentrant_fair_lock("scanner").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub fn get_non_reentrant_fair_lock(&self, name: impl Into<String>) -> Lock<NonReentrantFair> {
        Lock::new(self.clone(), name.into(), NonReentrantFair)
    }

    /// The read-write lock called `name` (Redisson's `getReadWriteLock`).
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let rw = client.get_read_write_lock("menu");
    /// let guard = rw.read_lock().lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self.clone(), name.into())
    }

    /// The fenced lock called `name` (Redisson's `getFencedLock`): every acquisition carries a
    /// strictly increasing token ([`LockGuard::token`](crate::LockGuard::token)).
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let guard = client.get_fenced_lock("journal").lock().await?;
    /// println!("token {}", guard.token());
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub fn get_fenced_lock(&self, name: impl Into<String>) -> Lock<Fenced> {
        Lock::new(self.clone(), name.into(), Fenced)
    }

    /// The spin lock called `name` (Redisson's `getSpinLock`): an RLock whose waiters poll with
    /// Redisson's default exponential [`Backoff`](crate::Backoff) (1 ms doubling to 128 ms)
    /// instead of subscribing, for deployments where pub/sub is unavailable. Its releases
    /// publish nothing.
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let guard = client.get_spin_lock("batch-job").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) })
    /// ```
    pub fn get_spin_lock(&self, name: impl Into<String>) -> Lock<Spin> {
        Lock::new(self.clone(), name.into(), Spin::default())
    }

    /// The spin lock called `name`, polling with `backoff` (Redisson's
    /// `getSpinLock(name, backOff)`).
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// use std::time::Duration;
    /// use redisson_lock::Backoff;
    /// let lock = client.get_spin_lock_with("cleanup-job", Backoff::constant(Duration::from_millis(20))?);
    /// # Ok(()) })
    /// ```
    pub fn get_spin_lock_with(&self, name: impl Into<String>, backoff: Backoff) -> Lock<Spin> {
        Lock::new(self.clone(), name.into(), Spin::new(backoff))
    }

    /// The semaphore called `name` (Redisson's `getSemaphore`): see [`Semaphore`].
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let permits = client.get_semaphore("workers");
    /// permits.try_set_permits(4).await?;
    /// permits.acquire().await?;
    /// permits.release().await?;
    /// # Ok(()) })
    /// ```
    pub fn get_semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.clone(), name.into())
    }

    /// The count-down latch called `name` (Redisson's `getCountDownLatch`): see
    /// [`CountDownLatch`].
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let latch = client.get_count_down_latch("batch-42");
    /// latch.try_set_count(1).await?;
    /// latch.count_down().await?;
    /// assert!(latch.wait_for(std::time::Duration::from_secs(1)).await?);
    /// # Ok(()) })
    /// ```
    pub fn get_count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.clone(), name.into())
    }

    /// The permit-expirable semaphore called `name` (Redisson's
    /// `getPermitExpirableSemaphore`): see [`PermitExpirableSemaphore`].
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// use std::time::Duration;
    /// let slots = client.get_permit_expirable_semaphore("gpus");
    /// slots.try_set_permits(1).await?;
    /// if let Some(id) = slots.with_lease(Duration::from_secs(60)).try_acquire().await? {
    ///     slots.release(&id).await?;
    /// }
    /// # Ok(()) })
    /// ```
    pub fn get_permit_expirable_semaphore(
        &self,
        name: impl Into<String>,
    ) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.clone(), name.into())
    }

    /// The rate limiter called `name` (Redisson's `getRateLimiter`): see [`RateLimiter`].
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// use std::time::Duration;
    /// let limiter = client.get_rate_limiter("emails");
    /// limiter
    ///     .try_set_rate(redisson_lock::RateLimiterConfig::new(redisson_lock::RateType::Overall, 10, Duration::from_secs(60)))
    ///     .await?;
    /// limiter.acquire().await?;
    /// # Ok(()) })
    /// ```
    pub fn get_rate_limiter(&self, name: impl Into<String>) -> RateLimiter {
        RateLimiter::new(self.clone(), name.into())
    }

    /// The value kept in Redis under `key` that only the holder with the newest fencing token
    /// may write: see [`FencedValue`](crate::FencedValue). Nothing is sent until you use it.
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let guard = client.get_fenced_lock("payouts").lock().await?;
    /// let written = client.get_fenced_value("payouts:total").set(guard.token(), "100").await?;
    /// # Ok(()) })
    /// ```
    pub fn get_fenced_value(&self, key: impl Into<String>) -> crate::fencing::FencedValue {
        crate::fencing::FencedValue::new(self.clone(), key.into())
    }

    /// A clone of the command connection, for your own commands next to the locks. Commands
    /// sent through it are not followed by `WAIT` (replica sync applies to the lock writes).
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// use redisson_lock::redis::AsyncCommands;
    /// let mut conn = client.connection();
    /// let _: () = conn.set("greeting", "hello").await?;
    /// # Ok(()) })
    /// ```
    pub fn connection(&self) -> crate::conn::Connection {
        crate::conn::Connection(self.inner.conn.clone())
    }

    /// Whether unlock notifications use sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`).
    pub fn is_sharded_pubsub(&self) -> bool {
        self.inner.publish == "SPUBLISH"
    }

    /// Diagnostics: what this client currently tracks.
    pub fn stats(&self) -> ClientStats {
        ClientStats {
            tracked_holds: self.inner.holds.len(),
            watched_holds: self.inner.holds.watched().len(),
            subscribed_channels: self.inner.pubsub.live_channels(),
            subscriber_connections: *self.inner.pubsub.connections().borrow(),
            pending_latch_deletions: self.inner.latches.pending(),
            dropped_latch_deletions: self.inner.latches.dropped(),
            batches: self.inner.conn.batch_counts().0,
            batched_operations: self.inner.conn.batch_counts().1,
            queued_operations: self.inner.conn.batch_queued(),
            node_pipelines: self.inner.conn.cluster_counts().0,
            pipelined_operations: self.inner.conn.cluster_counts().1,
            redirections: self.inner.conn.cluster_counts().2,
        }
    }

    /// Shuts this client down gracefully: it takes no new locks, stops the watchdog, ends the
    /// waits in progress, and releases every lock hold and permit-expirable semaphore permit
    /// this client (any of its clones) has, so
    /// that waiters elsewhere (other clients, Java Redisson) get the locks at once instead of
    /// after the lease. Returns what it released and what it could not.
    ///
    /// In order:
    /// 1. The client is closed: every later acquire (locks, semaphore permits, latch waits)
    ///    fails with [`LockError::ShutDown`] before anything is sent.
    /// 2. The watchdog stops: nothing is renewed any more.
    /// 3. Every waiter of this client wakes and its wait ends with [`LockError::ShutDown`] (a
    ///    fair-lock waiter leaves the queue as after a timeout).
    /// 4. Every hold is released, whatever its re-entry count, lease or owner (one script per
    ///    lock and owner, retried on connection errors like an unlock). A release that frees
    ///    the lock publishes the kind's unlock message. Guards of released holds then report
    ///    [`is_lost`](crate::LockGuard::is_lost), and their `unlock` returns
    ///    [`LockError::LeaseLost`]; dropping them does nothing more.
    ///
    /// 5. Every [`PermitExpirableSemaphore`] permit taken through this client and not released
    ///    through it is released by its id (the new count is published, waking waiters).
    ///
    /// What it does not give back: [`Semaphore`] permits (an `RSemaphore` permit has no owner:
    /// any client may release it, so the client cannot know which are its own). Shutting down
    /// twice is harmless: the second call finds nothing to release.
    ///
    /// **Dropping the last handle** (every `Client` clone, lock handle and guard) without
    /// calling this aborts the watchdog and the subscriber and sends nothing: holds still in
    /// Redis stay there until their lease runs out (the watchdog timeout for watchdog holds,
    /// since nothing renews them), and waiters elsewhere wait that long. A guard dropped while
    /// the client lives releases its hold in the background instead.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe as a whole: dropping the future leaves the client closed and the
    /// watchdog stopped, with the holds not yet released left to expire with their lease. A
    /// release already sent completes.
    ///
    /// # Errors
    ///
    /// Never fails as a whole: each hold or permit that could not be released (server
    /// unreachable after the retries) is listed in [`ShutdownReport::unreleased`] with its error.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let guard = client.get_lock("orders:46").lock().await?;
    /// // ... the service is asked to stop ...
    /// let report = client.shutdown().await;
    /// assert!(guard.is_lost());
    /// for hold in &report.unreleased {
    ///     eprintln!("{} stays held until its lease ends: {}", hold.name, hold.error);
    /// }
    /// assert!(client.get_lock("orders:43").lock().await.unwrap_err().is_shut_down());
    /// # Ok(()) })
    /// ```
    pub async fn shutdown(&self) -> ShutdownReport {
        crate::shutdown::run(&self.inner).await
    }

    /// Runs one watchdog renewal pass now instead of waiting for the next tick.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a renewal that was sent still extends the lease; nothing else changes.
    ///
    /// # Errors
    ///
    /// Never fails: renewal errors are logged and lost holds are reported to their guards.
    pub async fn renew_now(&self) {
        watchdog::renew_all(&self.inner).await;
    }
}

/// Credentials refused while connecting become [`LockError::Auth`].
fn auth_error(e: LockError) -> LockError {
    match e {
        LockError::Redis(e) if is_auth_error(&e) => LockError::Auth {
            detail: e.to_string(),
        },
        e => e,
    }
}

/// A snapshot of a client's internal bookkeeping, from [`Client::stats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// (lock, owner) pairs with holds or in-flight operations.
    pub tracked_holds: usize,
    /// Holds the watchdog renews.
    pub watched_holds: usize,
    /// Channels (unlock, semaphore, latch) with local waiters.
    pub subscribed_channels: usize,
    /// Subscriber connections opened so far (grows by one per reconnect).
    pub subscriber_connections: u64,
    /// Latch keys (semaphore receipts; lock releases write none) waiting for the batched
    /// `UNLINK` (at most `Config::latch_queue`).
    pub pending_latch_deletions: usize,
    /// Latch keys (semaphore receipts) left to expire by their PX because the deletion queue
    /// was full.
    pub dropped_latch_deletions: u64,
    /// Group-commit batches sent so far (`Config::with_batching`): script calls that carried
    /// more than one operation.
    pub batches: u64,
    /// The operations those batches carried.
    pub batched_operations: u64,
    /// Operations queued now for the next batch (group commit): sent while the connection
    /// already had its lone operations out.
    pub queued_operations: usize,
    /// On a cluster with group commit: pipelines that carried queued operations (batches and
    /// lone scripts) to one master together.
    pub node_pipelines: u64,
    /// The operations (batch scripts and lone scripts) those pipelines carried.
    pub pipelined_operations: u64,
    /// On a cluster: `MOVED` and `ASK` redirections the lock scripts followed.
    pub redirections: u64,
}
