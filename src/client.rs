//! The client: connections, the client id, subscriptions and the watchdog.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::{Config, ShardedPubSub, Topology};
use crate::conn::Conn;
use crate::error::{LockError, Result};
use crate::holds::Holds;
use crate::lock::Lock;
use crate::pubsub::{PubSub, Source};
use crate::raw::{Fair, Fenced, Reentrant};
use crate::rwlock::ReadWriteLock;
use crate::watchdog;

/// A connection to one Redis deployment, and the factory of its locks.
///
/// A `Client` is cheap to clone (it is an `Arc`); clones share the connection, the client id,
/// the subscriber connection and the watchdog. Create one per process and keep it.
///
/// # Behavior
///
/// * **Identity.** Each client has a random UUID, the `<uuid>` of every hash field it writes, as
///   each Java `RedissonClient` does. Two clients in one process are two different owners.
/// * **Connections.** One multiplexed command connection (reconnected automatically by redis-rs'
///   `ConnectionManager`) and, once the first waiter parks, one subscriber connection shared by
///   every unlock channel.
/// * **Disconnect.** A command in flight fails with a connection error. Acquire scripts are never
///   retried blindly: an acquire whose outcome is unknown is trimmed back before the next
///   operation on that lock. Unlocks are retried with one request id, so the unlock latch makes
///   the retry idempotent. The subscriber reconnects on its own, resubscribes and wakes every
///   waiter.
/// * **`NOSCRIPT`** (after `SCRIPT FLUSH` or a restart): the script is loaded and run again.
/// * **Lost lease.** The watchdog reports holds it finds gone to their guards
///   ([`LockGuard::is_lost`](crate::LockGuard::is_lost)).
/// * **Dropping the client** stops the watchdog and the subscriber; locks still held then expire
///   after their lease.
///
/// # Examples
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), redisson_lock::LockError> {
/// let client = redisson_lock::Client::connect("redis://127.0.0.1/").await?;
/// let lock = client.get_lock("orders:42");
/// let guard = lock.lock().await?;
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    pub(crate) id: Arc<str>,
    pub(crate) config: Config,
    pub(crate) conn: Conn,
    /// `PUBLISH`, or `SPUBLISH` with sharded pub/sub on a cluster.
    pub(crate) publish: &'static str,
    pub(crate) pubsub: PubSub,
    pub(crate) holds: Holds,
    pub(crate) watchdog_wake: Arc<Notify>,
    /// Unlock latches to delete in batches.
    pub(crate) latches: crate::latches::Latches,
    watchdog: tokio::task::JoinHandle<()>,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.watchdog.abort();
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("url", &redact(self.inner.config.url()))
            .finish_non_exhaustive()
    }
}

fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_owned(),
    }
}

impl Client {
    /// Connects to `url` with the default [`Config`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the half-made connection.
    ///
    /// # Errors
    ///
    /// [`LockError::Redis`] when the URL is invalid or the server cannot be reached within the
    /// connection timeout.
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
    /// [`LockError::Redis`] when the URL is invalid or the server cannot be reached.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), redisson_lock::LockError> {
    /// use std::time::Duration;
    /// use redisson_lock::{Client, Config};
    /// let config = Config::new("redis://127.0.0.1/").with_watchdog_timeout(Duration::from_secs(10));
    /// let client = Client::with_config(config).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_config(config: Config) -> Result<Client> {
        config.validate()?;
        let mut conn = Conn::connect(&config).await?;
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
            Topology::Single { url } => Source::Fixed(redis::Client::open(url.as_str())?),
            Topology::Cluster { nodes } => Source::Cluster {
                nodes: nodes.clone(),
                sharded,
            },
            Topology::Sentinel { .. } => match conn.sentinel() {
                Some(s) => Source::Sentinel(s),
                None => {
                    return Err(LockError::InvalidArgument(
                        "sentinel topology without a sentinel connection",
                    ))
                }
            },
        };
        let pubsub = PubSub::start(source, &config);
        let wake = Arc::new(Notify::new());
        let latches = crate::latches::Latches::start(conn.clone());
        let inner = Arc::new_cyclic(|weak| ClientInner {
            id: uuid::Uuid::new_v4().to_string().into(),
            latches,
            conn,
            publish: if sharded { "SPUBLISH" } else { "PUBLISH" },
            pubsub,
            holds: Holds::default(),
            watchdog_wake: wake.clone(),
            watchdog: tokio::spawn(watchdog::run(weak.clone(), wake.clone())),
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
    /// ```no_run
    /// # async fn f(client: redisson_lock::Client) -> Result<(), redisson_lock::LockError> {
    /// let lock = client.get_lock("{user1}:lock");
    /// assert_eq!(lock.name(), "{user1}:lock");
    /// # Ok(()) }
    /// ```
    pub fn get_lock(&self, name: impl Into<String>) -> Lock<Reentrant> {
        Lock::new(self.clone(), name.into(), Reentrant)
    }

    /// The fair lock called `name` (Redisson's `getFairLock`): granted in arrival order.
    ///
    /// ```no_run
    /// # async fn f(client: redisson_lock::Client) -> Result<(), redisson_lock::LockError> {
    /// let guard = client.get_fair_lock("printer").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn get_fair_lock(&self, name: impl Into<String>) -> Lock<Fair> {
        Lock::new(self.clone(), name.into(), Fair)
    }

    /// The read-write lock called `name` (Redisson's `getReadWriteLock`).
    ///
    /// ```no_run
    /// # async fn f(client: redisson_lock::Client) -> Result<(), redisson_lock::LockError> {
    /// let rw = client.get_read_write_lock("catalog");
    /// let guard = rw.read_lock().lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self.clone(), name.into())
    }

    /// The fenced lock called `name` (Redisson's `getFencedLock`): every acquisition carries a
    /// strictly increasing token ([`LockGuard::token`](crate::LockGuard::token)).
    ///
    /// ```no_run
    /// # async fn f(client: redisson_lock::Client) -> Result<(), redisson_lock::LockError> {
    /// let guard = client.get_fenced_lock("ledger").lock().await?;
    /// println!("token {}", guard.token());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn get_fenced_lock(&self, name: impl Into<String>) -> Lock<Fenced> {
        Lock::new(self.clone(), name.into(), Fenced)
    }

    /// This client's id: the `<uuid>` in every hash field it writes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A clone of the command connection, for your own commands next to the locks.
    ///
    /// ```no_run
    /// # async fn f(client: redisson_lock::Client) -> redis::RedisResult<()> {
    /// use redis::AsyncCommands;
    /// let mut conn = client.connection();
    /// let _: () = conn.set("greeting", "hello").await?;
    /// # Ok(()) }
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
        }
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

/// A snapshot of a client's internal bookkeeping, from [`Client::stats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// (lock, owner) pairs with holds or in-flight operations.
    pub tracked_holds: usize,
    /// Holds the watchdog renews.
    pub watched_holds: usize,
    /// Unlock channels with local waiters.
    pub subscribed_channels: usize,
    /// Subscriber connections opened so far (grows by one per reconnect).
    pub subscriber_connections: u64,
}
