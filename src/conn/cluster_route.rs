//! Lock scripts on a Redis Cluster routed by this crate: each script goes by its first key's
//! hash slot straight to the connection of the master serving that slot, one multiplexed
//! connection per master (a connection manager each, as in standalone mode), so a script costs
//! the client what it costs on one server. redis-rs's cluster connection stays for everything
//! else (keyless and multi-node commands, pipelines, pub/sub, the slot map's reads) and is the
//! fallback whenever this map does not know a slot or a node cannot be reached.
//!
//! The connection hands each script over with its slot, known since its call was built
//! (`scripts::Call`): nothing here reads a command's bytes. The slot map (`cluster_route/map.rs`,
//! the crate's one reader of `CLUSTER SLOTS`) is read at connect, again after a redirection or
//! a connection error, and on every poll of `cluster_watch` ([`Router::read_slots`]). A `MOVED`
//! reply means the script did not run: the slot is pointed at the node named in it and the
//! script is sent there. An `ASK` reply (a slot being migrated, the key already gone) sends it
//! again to the named node after `ASKING`. Both at most [`REDIRECTS`] times in all. A connection
//! error is returned as it is (the outcome is unknown: the lock code settles it) and the map is
//! read again.
//!
//! Group commit sends the operations for one master together ([`Router::send_by_node`]): one
//! pipeline per master, whatever their slots.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use super::naming::Naming;
use crate::endpoints::Endpoints;

mod map;
pub(crate) use map::{parse_slots, Range};
use map::{slots_cmd, Node, SlotMap};

/// `MOVED` replies one script follows before it is handed to redis-rs's cluster connection.
const REDIRECTS: usize = 3;

/// The router of one cluster client's scripts.
pub(crate) struct Router {
    map: SlotMap,
    endpoints: Endpoints,
    config: ConnectionManagerConfig,
    /// The longest a node's reply is awaited (a dead node's manager waits for its reconnects).
    reply_timeout: Duration,
    fallback: ClusterConnection,
    naming: Arc<Naming>,
    /// A map read is under way (or queued): at most one at a time.
    refreshing: AtomicBool,
    /// Pipelines sent by [`Router::send_by_node`], and the commands they carried.
    pipelines: AtomicU64,
    piped: AtomicU64,
    /// Redirections followed (`MOVED` and `ASK`).
    redirects: AtomicU64,
}

/// A server error in a reply's place, as the error.
fn lift(reply: RedisResult<Value>) -> RedisResult<Value> {
    match reply {
        Ok(Value::ServerError(e)) => Err(e.into()),
        r => r,
    }
}

/// An error after which the slot map is read again: anything but a server's reply (a broken
/// or refused connection, a timeout: the node may be gone), and `CLUSTERDOWN`/`TRYAGAIN`.
fn map_suspect(e: &RedisError) -> bool {
    !matches!(e.kind(), ErrorKind::Server(_))
        || is_kind(e, ServerErrorKind::ClusterDown)
        || is_kind(e, ServerErrorKind::TryAgain)
}

fn is_kind(e: &RedisError, kind: ServerErrorKind) -> bool {
    e.kind() == ErrorKind::Server(kind)
}

/// `host:port` of a redirection, split (an IPv6 host keeps its colons).
fn split_addr(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?))
}

impl Router {
    /// A router over `fallback` (whose slot map it reads at once); node connections open at
    /// first use with `config`, named by `naming`.
    pub(crate) async fn new(
        endpoints: &Endpoints,
        fallback: ClusterConnection,
        config: ConnectionManagerConfig,
        reply_timeout: Duration,
        naming: Arc<Naming>,
    ) -> Router {
        let router = Router {
            map: SlotMap::new(),
            endpoints: endpoints.clone(),
            config,
            reply_timeout,
            fallback,
            naming,
            refreshing: AtomicBool::new(false),
            pipelines: AtomicU64::new(0),
            piped: AtomicU64::new(0),
            redirects: AtomicU64::new(0),
        };
        router.read_map().await;
        router
    }

