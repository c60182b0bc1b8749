//! A command on the wire of the handle's topology, the connection named first when due
//! (`naming`): one server's connection manager, the cluster's router (a script by the slot it
//! was handed, anything else through redis-rs's cluster connection), or the master Sentinel
//! names. The bottom of the send path: everything above comes down through here.

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisFuture, RedisResult, Script, Value};

use super::{protocol_error, Conn, Kind};

impl Conn {
    /// Sends one command (the connection named first when due); `slot`: a script's, by which a
    /// cluster routes it.
    pub(super) async fn raw(&mut self, cmd: &Cmd, slot: Option<u16>) -> RedisResult<Value> {
        self.name_if_due().await;
        let r = self.unnamed(cmd, slot).await;
        self.naming.after(&r);
        r
    }

    /// Sends one command as it is.
    async fn unnamed(&mut self, cmd: &Cmd, slot: Option<u16>) -> RedisResult<Value> {
        match (&mut self.kind, slot) {
            (Kind::Single(c), _) => c.req_packed_command(cmd).await,
            (Kind::Cluster(r), Some(slot)) => r.send_to_slot(slot, cmd).await,
            (Kind::Cluster(r), None) => r.send_any(cmd).await,
            (Kind::Sentinel(s), _) => s.clone().request(cmd).await,
        }
    }

    /// Loads `script` (`SCRIPT LOAD`, after a `NOSCRIPT`) where its call on `slot` went: on a
    /// cluster, the master of the slot as the router knows it. redis-rs sends `SCRIPT LOAD` to
    /// every master of its own slot map, which after a failover can still name the dead master
    /// (every load fails) or the demoted one (the load lands on a replica), while the script
    /// goes to the promoted master again and again.
    pub(super) async fn load_script(
        &mut self,
        script: &Script,
        slot: Option<u16>,
    ) -> RedisResult<()> {
        script
            .load_async(&mut Own(self, Purpose::Load(slot)))
            .await
            .map(drop)
    }

    /// Sends the connection's name when it is due (`conn/naming.rs`).
    pub(super) async fn name_if_due(&mut self) {
        if self.naming.take_due() {
            let naming = self.naming.clone();
            naming.send(&mut Own(self, Purpose::Naming)).await;
        }
    }

    /// Sends `count` pipelined commands from `offset` (the connection named first when due);
    /// `slot`: that of the script the pipeline starts with, followed by its `WAIT`/`WAITAOF`
    /// (replica sync), by which a cluster routes it.
    pub(super) async fn raw_pipeline(
        &mut self,
        pipe: &redis::Pipeline,
        offset: usize,
        count: usize,
        slot: Option<u16>,
    ) -> RedisResult<Vec<Value>> {
        self.name_if_due().await;
        let r = match (&mut self.kind, slot) {
            (Kind::Single(c), _) => c.req_packed_commands(pipe, offset, count).await,
            (Kind::Cluster(r), Some(slot)) if offset == 0 => {
                r.script_pipeline(slot, pipe, count).await
            }
            (Kind::Cluster(r), _) => r.fallback().req_packed_commands(pipe, offset, count).await,
            (Kind::Sentinel(s), _) => s.clone().request_pipeline(pipe, offset, count).await,
        };
        self.naming.after(&r);
        r
    }
}

/// What an [`Own`] handle's command is.
enum Purpose {
    /// The naming commands: out as they are, to a cluster's own node connections too.
    Naming,
    /// A `SCRIPT LOAD`, where a script on the slot would go.
    Load(Option<u16>),
}

/// A handle for the connection's own commands (naming, loading a script), no pipelines.
struct Own<'a>(&'a mut Conn, Purpose);

impl ConnectionLike for Own<'_> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            match (&self.0.kind, &self.1) {
                (Kind::Cluster(r), Purpose::Load(Some(slot))) => {
                    r.clone().on_master(*slot, cmd).await
                }
                (_, Purpose::Load(_)) => self.0.raw(cmd, None).await,
                (kind, Purpose::Naming) => {
                    // A cluster's own node connections (`cluster_route`) are named too.
                    if let Kind::Cluster(r) = kind {
                        r.to_every_node(cmd).await;
                    }
                    self.0.unnamed(cmd, None).await
                }
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _pipeline: &'a redis::Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async {
            Err(protocol_error(
                "no pipelines on a connection's own commands",
            ))
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
