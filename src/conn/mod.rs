//! The command connection: standalone, Redis Cluster or Sentinel behind one `ConnectionLike`,
//! with Redisson's replica synchronisation (`WAIT`) after lock writes where replicas exist.
//!
//! Callers choose: [`Conn::synced`] gives a handle that follows every script with `WAIT`
//! (acquire, release, renew, force-unlock), a plain clone sends commands as they are (reads,
//! and the trim that undoes an acquire no replica confirmed: that undo must not fail in turn
//! because the replicas still lag). A synced handle that finds no replica confirming records
//! the [`Shortfall`], which the caller turns into [`LockError::ReplicaSync`].

//!
//! `mod.rs` the handle and how a command travels; `open` connecting from the endpoints;
//! `replicas` replica sync (`WAIT`/`WAITAOF`, refusals, shortfalls); `naming` connection names;
//! `sentinel` the master found through Sentinel; `cluster_route` lock scripts routed by slot to
//! one connection per cluster master; `cluster_watch` the slot map watched for a new master
//! (failover awareness on a cluster); `batch` group commit.

use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, RedisError, RedisFuture, RedisResult, Value};

use crate::config::AofSync;
use crate::error::LockError;

mod batch;
mod cluster_route;
mod cluster_watch;
mod eviction;
mod naming;
mod open;
mod replicas;
mod sentinel;

pub(crate) use eviction::{eviction_policy, warn_if_evicting};

pub(crate) use naming::{Naming, DEFAULT_CLIENT_NAME};
pub(crate) use open::cluster_connection;
pub(crate) use replicas::Shortfall;
pub(crate) use sentinel::SentinelConn;

use batch::{Batcher, Entry};
use cluster_route::Router;
use cluster_watch::ClusterWatch;
use replicas::{is_script, Refusals, ReplicaCounts};

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
    /// The connections' name, sent again after errors that may mean a new connection.
    naming: Arc<Naming>,
    /// The slot map's watch (cluster, failover awareness on); aborted with the last handle.
    cluster_watch: Option<Arc<ClusterWatch>>,
}

#[derive(Clone)]
enum Kind {
    Single(ConnectionManager),
    Cluster(Arc<Router>),
    Sentinel(Arc<SentinelConn>),
}

impl Conn {
    /// Group-commit counters: batches sent and the operations they carried.
    pub(crate) fn batch_counts(&self) -> (u64, u64) {
        self.batch.as_ref().map_or((0, 0), |b| b.counts())
    }

    /// On a cluster: pipelines sent to one master, the commands they carried, and the
    /// redirections followed (`cluster_route`).
    pub(crate) fn cluster_counts(&self) -> (u64, u64, u64) {
        self.router().map_or((0, 0, 0), |r| r.counts())
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

    /// Notified when the connection follows a failover to a new master (Sentinel), or a slot
    /// of the cluster has a new master (failover awareness on): the watchdog's cue for an
    /// out-of-turn pass.
    pub(crate) fn topology_changed(&self) -> Option<Arc<tokio::sync::Notify>> {
        match &self.kind {
            Kind::Sentinel(s) => s.topology_changed(),
            Kind::Cluster(_) => self.cluster_watch.as_ref().map(|w| w.topology_changed()),
            Kind::Single(_) => None,
        }
    }

    /// The cluster's script router (`cluster_route`), on a cluster.
    fn router(&self) -> Option<Arc<Router>> {
        match &self.kind {
            Kind::Cluster(r) => Some(r.clone()),
            _ => None,
        }
    }

    /// Whether this is a Redis Cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster(_))
    }

    /// Sends one command without replica sync (the connection named first when due).
    async fn raw(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        self.name_if_due().await;
        let r = self.unnamed(cmd).await;
        self.naming.after(&r);
        r
    }

    /// Sends one command as it is.
    async fn unnamed(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match &mut self.kind {
            Kind::Single(c) => c.req_packed_command(cmd).await,
            Kind::Cluster(r) => r.request(cmd).await,
            Kind::Sentinel(s) => s.clone().request(cmd).await,
        }
    }

    /// Sends the connection's name when it is due (`conn/naming.rs`).
    async fn name_if_due(&mut self) {
        if self.naming.take_due() {
            let naming = self.naming.clone();
            naming.send(&mut Unnamed(self)).await;
        }
    }

    /// Sends `count` pipelined commands from `offset` (the connection named first when due).
    async fn raw_pipeline(
        &mut self,
        pipe: &redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.name_if_due().await;
        let r = match &mut self.kind {
            Kind::Single(c) => c.req_packed_commands(pipe, offset, count).await,
            Kind::Cluster(r) => r.pipeline(pipe, offset, count).await,
            Kind::Sentinel(s) => s.clone().request_pipeline(pipe, offset, count).await,
        };
        self.naming.after(&r);
        r
    }
}

/// A handle whose commands go out as they are: the naming commands themselves.
struct Unnamed<'a>(&'a mut Conn);

impl ConnectionLike for Unnamed<'_> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            // A cluster's own node connections (`cluster_route`) are named too.
            if let Kind::Cluster(r) = &self.0.kind {
                r.to_every_node(cmd).await;
            }
            self.0.unnamed(cmd).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _pipeline: &'a redis::Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async { Err(protocol_error("no pipelines while naming a connection")) })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

impl crate::scripts::Peer for Conn {
    fn server(&self) -> Option<&str> {
        self.naming.server()
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
        Box::pin(self.raw_pipeline(pipeline, offset, count))
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// A reply the connection cannot read.
fn protocol_error(what: &'static str) -> RedisError {
    RedisError::from((redis::ErrorKind::UnexpectedReturnType, what))
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