    /// Pipelines sent to masters, the commands they carried, and redirections followed.
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (
            self.pipelines.load(Ordering::Relaxed),
            self.piped.load(Ordering::Relaxed),
            self.redirects.load(Ordering::Relaxed),
        )
    }

    /// redis-rs's cluster connection, for what this router does not route.
    pub(crate) fn fallback(&self) -> ClusterConnection {
        self.fallback.clone()
    }

    /// Reads the slot map (`CLUSTER SLOTS`) from the first master connected here that answers,
    /// else through redis-rs's connection (any node), and installs it.
    async fn read_map(&self) {
        let nodes = self.map.nodes();
        for node in nodes {
            let Some(conn) = node.conn.get() else {
                continue;
            };
            if let Ok(reply) = self
                .timed(conn.clone().req_packed_command(&slots_cmd()))
                .await
            {
                if self.map.install(&parse_slots(&reply)) {
                    return;
                }
            }
        }
        self.read_slots(self.reply_timeout).await;
    }

    /// `CLUSTER SLOTS` from any node through redis-rs's connection, within `timeout`, installed
    /// (`cluster_watch` polls by it); its ranges, `None` on an error or an empty map (a node
    /// that lost its view of the cluster).
    pub(crate) async fn read_slots(&self, timeout: Duration) -> Option<Vec<Range>> {
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let mut conn = self.fallback.clone();
        let read = conn.route_command(slots_cmd(), route);
        let ranges = parse_slots(&tokio::time::timeout(timeout, read).await.ok()?.ok()?);
        self.map.install(&ranges);
        (!ranges.is_empty()).then_some(ranges)
    }

    /// Reads the map again in the background (one read at a time).
    fn stale(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            this.read_map().await;
            this.refreshing.store(false, Ordering::Release);
        });
    }

    /// The connection to `node`, opened (and named) at first use.
    async fn conn(&self, node: &Node) -> RedisResult<ConnectionManager> {
        node.conn
            .get_or_try_init(|| async {
                let client = self
                    .endpoints
                    .cluster_node_client(&node.host, node.port)
                    .map_err(|e| {
                        RedisError::from(std::io::Error::new(
                            std::io::ErrorKind::ConnectionRefused,
                            e.to_string(),
                        ))
                    })?;
                let mut conn = self
                    .timed(ConnectionManager::new_with_config(
                        client,
                        self.config.clone(),
                    ))
                    .await?;
                self.naming.send(&mut conn).await;
                Ok(conn)
            })
            .await
            .cloned()
    }

    /// `fut` (a node's reply), at most the reply timeout.
    async fn timed<T>(
        &self,
        fut: impl std::future::Future<Output = RedisResult<T>>,
    ) -> RedisResult<T> {
        match tokio::time::timeout(self.reply_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no reply from the cluster node in time",
            ))),
        }
    }

    /// A keyless command (`INFO replication`) to the master serving `slot` as this router
    /// knows it (redis-rs's own map may lag after a failover); redis-rs routes it when the
    /// slot's master is unknown here.
    pub(crate) async fn on_master(self: &Arc<Self>, slot: u16, cmd: &Cmd) -> RedisResult<Value> {
        let Some(node) = self.map.node(slot) else {
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                slot,
                SlotAddr::Master,
            )));
            return self
                .fallback
                .clone()
                .route_command(cmd.clone(), route)
                .await;
        };
        let reply = match self.conn(&node).await {
            Ok(mut conn) => lift(self.timed(conn.req_packed_command(cmd)).await),
            Err(e) => Err(e),
        };
        if matches!(&reply, Err(e) if map_suspect(e)) {
            self.stale();
        }
        reply
    }

    /// A command that is not a script (a read, a user's own) through redis-rs's connection,
    /// whose redirections this router follows (redis-rs retries nothing here, `open.rs`): a
    /// redirected command did not run, and a read after a failover or a reshard must not fail
    /// for it while redis-rs's own map catches up.
    pub(crate) async fn send_any(self: &Arc<Self>, cmd: &Cmd) -> RedisResult<Value> {
        let reply = self.fallback.clone().req_packed_command(cmd).await;
        let Err(e) = &reply else { return reply };
        let Some((slot, (host, port))) = e
            .redirect_node()
            .and_then(|(a, slot)| Some((slot, split_addr(a)?)))
        else {
            return reply;
        };
        self.redirects.fetch_add(1, Ordering::Relaxed);
        let asking = if is_kind(e, ServerErrorKind::Ask) {
            Some(self.map.node_at(&host, port))
        } else {
            self.map.point(slot, &host, port);
            self.stale();
            None
        };
        match self.to_slot_from(slot, Load::One(cmd), asking).await {
            Some(r) => lift(r.and_then(|mut replies| {
                replies
                    .pop()
                    .ok_or_else(|| super::protocol_error("a node's reply is missing"))
            })),
            None => reply,
        }
    }

    /// A script to the master of `slot`, following `MOVED` and `ASK`.
    pub(crate) async fn send_to_slot(self: &Arc<Self>, slot: u16, cmd: &Cmd) -> RedisResult<Value> {
        match self.to_slot(slot, Load::One(cmd)).await {
            Some(r) => lift(r.and_then(|mut replies| {
                replies
                    .pop()
                    .ok_or_else(|| super::protocol_error("a node's reply is missing"))
            })),
            None => self.fallback.clone().req_packed_command(cmd).await,
        }
    }

    /// Sends a script followed by `WAIT`/`WAITAOF` (replica sync, `count` commands) by the
    /// script's slot to its master: a redirected script did not run, and the waits after it are
    /// harmless, so the whole pipeline goes again to the node named.
    pub(crate) async fn script_pipeline(
        self: &Arc<Self>,
        slot: u16,
        pipe: &redis::Pipeline,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self.to_slot(slot, Load::Piped(pipe, count)).await {
            Some(r) => r,
            None => {
                let mut fallback = self.fallback.clone();
                fallback.req_packed_commands(pipe, 0, count).await
            }
        }
    }

    /// `load` to the master of `slot`: a `MOVED` (the script did not run) points the slot
    /// anew and sends again, an `ASK` sends again to the node named after `ASKING`, a
    /// connection error makes the map stale. `None`: not sent (the slot's master unknown, not
    /// connected, or redirected [`REDIRECTS`] times), for redis-rs to find its way (or fail as
    /// it would have).
    async fn to_slot(
        self: &Arc<Self>,
        slot: u16,
        load: Load<'_>,
    ) -> Option<RedisResult<Vec<Value>>> {
        self.to_slot_from(slot, load, None).await
    }

    /// [`Router::to_slot`], first to `asking` after `ASKING` when given.
    async fn to_slot_from(
        self: &Arc<Self>,
        slot: u16,
        load: Load<'_>,
        mut asking: Option<Arc<Node>>,
    ) -> Option<RedisResult<Vec<Value>>> {
        for _ in 0..REDIRECTS {
            let ask = asking.is_some();
            let node = asking.take().or_else(|| self.map.node(slot))?;
            let Ok(mut conn) = self.conn(&node).await else {
                self.stale();
                return None;
            };
            let replies = match self.timed(load.send(&mut conn, ask)).await {
                Err(e) => {
                    if map_suspect(&e) {
                        self.stale();
                    }
                    return Some(Err(e));
                }
                Ok(r) => r,
            };
            let redirect = match replies.first() {
                Some(Value::ServerError(e)) => RedisError::from(e.clone()),
                _ => return Some(Ok(replies)),
            };
            let Some((to, (host, port))) = redirect
                .redirect_node()
                .and_then(|(a, slot)| Some((slot, split_addr(a)?)))
            else {
                return Some(Ok(replies));
            };
            self.redirects.fetch_add(1, Ordering::Relaxed);
            if is_kind(&redirect, ServerErrorKind::Ask) {
                asking = Some(self.map.node_at(&host, port));
            } else {
                self.map.point(to, &host, port);
                self.stale();
            }
        }
        None
    }

    /// Sends `cmds` (each a script with its slot) with one pipeline per master, all masters at
    /// once; the replies in `cmds`' order, each a server error as that command's own error.
    /// A command whose master is unknown, or redirected, goes again alone
    /// ([`Router::send_to_slot`]: a redirected command did not run).
    pub(crate) async fn send_by_node(
        self: &Arc<Self>,
        cmds: &[(u16, Cmd)],
    ) -> Vec<RedisResult<Value>> {
        let mut groups: Vec<(Option<Arc<Node>>, Vec<usize>)> = Vec::new();
        for (i, (slot, _)) in cmds.iter().enumerate() {
            let node = self.map.node(*slot);
            let at = groups.iter().position(|(n, _)| match (n, &node) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            });
            match at {
                Some(g) => groups[g].1.push(i),
                None => groups.push((node, vec![i])),
            }
        }
        let sends = groups.into_iter().map(|(node, at)| async move {
            let replies = match &node {
                Some(node) if at.len() > 1 => self.node_pipeline(node, cmds, &at).await,
                _ => None,
            };
            let replies = match replies {
                Some(r) => r,
                None => {
                    let mut out = Vec::with_capacity(at.len());
                    for &i in &at {
                        out.push(Some(self.send_to_slot(cmds[i].0, &cmds[i].1).await));
                    }
                    out
                }
            };
            (at, replies)
        });
        let mut out: Vec<Option<RedisResult<Value>>> = (0..cmds.len()).map(|_| None).collect();
        for (at, replies) in futures_util::future::join_all(sends).await {
            for (i, reply) in at.into_iter().zip(replies) {
                out[i] = reply;
            }
        }
        let mut done = Vec::with_capacity(out.len());
        for (i, reply) in out.into_iter().enumerate() {
            done.push(match reply {
                Some(Err(e)) if e.redirect_node().is_some() => {
                    self.send_to_slot(cmds[i].0, &cmds[i].1).await
                }
                Some(r) => r,
                None => self.send_to_slot(cmds[i].0, &cmds[i].1).await,
            });
        }
        done
    }

    /// The commands at `at` as one pipeline on `node`; `None` when it could not be sent (not
    /// connected: nothing ran).
    async fn node_pipeline(
        self: &Arc<Self>,
        node: &Node,
        cmds: &[(u16, Cmd)],
        at: &[usize],
    ) -> Option<Vec<Option<RedisResult<Value>>>> {
        let Ok(mut conn) = self.conn(node).await else {
            self.stale();
            return None;
        };
        let mut pipe = redis::pipe();
        for &i in at {
            pipe.add_command(cmds[i].1.clone());
        }
        self.pipelines.fetch_add(1, Ordering::Relaxed);
        self.piped.fetch_add(at.len() as u64, Ordering::Relaxed);
        let replies = match self
            .timed(conn.req_packed_commands(&pipe, 0, at.len()))
            .await
        {
            Ok(r) if r.len() == at.len() => r,
            Ok(_) => {
                let e = super::protocol_error("a pipeline reply of the wrong length");
                return Some(at.iter().map(|_| Some(Err(e.clone()))).collect());
            }
            Err(e) => {
                if map_suspect(&e) {
                    self.stale();
                }
                return Some(at.iter().map(|_| Some(Err(e.clone()))).collect());
            }
        };
        let mut moved = false;
        let out = replies
            .into_iter()
            .map(|v| {
                let r = lift(Ok(v));
                moved |= matches!(&r, Err(e) if e.redirect_node().is_some());
                // A redirected command is sent again alone by the caller.
                Some(r)
            })
            .collect();
        if moved {
            self.stale();
        }
        Some(out)
    }
}

