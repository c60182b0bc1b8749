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
        script.load_async(&mut OnSlot(self, slot)).await.map(drop)
    }

    /// Sends the connection's name when it is due (`conn/naming.rs`).
    pub(super) async fn name_if_due(&mut self) {
        if self.naming.take_due() {
            let naming = self.naming.clone();
            naming.send(&mut Unnamed(self)).await;
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

/// A handle whose one command (a `SCRIPT LOAD`) goes where a script on the slot would go.
struct OnSlot<'a>(&'a mut Conn, Option<u16>);

impl ConnectionLike for OnSlot<'_> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            match (&self.0.kind, self.1) {
                (Kind::Cluster(r), Some(slot)) => r.clone().on_master(slot, cmd).await,
                _ => self.0.raw(cmd, None).await,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _pipeline: &'a redis::Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async { Err(protocol_error("no pipelines while loading a script")) })
    }

    fn get_db(&self) -> i64 {
        0
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
            self.0.unnamed(cmd, None).await
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
