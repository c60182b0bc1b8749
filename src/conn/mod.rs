//! The command connection: standalone, Redis Cluster or Sentinel behind one `ConnectionLike`,
//! with Redisson's replica synchronisation (`WAIT`) after lock writes where replicas exist.
//!
//! Callers choose: [`Conn::synced`] gives a handle that follows every script with `WAIT`
//! (acquire, release, renew, force-unlock), a plain clone sends commands as they are (reads,
//! and the trim that undoes an acquire no replica confirmed: that undo must not fail in turn
//! because the replicas still lag). A synced handle that finds no replica confirming records
//! the [`Shortfall`], which the caller turns into [`LockError::ReplicaSync`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{Cmd, RedisError, RedisFuture, RedisResult, Value};

use crate::config::{millis, AofSync, Config, ReplicaSync, Topology};
use crate::error::LockError;
use crate::keys::slot_of;

mod batch;
mod sentinel;

pub(crate) use sentinel::SentinelConn;

use batch::{Batcher, Entry};

/// The command connection shared by everything a client does.
#[derive(Clone)]
pub(crate) struct Conn {
    kind: Kind,
    sync: Option<Arc<ReplicaCounts>>,
    /// Whether the server refused `WAIT`/`WAITAOF`, and what the policy says about it.
    refusals: Arc<Refusals>,
    /// `WAITAOF` after synced writes.
    aof: Option<AofSync>,
    /// This handle follows scripts with `WAIT` (see [`Conn::synced`]).
    synced: bool,
    /// The last `WAIT` of this handle that no replica confirmed.
    shortfall: Option<Shortfall>,
    /// Group commit of lock scripts (`Config::with_batching`); `None` inside the batcher.
    batch: Option<Arc<Batcher>>,
}

/// A lock write that no replica confirmed within the sync timeout, or whose `WAIT`/`WAITAOF`
/// the server refused.
#[derive(Clone, Debug)]
pub(crate) struct Shortfall {
    /// Replicas connected to the master.
    pub(crate) replicas: i64,
    /// How long `WAIT` waited.
    pub(crate) timeout: Duration,
    /// The command the server refused, and its words ([`ReplicaSync::Required`]).
    pub(crate) refused: Option<(&'static str, String)>,
}

impl Shortfall {
    /// The error of the lock write on `key` that fell short.
    pub(crate) fn error(self, key: &str) -> LockError {
        match self.refused {
            Some((command, detail)) => LockError::SyncRefused { command, detail },
            None => LockError::ReplicaSync {
                key: key.to_owned(),
                replicas: self.replicas,
                timeout: self.timeout,
            },
        }
    }
}

/// The commands the server refused, shared by every handle of one client.
#[derive(Debug)]
struct Refusals {
    policy: ReplicaSync,
    wait: AtomicBool,
    aof: AtomicBool,
}

impl Refusals {
    fn flag(&self, command: &str) -> &AtomicBool {
        match command {
            "WAIT" => &self.wait,
            _ => &self.aof,
        }
    }

    fn is_refused(&self, command: &str) -> bool {
        self.flag(command).load(Ordering::Acquire)
    }

    /// The server refused `command`: under [`ReplicaSync::BestEffort`] it is not sent again, the
    /// first refusal is logged, and the caller goes on (`true`); under `Required`, `false`.
    fn refuse(&self, command: &'static str, detail: &str) -> bool {
        crate::observe::replica_sync_failed(command, "refused");
        if self.policy != ReplicaSync::BestEffort {
            return false;
        }
        if !self.flag(command).swap(true, Ordering::AcqRel) {
            tracing::warn!(
                command,
                detail,
                "the server refuses {command}: lock writes go on without it (ReplicaSync::BestEffort), no longer confirmed by it"
            );
        }
        true
    }
}

#[derive(Clone)]
enum Kind {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<SentinelConn>),
}

