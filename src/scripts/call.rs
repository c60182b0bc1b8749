//! [`Call`]: one script call, built once as the `EVALSHA` command that goes on the wire.
//!
//! redis-rs's `ScriptInvocation` keeps every key and argument in a `Vec<u8>` of its own and
//! copies them all into a fresh command on each invocation; a lock cycle sends two scripts of
//! four to seven arguments each, so that was a dozen allocations and two copies per script on
//! the hot path (benches/results/HISTORY.md, "where the client's time goes"). A `Call` writes each
//! argument once, straight into the command's buffer.

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisResult, Script, ToRedisArgs};
use tracing::Instrument;

/// The server a connection sends its commands to, where it is one known server (a standalone
/// deployment): the round trip's `server.address` and `server.port`.
pub(crate) trait Peer {
    /// The server's URL (`redis://host:port/...`); `None` when each command is routed on its
    /// own (cluster, Sentinel) or unknown.
    fn server(&self) -> Option<&str>;
}

/// A prepared `EVALSHA <sha> <numkeys> KEYS... ARGV...`; sent by SHA and, on `NOSCRIPT` (after
/// a `SCRIPT FLUSH`, a restart or a failover), loaded and sent once more, which is safe because
/// a script the server did not know never ran.
pub struct Call {
    script: &'static Script,
    cmd: Cmd,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys and arguments may carry what callers consider secret: the script only.
        f.debug_struct("Call")
            .field("sha", &self.script.get_hash())
            .finish_non_exhaustive()
    }
}

impl Call {
    /// A call of `script` with `keys` keys: push exactly that many with [`key`](Self::key)
    /// first, then the arguments.
    pub(crate) fn new(script: &'static Script, keys: usize) -> Call {
        let mut cmd = Cmd::with_capacity(12, 160);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
        Call { script, cmd }
    }

    /// Appends a key (`KEYS[i]`).
    pub(crate) fn key(&mut self, key: impl ToRedisArgs) -> &mut Call {
        self.cmd.arg(key);
        self
    }

    /// Appends an argument (`ARGV[i]`).
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Call {
        self.cmd.arg(arg);
        self
    }

    /// Sends the call and converts its reply, in a client span of its own (the round trip,
    /// `observe::round_trip`: built only when a subscriber wants it).
    pub(crate) async fn invoke_async<T: FromRedisValue>(
        &self,
        con: &mut (impl ConnectionLike + Peer),
    ) -> RedisResult<T> {
        let span = crate::observe::round_trip(|| super::name_of(self.script), con.server());
        let reply = async {
            match self.cmd.query_async(con).await {
                Err(e)
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    self.script.load_async(con).await?;
                    self.cmd.query_async(con).await
                }
                reply => reply,
            }
        }
        .instrument(span.clone())
        .await;
        if let Err(e) = &reply {
            crate::observe::round_trip_failed(&span, e);
        }
        reply
    }

    /// The command as it goes on the wire.
    #[cfg(test)]
    pub(crate) fn cmd(&self) -> &Cmd {
        &self.cmd
    }
}

/// `call!(SCRIPT; key, ...; arg, ...)`: a [`Call`] of a script with a fixed number of keys (each
/// key one `&str`), each key and argument written once, in the order the script reads them.
macro_rules! call {
    ($script:expr; $($key:expr),*; $($arg:expr),* $(,)?) => {{
        let mut call = $crate::scripts::Call::new(&$script, [$(stringify!($key)),*].len());
        call$(.key($key))*$(.arg($arg))*;
        call
    }};
}
pub(crate) use call;

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Call` puts on the wire what redis-rs's `ScriptInvocation` did (`EVALSHA sha numkeys
    /// KEYS... ARGV...`): the batcher and the replica sync read that command.
    #[test]
    fn same_wire_command_as_a_script_invocation() {
        let script: &'static Script = &crate::scripts::UNLOCK;
        let ours = call!(*script; "k", "c"; "0", 30_000u64, "f:1", "PUBLISH");
        let theirs = redis::cmd("EVALSHA")
            .arg(script.get_hash())
            .arg(2)
            .arg("k")
            .arg("c")
            .arg("0")
            .arg(30_000u64)
            .arg("f:1")
            .arg("PUBLISH")
            .get_packed_command();
        assert_eq!(ours.cmd().get_packed_command(), theirs);
    }
}
