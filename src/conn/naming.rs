//! Connection names (`CLIENT SETNAME`), so that an operator finds a client's connections in
//! `CLIENT LIST`: `<name>:<client id>` (`Config::with_client_name`), the client id being the
//! `<uuid>` of the lock fields it writes.
//!
//! redis-rs opens connections on its own (the connection manager after a broken connection, a
//! cluster's node connections after a failover or a moved slot) and has no hook to name them.
//! So the name is sent before the first command and again before the first command after any
//! error that may mean a new connection (a connection error, `MOVED`, `ASK`, `TRYAGAIN`,
//! `CLUSTERDOWN`). On a cluster, redis-rs sends `CLIENT SETNAME` to every node. The library's
//! name (`CLIENT SETINFO LIB-NAME` / `LIB-VER`) goes with it; servers before 7.2 refuse that,
//! which is ignored.

use std::sync::atomic::{AtomicBool, Ordering};

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, RedisResult};

use crate::error::is_connection_error;

/// The first part of the connections' name when `Config::with_client_name` is not given.
pub(crate) const DEFAULT_CLIENT_NAME: &str = "redisson-lock";

/// The library name sent with `CLIENT SETINFO LIB-NAME`.
pub(crate) const LIB_NAME: &str = "redisson-lock";

/// The name of one client's connections, and whether it is due (again).
#[derive(Debug)]
pub(crate) struct Naming {
    name: String,
    /// The server's URL on a standalone deployment (the round trips' `server.*` span
    /// attributes: `scripts::Peer`); kept here, in the connection's shared state, so that a
    /// handle costs nothing more to clone.
    server: Option<String>,
    due: AtomicBool,
    /// The server refused `CLIENT SETNAME` (an ACL): said once, never tried again.
    refused: AtomicBool,
}

impl Naming {
    pub(crate) fn new(name: String) -> Naming {
        Naming {
            name,
            server: None,
            due: AtomicBool::new(true),
            refused: AtomicBool::new(false),
        }
    }

    /// The same name, for connections to `server` (standalone).
    pub(crate) fn at(mut self, server: Option<String>) -> Naming {
        self.server = server;
        self
    }

    /// The standalone server's URL, if any.
    pub(crate) fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// Whether the name must be sent now (it is then no longer due).
    pub(super) fn take_due(&self) -> bool {
        self.due.load(Ordering::Acquire)
            && !self.refused.load(Ordering::Acquire)
            && self.due.swap(false, Ordering::AcqRel)
    }

    /// Marks the name due again after an error that may mean a new connection.
    pub(super) fn after<T>(&self, r: &RedisResult<T>) {
        if let Err(e) = r {
            if may_reconnect(e) {
                self.due.store(true, Ordering::Release);
            }
        }
    }

    /// Names the connection behind `conn` (every node of a cluster connection). A connection
    /// error leaves the name due; a refusal is logged once and ends the naming.
    pub(crate) async fn send(&self, conn: &mut impl ConnectionLike) {
        match conn.req_packed_command(&self.setname()).await {
            Ok(_) => {}
            Err(e) if may_reconnect(&e) => {
                self.due.store(true, Ordering::Release);
                return;
            }
            Err(e) => {
                if !self.refused.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        error = %e,
                        "the server refuses CLIENT SETNAME: this client's connections stay unnamed"
                    );
                }
                return;
            }
        }
        for cmd in lib_info() {
            // Redis before 7.2 does not know CLIENT SETINFO: nothing to do about it.
            let _ = conn.req_packed_command(&cmd).await;
        }
    }

    fn setname(&self) -> Cmd {
        let mut setname = redis::cmd("CLIENT");
        setname.arg("SETNAME").arg(&self.name);
        setname
    }

    /// Names a connection about to be dropped (the fail-fast probe at connect, `conn/open.rs`),
    /// errors ignored. Its close reaches the server when it does, and till then `CLIENT LIST`
    /// shows it: unnamed, it read as a client without a uuid, and `list --orphans` called a
    /// dead holder's lock `unknown` (tests/it/connect.rs holds the close to see it).
    pub(super) async fn probe(&self, conn: &mut impl ConnectionLike) {
        if !self.refused.load(Ordering::Acquire) {
            let _ = conn.req_packed_command(&self.setname()).await;
        }
    }
}

/// `CLIENT SETINFO LIB-NAME redisson-lock` and `LIB-VER <this crate's version>`.
fn lib_info() -> [Cmd; 2] {
    let mut name = redis::cmd("CLIENT");
    name.arg("SETINFO").arg("LIB-NAME").arg(LIB_NAME);
    let mut version = redis::cmd("CLIENT");
    version
        .arg("SETINFO")
        .arg("LIB-VER")
        .arg(env!("CARGO_PKG_VERSION"));
    [name, version]
}

/// An error after which redis-rs may have opened a new connection.
fn may_reconnect(e: &RedisError) -> bool {
    is_connection_error(e) || matches!(e.code(), Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN"))
}