impl Conn {
    /// Connects according to the configured topology. The first connection fails fast.
    pub(crate) async fn connect(config: &Config) -> Result<Conn, LockError> {
        let kind = match config.topology() {
            Topology::Single { url } => {
                let client = config.redis_client(url.as_str())?;
                Kind::Single(manager(client, config).await?)
            }
            Topology::Cluster { nodes } => {
                Kind::Cluster(cluster_connection(nodes, config, None).await?)
            }
            Topology::Sentinel { .. } => {
                let resolver = config.sentinel_client()?;
                let conn = Arc::new(SentinelConn {
                    resolver: tokio::sync::Mutex::new(resolver),
                    current: parking_lot::RwLock::new(None),
                    config: config.clone(),
                    stale: AtomicBool::new(true),
                });
                conn.manager().await?;
                Kind::Sentinel(conn)
            }
        };
        let sync = config.replica_sync().map(|timeout| {
            Arc::new(ReplicaCounts {
                timeout,
                replicas: DashMap::new(),
            })
        });
        let mut conn = Conn {
            kind,
            sync,
            refusals: Arc::new(Refusals {
                policy: config.replica_sync_policy(),
                wait: AtomicBool::new(false),
                aof: AtomicBool::new(false),
            }),
            aof: config.aof_sync(),
            synced: false,
            shortfall: None,
            batch: None,
        };
        if config.batching() {
            conn.batch = Some(Batcher::new(conn.clone()));
        }
        Ok(conn)
    }

    /// Group-commit counters: batches sent and the operations they carried.
    pub(crate) fn batch_counts(&self) -> (u64, u64) {
        self.batch.as_ref().map_or((0, 0), |b| b.counts())
    }

    /// Group-commit operations queued now, waiting for a flight.
    pub(crate) fn batch_queued(&self) -> usize {
        self.batch.as_ref().map_or(0, |b| b.queued())
    }

    /// Whether scripts on this handle are followed by `WAIT`/`WAITAOF`.
    fn syncs(&self) -> bool {
        self.synced && (self.live_sync().is_some() || self.live_aof().is_some())
    }

    /// `WAIT`'s settings, unless the server refused it and the policy let us go on without.
    fn live_sync(&self) -> Option<Arc<ReplicaCounts>> {
        self.sync
            .clone()
            .filter(|_| !self.refusals.is_refused("WAIT"))
    }

    /// `WAITAOF`'s settings, unless the server refused it and the policy let us go on without.
    fn live_aof(&self) -> Option<AofSync> {
        self.aof.filter(|_| !self.refusals.is_refused("WAITAOF"))
    }

    /// The server refused `command` at connect (`Client::connect`'s probe): an error under
    /// [`ReplicaSync::Required`], a warning and no more `command` under `BestEffort`.
    pub(crate) fn refused_at_connect(
        &self,
        command: &'static str,
        detail: String,
    ) -> Result<(), LockError> {
        match self.refusals.refuse(command, &detail) {
            true => Ok(()),
            false => Err(LockError::SyncRefused { command, detail }),
        }
    }

    /// A script on this handle, its reply apart from the sync verdict (see
    /// [`synced_reply`](Self::synced_reply)); `sync`: follow it with `WAIT` if configured.
    async fn send_parts(&mut self, cmd: &Cmd, sync: bool) -> RedisResult<(Value, RedisResult<()>)> {
        match self.live_sync() {
            replicas if sync && (replicas.is_some() || self.live_aof().is_some()) => {
                self.synced_reply(cmd, replicas.as_deref()).await
            }
            _ => Ok((self.raw(cmd).await?, Ok(()))),
        }
    }

    /// Sends one command on this handle, scripts followed by `WAIT` when it syncs.
    async fn send(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self.live_sync() {
            sync if self.syncs() && is_script(cmd) => self.synced_write(cmd, sync.as_deref()).await,
            _ => self.raw(cmd).await,
        }
    }

