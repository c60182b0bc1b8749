//! Lock scripts on a Redis Cluster routed by this crate: each script goes by its first key's
//! hash slot straight to the connection of the master serving that slot, one multiplexed
//! connection per master (a connection manager each, as in standalone mode), so a script costs
//! the client what it costs on one server. redis-rs's cluster connection stays for everything
//! else (keyless and multi-node commands, pipelines, pub/sub, the slot map's reads) and is the
//! fallback whenever this map does not know a slot or a node cannot be reached.
//!
//! The slot map comes from `CLUSTER SLOTS` (read at connect, again after a redirection or a
//! connection error, and on every poll of `cluster_watch`). A `MOVED` reply means the script did
//! not run: the slot is pointed at the node named in it and the script is sent there (at most
//! [`REDIRECTS`] times). An `ASK` reply (a slot being migrated, the key already gone) is followed
//! once with `ASKING` and the script on the named node. A connection error is returned as it is
//! (the outcome is unknown: the lock code settles it) and the map is read again.
//!
//! Group commit sends the operations for one master together ([`Router::send_by_node`]): one
//! pipeline per master, whatever their slots.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Arg, Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};
use tokio::sync::OnceCell;

use super::naming::Naming;
use crate::endpoints::Endpoints;

/// Hash slots of a Redis Cluster.
pub(crate) const SLOTS: usize = 16384;

/// `MOVED` replies one script follows before it is handed to redis-rs's cluster connection.
const REDIRECTS: usize = 3;

/// A slot no known master serves (yet).
const NONE: u16 = u16::MAX;

/// One master: its address and its connection, opened at first use.
struct Node {
    host: String,
    port: u16,
    conn: OnceCell<ConnectionManager>,
}

/// Which master serves each slot.
struct Map {
    slots: Vec<u16>,
    nodes: Vec<Arc<Node>>,
}

