//! The command connection: standalone, Redis Cluster or Sentinel behind one `ConnectionLike`,
//! with Redisson's replica synchronisation (`WAIT`) after lock writes where replicas exist.
//!
//! Callers choose: [`Conn::synced`] gives a handle that follows every script with `WAIT`
//! (acquire, release, renew, force-unlock), a plain clone sends commands as they are (reads,
//! and the trim that undoes an acquire no replica confirmed: that undo must not fail in turn
//! because the replicas still lag). A synced handle that finds no replica confirming records
//! the [`Shortfall`], which the caller turns into [`LockError::ReplicaSync`].
//!
//! A lock script comes in typed ([`Peer::send_call`](crate::scripts::Peer): a `scripts::Call`
//! knows its script, keys and slot) and travels down, never back up: `mod.rs` (the handle, the
//! door) → `batch` (group commit) → `replicas` (replica sync: `WAIT`/`WAITAOF`, refusals,
//! shortfalls) → `wire` (the command on the topology's connection, named first when due by
//! `naming`) → `cluster_route` (on a cluster: by slot to one connection per master, which owns
//! the slot map) or `sentinel` (the master found through Sentinel). A command from outside the
//! typed path (a user's own, through [`Connection`]) is read once at the door
//! ([`script_slot`]). `open` connects from the endpoints; `cluster_watch` polls the router's
//! slot map for a new master (failover awareness on a cluster).

use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, RedisError, RedisFuture, RedisResult, Value};

use crate::config::AofSync;
use crate::error::LockError;
use crate::scripts::{Call, Peer};

mod batch;
mod cluster_route;
mod cluster_watch;
mod eviction;
mod naming;
mod open;
mod replicas;
mod sentinel;
mod sentinel_resolve;
mod wire;

pub(crate) use eviction::{eviction_policy, warn_if_evicting};

pub(crate) use naming::{Naming, DEFAULT_CLIENT_NAME};
pub(crate) use open::cluster_connection;
pub(crate) use replicas::Shortfall;
pub(crate) use sentinel::SentinelConn;

use batch::{Batcher, Entry};
use cluster_route::Router;
use cluster_watch::ClusterWatch;
use replicas::{Refusals, ReplicaCounts};

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

    /// Sends a script on this handle (followed by `WAIT` when it syncs); `slot`: its first
    /// key's, `None` without keys.
    async fn send_script(&mut self, cmd: &Cmd, slot: Option<u16>) -> RedisResult<Value> {
        let (reply, verdict) = self.send_parts(cmd, slot, self.synced).await?;
        verdict.map(|()| reply)
    }

    /// Sends a typed lock script: through the group-commit queue when a batch may carry it.
    async fn run(&mut self, call: &Call) -> RedisResult<Value> {
        let batched = self
            .batch
            .as_ref()
            .and_then(|b| Some((b.clone(), call.batch()?)));
        let Some((batch, index)) = batched else {
            return self.send_script(call.cmd(), call.slot()).await;
        };
        match batch.enter(call, index, self.syncs()) {
            Entry::Direct(flight) => {
                let reply = self.send_script(call.cmd(), call.slot()).await;
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
    pub(super) fn router(&self) -> Option<Arc<Router>> {
        match &self.kind {
            Kind::Cluster(r) => Some(r.clone()),
            _ => None,
        }
    }

    /// Whether this is a Redis Cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster(_))
    }
}

/// The door for commands from outside the typed path (a user's own through [`Connection`],
/// redis-rs's `SCRIPT LOAD`): `Some` for a script (`EVALSHA`/`EVAL`, followed by `WAIT` on a
/// synced handle) with its first key's slot (`None` without keys); `None` for anything else.
/// The one place that reads a command's words.
fn script_slot(cmd: &Cmd) -> Option<Option<u16>> {
    let mut args = cmd.args_iter().map(|a| match a {
        redis::Arg::Simple(v) => v,
        _ => &[],
    });
    let name = args.next()?;
    if !(name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL")) {
        return None;
    }
    let keyed = args.nth(1).is_some_and(|n| !n.is_empty() && n != b"0");
    Some(args.next().filter(|_| keyed).map(crate::keys::slot_of))
}

impl Peer for Conn {
    fn server(&self) -> Option<&str> {
        self.naming.server()
    }

    fn send_call<'a>(&'a mut self, call: &'a Call) -> RedisFuture<'a, Value> {
        Box::pin(self.run(call))
    }

    fn load<'a>(&'a mut self, call: &'a Call) -> RedisFuture<'a, ()> {
        Box::pin(self.load_script(call.script(), call.slot()))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            match script_slot(cmd) {
                Some(slot) => self.send_script(cmd, slot).await,
                None => self.raw(cmd, None).await,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.raw_pipeline(pipeline, offset, count, None))
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
