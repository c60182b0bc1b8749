//! [`Call`]: one script call, built once as the `EVALSHA` command that goes on the wire.
//!
//! redis-rs's `ScriptInvocation` keeps every key and argument in a `Vec<u8>` of its own and
//! copies them all into a fresh command on each invocation; a lock cycle sends two scripts of
//! four to seven arguments each, so that was a dozen allocations and two copies per script on
//! the hot path (benches/results/HISTORY.md, "where the client's time goes"). A `Call` writes each
//! argument once, straight into the command's buffer.

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisFuture, RedisResult, Script, ToRedisArgs, Value};
use tracing::Instrument;

/// The server a connection sends its commands to, where it is one known server (a standalone
/// deployment): the round trip's `server.address` and `server.port`.
pub(crate) trait Peer {
    /// The server's URL (`redis://host:port/...`); `None` when each command is routed on its
    /// own (cluster, Sentinel) or unknown.
    fn server(&self) -> Option<&str>;

    /// Sends `call`'s command, routed by what the call knows (its script, keys and slot): the
    /// typed way into the connection, which never reads the command's bytes back.
    fn send_call<'a>(&'a mut self, call: &'a Call) -> RedisFuture<'a, Value>;

    /// Loads `call`'s script (after a `NOSCRIPT`) where `call` goes.
    fn load<'a>(&'a mut self, call: &'a Call) -> RedisFuture<'a, ()>;
}

/// A prepared `EVALSHA <sha> <numkeys> KEYS... ARGV...`; sent by SHA and, on `NOSCRIPT` (after
/// a `SCRIPT FLUSH`, a restart or a failover), loaded and sent once more, which is safe because
/// a script the server did not know never ran. It keeps what it knows for the connection to
/// route it by: its script, its key count and its first key's hash slot.
pub struct Call {
    script: &'static Script,
    cmd: Cmd,
    keys: usize,
    /// The first key's hash slot (`keys::slot_of`), once a key is pushed.
    slot: Option<u16>,
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
        Call {
            script,
            cmd,
            keys,
            slot: None,
        }
    }

    /// Appends a key (`KEYS[i]`); the first one's slot is the call's.
    pub(crate) fn key(&mut self, key: &str) -> &mut Call {
        self.slot = self
            .slot
            .or_else(|| Some(crate::keys::slot_of(key.as_bytes())));
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
            match self.send(con).await {
                Err(e)
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    con.load(self).await?;
                    self.send(con).await
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

    /// One send through [`Peer::send_call`], its reply converted as `Cmd::query_async` does.
    async fn send<T: FromRedisValue>(&self, con: &mut impl Peer) -> RedisResult<T> {
        let reply = con.send_call(self).await?;
        Ok(redis::from_redis_value(reply.extract_error()?)?)
    }

    /// The script called.
    pub(crate) fn script(&self) -> &'static Script {
        self.script
    }

    /// The command as it goes on the wire.
    pub(crate) fn cmd(&self) -> &Cmd {
        &self.cmd
    }

    /// The hash slot of the first key; `None` for a call without keys.
    pub(crate) fn slot(&self) -> Option<u16> {
        self.slot
    }

    /// The script's function in the group-commit script (from 1), when a batch may carry this
    /// call: a batched script with at least one key (the lock key) and fewer than 256 keys and
    /// arguments each (a batch header holds each count in a byte).
    pub(crate) fn batch(&self) -> Option<u8> {
        let fits = (1..=255).contains(&self.keys) && self.args().count() <= 255;
        super::batch_index(self.script).filter(|_| fits)
    }

    /// The keys (`KEYS`), as pushed.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.words().take(self.keys)
    }

    /// The arguments (`ARGV`), as pushed.
    pub(crate) fn args(&self) -> impl Iterator<Item = &[u8]> {
        self.words().skip(self.keys)
    }

    /// The first key: the lock key of every batched script.
    pub(crate) fn lock_key(&self) -> &[u8] {
        self.keys().next().unwrap_or_default()
    }

    /// Another call of the same command (the batcher keeps one per queued operation).
    pub(crate) fn duplicate(&self) -> Call {
        Call {
            cmd: self.cmd.clone(),
            ..*self
        }
    }

    /// The command, taken out (the batcher sends it in a pipeline and keeps the call's reply
    /// sender only).
    pub(crate) fn take_cmd(&mut self) -> Cmd {
        std::mem::take(&mut self.cmd)
    }

    /// The words after `EVALSHA sha numkeys`, as this call wrote them (each one plain).
    fn words(&self) -> impl Iterator<Item = &[u8]> {
        self.cmd.args_iter().skip(3).map(|a| match a {
            redis::Arg::Simple(v) => v,
            _ => &[],
        })
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

    /// What the connection routes by, known from the build: the first key's slot, and the
    /// batch function where a batch may carry the call (every count fits a header byte).
    #[test]
    fn a_call_knows_its_slot_and_whether_a_batch_carries_it() {
        let call = |nkeys: usize, nargs: usize| {
            let mut call = Call::new(&crate::scripts::LOCK, nkeys);
            (0..nkeys).for_each(|i| _ = call.key(&format!("{{k}}{i}")));
            (0..nargs).for_each(|i| _ = call.arg(i));
            call
        };
        assert_eq!(call(2, 1).slot(), Some(crate::keys::slot_of(b"k")));
        assert_eq!(call(0, 1).slot(), None);
        assert_eq!(
            call(1, 2).batch(),
            Some(1),
            "lock.lua is the first batched script"
        );
        assert_eq!(call(255, 255).batch(), Some(1));
        assert_eq!(call(256, 0).batch(), None, "256 keys");
        assert_eq!(call(1, 256).batch(), None, "256 arguments");
        assert_eq!(call(0, 2).batch(), None, "no lock key");
        let unbatched = call!(crate::scripts::RENEW; "k"; 1);
        assert_eq!(unbatched.batch(), None);
        let two = call(2, 1);
        let words: Vec<&[u8]> = two.keys().chain(two.args()).collect();
        assert_eq!(words, [&b"{k}0"[..], b"{k}1", b"0"]);
    }
}