    /// Sends a lock script through the group-commit queue.
    async fn send_batched(&mut self, batch: Arc<Batcher>, cmd: &Cmd) -> RedisResult<Value> {
        match batch.enter(cmd, self.syncs())? {
            Entry::Direct(flight) => {
                let reply = self.send(cmd).await;
                drop(flight);
                reply
            }
            Entry::Queued(reply) => match reply.await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err((e, shortfall))) => {
                    if shortfall.is_some() {
                        self.shortfall = shortfall;
                    }
                    Err(e)
                }
                Err(_) => Err(RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "the batch carrying this script was dropped (runtime shutting down)",
                ))),
            },
        }
    }

    /// A handle on the same connection whose scripts are followed by `WAIT` (when replica
    /// sync is configured), as Redisson does for lock writes outside single-server mode.
    pub(crate) fn synced(&self) -> Conn {
        Conn {
            synced: true,
            shortfall: None,
            ..self.clone()
        }
    }

    /// The shortfall of the last synced write that failed for want of replicas, if any.
    pub(crate) fn take_shortfall(&mut self) -> Option<Shortfall> {
        self.shortfall.take()
    }

    /// The sentinel resolver, for the subscriber connection to follow failovers too.
    pub(crate) fn sentinel(&self) -> Option<Arc<SentinelConn>> {
        match &self.kind {
            Kind::Sentinel(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// Whether this is a Redis Cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster(_))
    }

    /// Sends one command without replica sync.
    async fn raw(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match &mut self.kind {
            Kind::Single(c) => c.req_packed_command(cmd).await,
            Kind::Cluster(c) => c.req_packed_command(cmd).await,
            Kind::Sentinel(s) => s.clone().request(cmd).await,
        }
    }

    async fn raw_pipeline(
        &mut self,
        pipe: &redis::Pipeline,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match &mut self.kind {
            Kind::Single(c) => c.req_packed_commands(pipe, 0, count).await,
            Kind::Cluster(c) => c.req_packed_commands(pipe, 0, count).await,
            Kind::Sentinel(s) => s.clone().request_pipeline(pipe, count).await,
        }
    }

    /// Runs a lock script followed by `WAIT <replicas> <timeout>` on the same node, as Redisson
    /// does outside single-server mode, and fails when replicas exist but none confirmed.
    async fn synced_write(
        &mut self,
        cmd: &Cmd,
        sync: Option<&ReplicaCounts>,
    ) -> RedisResult<Value> {
        let (reply, verdict) = self.synced_reply(cmd, sync).await?;
        verdict.map(|()| reply)
    }

    /// [`synced_write`](Self::synced_write) with the script's reply kept apart from the sync
    /// verdict (a shortfall is recorded on this handle and returned as the verdict's error): a
    /// batch hands the reply to the operations that did not ask for sync.
    async fn synced_reply(
        &mut self,
        cmd: &Cmd,
        sync: Option<&ReplicaCounts>,
    ) -> RedisResult<(Value, RedisResult<()>)> {
        let slot = script_slot(cmd);
        let aof_sync = self.live_aof();
        let replicas = match sync {
            None => 0,
            Some(sync) => match sync.replicas.get(&slot).map(|r| *r) {
                Some((n, read)) if read.elapsed() < REPLICA_REFRESH => n,
                _ => {
                    let n = self.connected_replicas(slot).await?;
                    sync.replicas.insert(slot, (n, Instant::now()));
                    n
                }
            },
        };
        let wait = sync.filter(|_| replicas > 0);
        if wait.is_none() && aof_sync.is_none() {
            return Ok((self.raw(cmd).await?, Ok(())));
        }
        let mut pipe = redis::pipe();
        pipe.add_command(cmd.clone());
        if let Some(sync) = wait {
            pipe.cmd("WAIT").arg(replicas).arg(millis(sync.timeout));
        }
        if let Some(aof) = aof_sync {
            pipe.cmd("WAITAOF")
                .arg(u8::from(aof.local))
                .arg(aof.replicas)
                .arg(millis(aof.timeout));
        }
        let count = 1 + usize::from(wait.is_some()) + usize::from(aof_sync.is_some());
        let replies = self.raw_pipeline(&pipe, count).await;
        if let (Err(_), Some(sync)) = (&replies, sync) {
            // The node may have changed (failover): re-read its replica count next time.
            sync.replicas.remove(&slot);
        }
        let mut replies = replies?.into_iter();
        let reply = match replies.next() {
            Some(Value::ServerError(e)) => return Err(e.into()),
            Some(v) => v,
            None => return Err(protocol_error("empty reply to a lock script")),
        };
        if let Some(sync) = wait {
            let acked = match replies.next() {
                Some(Value::Int(n)) => n,
                // Refused (a proxy, an ACL): not "no replica confirmed".
                Some(Value::ServerError(e)) => {
                    let detail = RedisError::from(e).to_string();
                    if !self.refusals.refuse("WAIT", &detail) {
                        return Ok((reply, Err(self.refused("WAIT", detail))));
                    }
                    replicas
                }
                _ => 0,
            };
            if acked != replicas {
                // The topology changed: re-read the replica count next time (Redisson too).
                sync.replicas.remove(&slot);
            }
            if acked == 0 {
                crate::observe::replica_sync_failed("WAIT", "unconfirmed");
                return Ok((
                    reply,
                    Err(self.short(replicas, sync.timeout, "replicas confirmed")),
                ));
            }
        }
        if let Some(aof) = aof_sync {
            let (local, remote) = match replies.next() {
                Some(Value::Array(v)) => match v.as_slice() {
                    [Value::Int(l), Value::Int(r)] => (*l, *r),
                    _ => (0, 0),
                },
                Some(Value::ServerError(e)) => {
                    let detail = RedisError::from(e).to_string();
                    if !self.refusals.refuse("WAITAOF", &detail) {
                        return Ok((reply, Err(self.refused("WAITAOF", detail))));
                    }
                    return Ok((reply, Ok(())));
                }
                _ => (0, 0),
            };
            if local < i64::from(aof.local) || remote < i64::from(aof.replicas) {
                crate::observe::replica_sync_failed("WAITAOF", "unconfirmed");
                let short =
                    self.short(i64::from(aof.replicas), aof.timeout, "AOF fsyncs confirmed");
                return Ok((reply, Err(short)));
            }
        }
        Ok((reply, Ok(())))
    }

    /// Records a write no replica (or fsync) confirmed: the outcome counts as unknown (it may
    /// not survive a failover or crash), callers undo it like a lost reply and report
    /// `LockError::ReplicaSync`.
    fn short(&mut self, replicas: i64, timeout: Duration, what: &str) -> RedisError {
        self.shortfall = Some(Shortfall {
            replicas,
            timeout,
            refused: None,
        });
        RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("not enough {what} for the lock write within {timeout:?}"),
        ))
    }

    /// Records a write whose `command` the server refused under [`ReplicaSync::Required`]: its
    /// outcome counts as unconfirmed, as after a shortfall (an acquire is undone), and callers
    /// report [`LockError::SyncRefused`].
    fn refused(&mut self, command: &'static str, detail: String) -> RedisError {
        let message = format!("the server refused {command} after the lock write: {detail}");
        self.shortfall = Some(Shortfall {
            replicas: 0,
            timeout: Duration::ZERO,
            refused: Some((command, detail)),
        });
        RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, message))
    }

    /// `connected_slaves` of the master serving `slot` (`INFO replication`).
    async fn connected_replicas(&mut self, slot: Slot) -> RedisResult<i64> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("replication");
        let info = match &mut self.kind {
            Kind::Cluster(c) => {
                let route = Route::with_slot(slot, SlotAddr::Master);
                c.route_command(
                    cmd,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await?
            }
            _ => self.raw(&cmd).await?,
        };
        let text: String = redis::from_redis_value(info)?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            match self.batch.clone() {
                Some(batch) if Batcher::carries(cmd) => self.send_batched(batch, cmd).await,
                _ => self.send(cmd).await,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            match &mut self.kind {
                Kind::Single(c) => c.req_packed_commands(pipeline, offset, count).await,
                Kind::Cluster(c) => c.req_packed_commands(pipeline, offset, count).await,
                Kind::Sentinel(s) => {
                    let mut conn = s.manager().await?;
                    let r = conn.req_packed_commands(pipeline, offset, count).await;
                    s.observe(r.as_ref().map(Vec::as_slice));
                    r
                }
            }
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// How long a replica count read from `INFO replication` is used before it is read again. A
/// replica that goes away shows at once (the `WAIT` that it does not confirm disagrees with the
/// count, which is then read again), but one that is added shows in no reply: a count of 0
/// sends no `WAIT` at all, and a `WAIT` for fewer replicas than there are returns as soon as
/// those confirmed. So the count is read again at least this often, as Redisson rescans its
/// topology (`scanInterval`, 1 s): from then on lock writes wait for the new replica too.
const REPLICA_REFRESH: Duration = Duration::from_secs(2);

/// Replica counts per hash slot's master, each with when it was read: read again when older
/// than [`REPLICA_REFRESH`], or at once when `WAIT` disagrees with it or fails.
struct ReplicaCounts {
    timeout: Duration,
    replicas: DashMap<Slot, (i64, Instant)>,
}

/// Only scripts are followed by `WAIT` on a synced handle: the `SCRIPT LOAD` that redis-rs
/// sends after a `NOSCRIPT` writes nothing and has no key to find the master by.
fn is_script(cmd: &Cmd) -> bool {
    matches!(
        cmd.args_iter().next(),
        Some(redis::Arg::Simple(name)) if name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL")
    )
}

/// The hash slot of a script's first key (`EVALSHA sha numkeys key ...`); 0 without keys.
fn script_slot(cmd: &Cmd) -> Slot {
    match cmd.args_iter().nth(3) {
        Some(redis::Arg::Simple(key)) => slot_of(key),
        _ => slot_of(b""),
    }
}

/// A script followed by `WAIT` may take the replica sync timeout on top of the reply timeout.
fn reply_timeout(config: &Config) -> Duration {
    config.response_timeout() + config.replica_sync().unwrap_or(Duration::ZERO)
}

fn protocol_error(what: &'static str) -> RedisError {
    RedisError::from((redis::ErrorKind::UnexpectedReturnType, what))
}

async fn manager(client: redis::Client, config: &Config) -> Result<ConnectionManager, LockError> {
    let manager_config = ConnectionManagerConfig::new()
        .set_response_timeout(Some(reply_timeout(config)))
        .set_connection_timeout(Some(config.connection_timeout()))
        .set_number_of_retries(config.retry_attempts() as usize)
        .set_min_delay(config.retry_delay())
        .set_max_delay(crate::config::MAX_RETRY_DELAY);
    // The first connection fails fast: one connection timeout at most, no retries.
    let first = tokio::time::timeout(
        config.connection_timeout(),
        client.get_multiplexed_async_connection(),
    )
    .await
    .map_err(|_| LockError::Timeout {
        what: "connecting to Redis",
        waited: config.connection_timeout(),
    })??;
    drop(first);
    Ok(ConnectionManager::new_with_config(client, manager_config).await?)
}

/// A cluster connection. `push`: where RESP3 pushes go (the subscriber's connection).
///
/// Commands are never retried by redis-rs (`retries(0)`): a retried acquire script could count
/// a re-entry twice. Redirections (`MOVED`/`ASK`) reach the lock code, which retries them itself
/// because a redirected command did not run.
pub(crate) async fn cluster_connection(
    nodes: &[String],
    config: &Config,
    push: Option<tokio::sync::mpsc::UnboundedSender<redis::PushInfo>>,
) -> Result<ClusterConnection, LockError> {
    let mut builder = config
        .cluster_client_builder(nodes)?
        .response_timeout(reply_timeout(config))
        .retries(0);
    if let Some(tx) = push {
        builder = builder
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(tx);
    }
    let client = builder.build()?;
    let conn = tokio::time::timeout(config.connection_timeout(), client.get_async_connection())
        .await
        .map_err(|_| LockError::Timeout {
            what: "connecting to the Redis cluster",
            waited: config.connection_timeout(),
        })??;
    Ok(conn)
}

/// The client's command connection, for your own commands next to the locks
/// ([`Client::connection`](crate::Client::connection)). It follows the client's topology
/// (standalone, cluster or sentinel); scripts sent through it get the client's replica sync.
#[derive(Clone)]
pub struct Connection(pub(crate) Conn);

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        0
    }
}