/// What goes to a master: a script, or a script followed by its waits (`count` commands).
#[derive(Clone, Copy)]
enum Load<'a> {
    One(&'a Cmd),
    Piped(&'a redis::Pipeline, usize),
}

impl Load<'_> {
    /// Sent on `conn` (after `ASKING` when `asking`): every reply.
    async fn send(self, conn: &mut ConnectionManager, asking: bool) -> RedisResult<Vec<Value>> {
        if !asking {
            return match self {
                Load::One(cmd) => Ok(vec![conn.req_packed_command(cmd).await?]),
                Load::Piped(pipe, count) => conn.req_packed_commands(pipe, 0, count).await,
            };
        }
        let mut asked = redis::pipe();
        asked.cmd("ASKING");
        let count = match self {
            Load::One(cmd) => {
                asked.add_command(cmd.clone());
                1
            }
            Load::Piped(pipe, count) => {
                pipe.cmd_iter()
                    .for_each(|c| _ = asked.add_command(c.clone()));
                count
            }
        };
        conn.req_packed_commands(&asked, 1, count).await
    }
}

impl Router {
    /// Sends `cmd` (a keyless command: the connection's name) to every master connected here
    /// too; errors are ignored (a node down is named when it is connected again).
    pub(crate) async fn to_every_node(&self, cmd: &Cmd) {
        let nodes = self.map.nodes();
        let sends = nodes.iter().filter_map(|node| {
            let mut conn = node.conn.get()?.clone();
            // A dead node's manager waits for its reconnects: bounded, all nodes at once.
            Some(async move { self.timed(conn.req_packed_command(cmd)).await })
        });
        futures_util::future::join_all(sends).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirection_names_host_and_port() {
        assert_eq!(
            split_addr("127.0.0.1:7000"),
            Some(("127.0.0.1".to_owned(), 7000))
        );
        assert_eq!(split_addr("[::1]:7000"), Some(("::1".to_owned(), 7000)));
        assert_eq!(split_addr("nope"), None);
    }
}