/// The router of one cluster client's scripts.
pub(crate) struct Router {
    map: RwLock<Arc<Map>>,
    endpoints: Endpoints,
    config: ConnectionManagerConfig,
    /// The longest a node's reply is awaited (a dead node's manager waits for its reconnects).
    reply_timeout: std::time::Duration,
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

/// The hash slot of `key` (CRC16/XMODEM of its hash tag, or of the whole key), as a number.
pub(crate) fn slot_number(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &b in tagged {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS as u16
}

/// The slot a command is routed by here: the first key of a script call (`EVALSHA`/`EVAL`
/// with at least one key; Redis requires every key of a script in one slot). `None`: another
/// command, left to redis-rs.
pub(crate) fn script_slot(cmd: &Cmd) -> Option<u16> {
    let mut args = cmd.args_iter();
    let Some(Arg::Simple(name)) = args.next() else {
        return None;
    };
    if !(name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL")) {
        return None;
    }
    let _script = args.next()?;
    let Arg::Simple(numkeys) = args.next()? else {
        return None;
    };
    if matches!(numkeys, b"0") || numkeys.is_empty() {
        return None;
    }
    match args.next()? {
        Arg::Simple(key) => Some(slot_number(key)),
        _ => None,
    }
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

/// The masters' ranges of a `CLUSTER SLOTS` reply: `[start, end, [host, port, ...], ...]`.
/// A master without a usable address (`?` or empty) is left out: its slots go to redis-rs.
pub(crate) fn parse_masters(reply: &Value) -> Vec<(u16, u16, String, u16)> {
    let Value::Array(ranges) = reply else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|r| {
            let Value::Array(items) = r else { return None };
            let (Some(Value::Int(lo)), Some(Value::Int(hi)), Some(Value::Array(master))) =
                (items.first(), items.get(1), items.get(2))
            else {
                return None;
            };
            let host = match master.first()? {
                Value::BulkString(b) => String::from_utf8(b.clone()).ok()?,
                Value::SimpleString(s) => s.clone(),
                _ => return None,
            };
            let Some(Value::Int(port)) = master.get(1) else {
                return None;
            };
            if host.is_empty() || host == "?" {
                return None;
            }
            let (lo, hi) = (u16::try_from(*lo).ok()?, u16::try_from(*hi).ok()?);
            (lo <= hi && usize::from(hi) < SLOTS).then_some((
                lo,
                hi,
                host,
                u16::try_from(*port).ok()?,
            ))
        })
        .collect()
}

impl Router {
    /// A router over `fallback` (whose slot map it reads at once); node connections open at
    /// first use with `config`, named by `naming`.
    pub(crate) async fn new(
        endpoints: &Endpoints,
        fallback: ClusterConnection,
        config: ConnectionManagerConfig,
        reply_timeout: std::time::Duration,
        naming: Arc<Naming>,
    ) -> Router {
        let router = Router {
            map: RwLock::new(Arc::new(Map {
                slots: vec![NONE; SLOTS],
                nodes: Vec::new(),
            })),
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

    /// Installs the masters of a `CLUSTER SLOTS` reply (connections to known masters kept).
    pub(crate) fn install(&self, reply: &Value) {
        let ranges = parse_masters(reply);
        if ranges.is_empty() {
            return;
        }
        let old = self.map.read().clone();
        let mut slots = vec![NONE; SLOTS];
        let mut nodes: Vec<Arc<Node>> = Vec::new();
        let mut index: HashMap<(String, u16), u16> = HashMap::new();
        for (lo, hi, host, port) in ranges {
            let key = (host, port);
            let i = match index.get(&key) {
                Some(&i) => i,
                None => {
                    let node = old
                        .nodes
                        .iter()
                        .find(|n| n.host == key.0 && n.port == key.1)
                        .cloned()
                        .unwrap_or_else(|| Arc::new(Node::new(key.0.clone(), key.1)));
                    let i = nodes.len() as u16;
                    nodes.push(node);
                    index.insert(key, i);
                    i
                }
            };
            slots[usize::from(lo)..=usize::from(hi)].fill(i);
        }
        *self.map.write() = Arc::new(Map { slots, nodes });
    }

    /// Points one slot at `host:port` (a `MOVED` reply), until the next map read.
    fn point(&self, slot: u16, host: &str, port: u16) {
        let mut guard = self.map.write();
        let node = guard
            .nodes
            .iter()
            .find(|n| n.host == host && n.port == port)
            .cloned();
        let mut slots = guard.slots.clone();
        let mut nodes = guard.nodes.clone();
        let i = match node {
            Some(n) => nodes.iter().position(|m| Arc::ptr_eq(m, &n)).unwrap_or(0) as u16,
            None => {
                nodes.push(Arc::new(Node::new(host.to_owned(), port)));
                (nodes.len() - 1) as u16
            }
        };
        if let Some(s) = slots.get_mut(usize::from(slot)) {
            *s = i;
        }
        *guard = Arc::new(Map { slots, nodes });
    }

    /// Reads the slot map (`CLUSTER SLOTS`) from the first master connected here that answers,
    /// else through redis-rs's connection (any node), and installs it.
    async fn read_map(&self) {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let nodes = self.map.read().nodes.clone();
        for node in nodes {
            let Some(conn) = node.conn.get() else {
                continue;
            };
            if let Ok(reply) = self.timed(conn.clone().req_packed_command(&cmd)).await {
                if !parse_masters(&reply).is_empty() {
                    self.install(&reply);
                    return;
                }
            }
        }
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        if let Ok(reply) = self
            .timed(self.fallback.clone().route_command(cmd, route))
            .await
        {
            self.install(&reply);
        }
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

    /// The master serving `slot`, if known.
    fn node(&self, slot: u16) -> Option<Arc<Node>> {
        let map = self.map.read();
        let i = *map.slots.get(usize::from(slot))?;
        map.nodes.get(usize::from(i)).cloned()
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

    /// Sends one command: a script by its slot to its master (redirections followed), anything
    /// else through redis-rs's cluster connection.
    pub(crate) async fn request(self: &Arc<Self>, cmd: &Cmd) -> RedisResult<Value> {
        match script_slot(cmd) {
            Some(slot) => self.send_to_slot(slot, cmd).await,
            None => self.fallback.clone().req_packed_command(cmd).await,
        }
    }

    /// A keyless command (`INFO replication`) to the master serving `slot` as this router
    /// knows it (redis-rs's own map may lag after a failover); redis-rs routes it when the
    /// slot's master is unknown here.
    pub(crate) async fn on_master(self: &Arc<Self>, slot: u16, cmd: &Cmd) -> RedisResult<Value> {
        let Some(node) = self.node(slot) else {
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                redis::cluster_routing::Route::new(slot, redis::cluster_routing::SlotAddr::Master),
            ));
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

    /// A script to the master of `slot`, following `MOVED` and `ASK`.
    async fn send_to_slot(self: &Arc<Self>, slot: u16, cmd: &Cmd) -> RedisResult<Value> {
        for _ in 0..REDIRECTS {
            let Some(node) = self.node(slot) else { break };
            let Ok(mut conn) = self.conn(&node).await else {
                // Not connected: nothing was sent; redis-rs finds its way (or fails as it
                // would have).
                self.stale();
                break;
            };
            match lift(self.timed(conn.req_packed_command(cmd)).await) {
                Err(e) => match self.redirected(e, cmd).await {
                    Redirect::Again => continue,
                    Redirect::Done(r) => return r,
                },
                ok => return ok,
            }
        }
        self.fallback.clone().req_packed_command(cmd).await
    }

    /// Reads an error: a `MOVED` points the slot anew (the command did not run: send again),
    /// an `ASK` is followed once, a connection error makes the map stale.
    async fn redirected(self: &Arc<Self>, e: RedisError, cmd: &Cmd) -> Redirect {
        if is_kind(&e, ServerErrorKind::Moved) {
            if let Some((slot, (host, port))) = e
                .redirect_node()
                .and_then(|(addr, slot)| Some((slot, split_addr(addr)?)))
            {
                self.redirects.fetch_add(1, Ordering::Relaxed);
                self.point(slot, &host, port);
                self.stale();
                return Redirect::Again;
            }
        }
        if is_kind(&e, ServerErrorKind::Ask) {
            if let Some((host, port)) = e.redirect_node().and_then(|(a, _)| split_addr(a)) {
                self.redirects.fetch_add(1, Ordering::Relaxed);
                return Redirect::Done(self.ask(&host, port, cmd).await);
            }
        }
        if map_suspect(&e) {
            self.stale();
        }
        Redirect::Done(Err(e))
    }

    /// Sends a pipeline: a script followed by `WAIT`/`WAITAOF` (replica sync) goes by the
    /// script's slot to its master (a redirected script did not run, and the waits after it
    /// are harmless: the whole pipeline goes again to the node named); any other pipeline
    /// through redis-rs's cluster connection.
    pub(crate) async fn pipeline(
        self: &Arc<Self>,
        pipe: &redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let mut cmds = pipe.cmd_iter();
        let slot = cmds.next().and_then(script_slot);
        let waits = cmds.all(|c| {
            matches!(c.args_iter().next(), Some(Arg::Simple(n))
                if n.eq_ignore_ascii_case(b"WAIT") || n.eq_ignore_ascii_case(b"WAITAOF"))
        });
        let (Some(slot), true, 0) = (slot, waits, offset) else {
            return self
                .fallback
                .clone()
                .req_packed_commands(pipe, offset, count)
                .await;
        };
        let mut asking: Option<Arc<Node>> = None;
        for _ in 0..REDIRECTS {
            let (node, ask) = match asking.take() {
                Some(node) => (node, true),
                None => match self.node(slot) {
                    Some(node) => (node, false),
                    None => break,
                },
            };
            let Ok(mut conn) = self.conn(&node).await else {
                self.stale();
                break;
            };
            let replies = if ask {
                let mut asked = redis::pipe();
                asked.cmd("ASKING");
                pipe.cmd_iter()
                    .for_each(|c| _ = asked.add_command(c.clone()));
                self.timed(conn.req_packed_commands(&asked, 1, count)).await
            } else {
                self.timed(conn.req_packed_commands(pipe, 0, count)).await
            };
            let replies = match replies {
                Err(e) => {
                    if map_suspect(&e) {
                        self.stale();
                    }
                    return Err(e);
                }
                Ok(r) => r,
            };
            let redirect = match replies.first() {
                Some(Value::ServerError(e)) => RedisError::from(e.clone()),
                _ => return Ok(replies),
            };
            let Some((to, (host, port))) = redirect
                .redirect_node()
                .and_then(|(a, slot)| Some((slot, split_addr(a)?)))
            else {
                return Ok(replies);
            };
            self.redirects.fetch_add(1, Ordering::Relaxed);
            if is_kind(&redirect, ServerErrorKind::Ask) {
                asking = Some(self.node_at(&host, port));
            } else {
                self.point(to, &host, port);
                self.stale();
            }
        }
        self.fallback
            .clone()
            .req_packed_commands(pipe, offset, count)
            .await
    }

    /// The known node at `host:port`, or a new one.
    fn node_at(&self, host: &str, port: u16) -> Arc<Node> {
        self.map
            .read()
            .nodes
            .iter()
            .find(|n| n.host == host && n.port == port)
            .cloned()
            .unwrap_or_else(|| Arc::new(Node::new(host.to_owned(), port)))
    }

    /// `ASKING` then `cmd` on `host:port`, in one pipeline; the command's reply.
    async fn ask(&self, host: &str, port: u16, cmd: &Cmd) -> RedisResult<Value> {
        let node = self.node_at(host, port);
        let mut conn = self.conn(&node).await?;
        let mut pipe = redis::pipe();
        pipe.cmd("ASKING");
        pipe.add_command(cmd.clone());
        let mut replies = self.timed(conn.req_packed_commands(&pipe, 0, 2)).await?;
        match replies.pop() {
            Some(v) if replies.len() == 1 => lift(Ok(v)),
            _ => Err(super::protocol_error("ASKING: a reply of the wrong length")),
        }
    }

    /// Sends `cmds` (each a script with its slot) with one pipeline per master, all masters at
    /// once; the replies in `cmds`' order, each a server error as that command's own error.
    /// A command whose master is unknown, or redirected, goes again alone ([`Router::request`]:
    /// a redirected command did not run).
    pub(crate) async fn send_by_node(
        self: &Arc<Self>,
        cmds: &[(u16, Cmd)],
    ) -> Vec<RedisResult<Value>> {
        let mut groups: Vec<(Option<Arc<Node>>, Vec<usize>)> = Vec::new();
        for (i, (slot, _)) in cmds.iter().enumerate() {
            let node = self.node(*slot);
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

impl Node {
    fn new(host: String, port: u16) -> Node {
        Node {
            host,
            port,
            conn: OnceCell::new(),
        }
    }
}

/// What to do after an error.
enum Redirect {
    Again,
    Done(RedisResult<Value>),
}

impl Router {
    /// Sends `cmd` (a keyless command: the connection's name) to every master connected here
    /// too; errors are ignored (a node down is named when it is connected again).
    pub(crate) async fn to_every_node(&self, cmd: &Cmd) {
        let nodes = self.map.read().nodes.clone();
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
    use crate::keys::slot_of;
    use redis::cluster_routing::Slot;

    #[test]
    fn slots_are_redis_cluster_slots() {
        for key in [
            "foo",
            "{user1000}.following",
            "a{}b",
            "{}x",
            "x{y",
            "lock:{tag}:1",
            "",
        ] {
            assert_eq!(
                Slot::new(slot_number(key.as_bytes())),
                Some(slot_of(key.as_bytes())),
                "{key}"
            );
        }
        for n in 0..5000u32 {
            let key = format!("redisson_lock__channel:{{name-{n}}}");
            assert_eq!(
                Slot::new(slot_number(key.as_bytes())),
                Some(slot_of(key.as_bytes()))
            );
        }
        assert_eq!(slot_number(b"foo"), 12182);
    }

    #[test]
    fn only_scripts_with_keys_are_routed_here() {
        let mut script = redis::cmd("EVALSHA");
        script.arg("abc").arg(2).arg("{k}1").arg("{k}2").arg("v");
        assert_eq!(script_slot(&script), Some(slot_number(b"k")));
        let mut none = redis::cmd("EVALSHA");
        none.arg("abc").arg(0).arg("v");
        assert_eq!(script_slot(&none), None);
        let mut get = redis::cmd("GET");
        get.arg("foo");
        assert_eq!(script_slot(&get), None);
        assert_eq!(script_slot(&redis::cmd("EVALSHA")), None);
    }

    #[test]
    fn a_slot_map_is_read_from_cluster_slots() {
        let range = |lo: i64, hi: i64, host: &str, port: i64| {
            Value::Array(vec![
                Value::Int(lo),
                Value::Int(hi),
                Value::Array(vec![
                    Value::BulkString(host.as_bytes().to_vec()),
                    Value::Int(port),
                    Value::BulkString(b"id".to_vec()),
                ]),
            ])
        };
        let reply = Value::Array(vec![
            range(0, 5460, "127.0.0.1", 7000),
            range(5461, 16383, "127.0.0.1", 7001),
            range(1, 2, "?", 7002),
            range(3, 99999, "h", 7003),
        ]);
        assert_eq!(
            parse_masters(&reply),
            vec![
                (0, 5460, "127.0.0.1".to_owned(), 7000),
                (5461, 16383, "127.0.0.1".to_owned(), 7001)
            ]
        );
        assert!(parse_masters(&Value::Nil).is_empty());
        assert_eq!(
            split_addr("127.0.0.1:7000"),
            Some(("127.0.0.1".to_owned(), 7000))
        );
        assert_eq!(split_addr("[::1]:7000"), Some(("::1".to_owned(), 7000)));
        assert_eq!(split_addr("nope"), None);
    }
}
