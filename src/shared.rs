//! The client's shared state: what every lock of one client uses (the command connection, the
//! client id, the holds, the subscriber, the latch reaper, the watchdog's wake-up). It sits
//! below the locks: locks, guards and the watchdog reach it through the narrow accessors here;
//! connecting and the lock factories are in `client.rs`.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::Config;
use crate::conn::Conn;
use crate::holds::Holds;
use crate::latches::Latches;
use crate::pubsub::PubSub;

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
///   operation on that lock. A release writes no unlock latch: one whose outcome is unknown is
///   retried as a trim to the hold count the client knows must remain, so a retry never
///   releases twice. The subscriber reconnects on its own, resubscribes and wakes every waiter.
/// * **`NOSCRIPT`** (after `SCRIPT FLUSH` or a restart): the script is loaded and run again.
/// * **Lost lease.** The watchdog reports holds it finds gone to their guards
///   ([`LockGuard::is_lost`](crate::LockGuard::is_lost)).
/// * **Shutting down** ([`Client::shutdown`]) releases every hold of this client at once and
///   reports what it could not release; waiters elsewhere get the locks without waiting for a
///   lease.
/// * **Dropping the last handle** (clients, lock handles, guards) stops the watchdog and the
///   subscriber and sends nothing: locks still held then expire after their lease (watchdog
///   holds after the watchdog timeout), and waiters elsewhere wait that long. Call
///   [`Client::shutdown`] first to release them.
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|_| async move {
/// let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".to_owned());
/// let client = redisson_lock::Client::connect(&url).await?;
/// let lock = client.get_lock("orders:50");
/// let guard = lock.lock().await?;
/// // ... critical section ...
/// guard.unlock().await?;
/// # Ok(()) })
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
    /// Latches to delete in batches (semaphore receipts; releases write none).
    pub(crate) latches: Latches,
    pub(crate) watchdog: tokio::task::JoinHandle<()>,
    /// Set by [`Client::shutdown`]: no new acquisitions.
    pub(crate) closed: std::sync::atomic::AtomicBool,
    /// Permit-expirable semaphore permits taken through this client and not released through
    /// it, by id: what [`Client::shutdown`] gives back.
    pub(crate) permits: dashmap::DashMap<[u8; 16], HeldPermit>,
    /// The runtime the client was connected on: background work (a dropped guard's release)
    /// started where no runtime is current runs there.
    pub(crate) runtime: tokio::runtime::Handle,
}

/// A permit of a permit-expirable semaphore this client took (see `ClientInner::permits`).
#[derive(Clone, Debug)]
pub(crate) struct HeldPermit {
    /// The semaphore's name, its `{<name>}:timeout` set and its channel.
    pub(crate) name: String,
    pub(crate) timeouts: String,
    pub(crate) channel: String,
    /// The id as Java shows it (32 hex characters).
    pub(crate) hex: String,
    /// The lease end in epoch milliseconds, as the scripts keep it (`NON_EXPIRABLE`: none).
    pub(crate) expiry_ms: u64,
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
            .field("url", &crate::config::redact(self.inner.config.url()))
            .finish_non_exhaustive()
    }
}

impl Client {
    /// This client's id: the `<uuid>` in every hash field it writes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A handle on the command connection (cheap: it is shared), without replica sync.
    pub(crate) fn conn(&self) -> Conn {
        self.inner.conn.clone()
    }

    /// A handle whose scripts are followed by `WAIT` when replica sync is on (lock writes).
    pub(crate) fn conn_synced(&self) -> Conn {
        self.inner.conn.synced()
    }

    /// Whether this client talks to a Redis Cluster (checked without cloning the connection).
    pub(crate) fn is_cluster(&self) -> bool {
        self.inner.conn.is_cluster()
    }

    /// This client's holds, per (lock key, owner).
    pub(crate) fn registry(&self) -> &Holds {
        &self.inner.holds
    }

    /// The shared subscriber.
    pub(crate) fn pubsub(&self) -> &PubSub {
        &self.inner.pubsub
    }

    /// `PUBLISH`, or `SPUBLISH` with sharded pub/sub on a cluster.
    pub(crate) fn publish_command(&self) -> &'static str {
        self.inner.publish
    }

    /// Hands a latch key (a semaphore receipt) to the batched reaper.
    pub(crate) fn delete_latch(&self, latch: String) {
        self.inner.latches.delete(latch);
    }

    /// [`LockError::ShutDown`] once [`Client::shutdown`] has begun.
    pub(crate) fn check_open(&self) -> crate::error::Result<()> {
        match self.is_shut_down() {
            true => Err(crate::error::LockError::ShutDown),
            false => Ok(()),
        }
    }

    /// Whether [`Client::shutdown`] has begun (on this client or any of its clones).
    pub fn is_shut_down(&self) -> bool {
        self.inner.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records a permit taken through this client. Returns `false` when the client was shut
    /// down meanwhile: the caller gives it back (the shutdown may have missed it).
    pub(crate) fn permit_taken(&self, id: [u8; 16], permit: HeldPermit) -> bool {
        let permits = &self.inner.permits;
        if permits.len() % 64 == 63 {
            // Permits whose lease ended are back in the pool: nothing to give back.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            permits.retain(|_, p| p.expiry_ms >= now);
        }
        permits.insert(id, permit);
        // Pairs with the shutdown's store of `closed` before it reads the permits.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        if self.is_shut_down() {
            permits.remove(&id);
            return false;
        }
        true
    }

    /// A permit released through this client (or found gone) is no longer this client's.
    pub(crate) fn permit_gone(&self, id: &[u8; 16]) {
        self.inner.permits.remove(id);
    }

    /// A permit's lease was moved.
    pub(crate) fn permit_lease(&self, id: &[u8; 16], expiry_ms: u64) {
        if let Some(mut p) = self.inner.permits.get_mut(id) {
            p.expiry_ms = expiry_ms;
        }
    }

    /// The server's `maxmemory-policy` when it may evict keys (`maxmemory` set, a policy other
    /// than `noeviction`), `None` when it may not. An evicted lock key is a lock lost for every
    /// client, Java's included, and nothing tells anyone: run lock servers with `noeviction`
    /// (docs/production.md, "Eviction"). The client also warns once at connect. On a cluster
    /// one node is asked.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// The server's refusal of `CONFIG GET` (an ACL, a managed offering); connection errors.
    pub async fn eviction_risk(&self) -> crate::error::Result<Option<String>> {
        Ok(crate::conn::eviction_policy(&mut self.conn()).await?)
    }

    /// Runs `task` in the background: on the current tokio runtime, else on the one the client
    /// was connected on (a guard dropped on a plain thread). A runtime that has shut down drops
    /// `task` unrun (its `Drop` says what then).
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(task)),
            Err(_) => drop(self.inner.runtime.spawn(task)),
        }
    }

    /// Tells the watchdog that a watchdog hold exists (it idles while there is none).
    pub(crate) fn wake_watchdog(&self) {
        self.inner.watchdog_wake.notify_one();
    }
}
