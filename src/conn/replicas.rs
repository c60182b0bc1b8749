//! Replica sync after lock writes: `WAIT` (and `WAITAOF`) pipelined behind a script on the same
//! node, the replica counts they wait for, and what a refusal or a shortfall means.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use redis::{Cmd, RedisError, RedisResult, Value};

use super::{protocol_error, Conn, Kind};
use crate::config::{millis, AofSync, ReplicaSync};
use crate::error::LockError;

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
pub(super) struct Refusals {
    policy: ReplicaSync,
    wait: AtomicBool,
    aof: AtomicBool,
}

impl Refusals {
    pub(super) fn new(policy: ReplicaSync) -> Refusals {
        Refusals {
            policy,
            wait: AtomicBool::new(false),
            aof: AtomicBool::new(false),
        }
    }

    fn flag(&self, command: &str) -> &AtomicBool {
        match command {
            "WAIT" => &self.wait,
            _ => &self.aof,
        }
    }

    pub(super) fn is_refused(&self, command: &str) -> bool {
        self.flag(command).load(Ordering::Acquire)
    }

    /// The server refused `command`: under [`ReplicaSync::BestEffort`] it is not sent again, the
    /// first refusal is logged, and the caller goes on (`true`); under `Required`, `false`.
    pub(super) fn refuse(&self, command: &'static str, detail: &str) -> bool {
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

impl Conn {
    /// Whether scripts on this handle are followed by `WAIT`/`WAITAOF`.
    pub(super) fn syncs(&self) -> bool {
        self.synced && (self.live_sync().is_some() || self.live_aof().is_some())
    }

    /// `WAIT`'s settings, unless the server refused it and the policy let us go on without.
    pub(super) fn live_sync(&self) -> Option<Arc<ReplicaCounts>> {
        self.sync
            .clone()
            .filter(|_| !self.refusals.is_refused("WAIT"))
    }

    /// `WAITAOF`'s settings, unless the server refused it and the policy let us go on without.
    pub(super) fn live_aof(&self) -> Option<AofSync> {
        self.aof.filter(|_| !self.refusals.is_refused("WAITAOF"))
    }

    /// A script on this handle (`slot`: its first key's, `None` without keys), its reply apart
    /// from the sync verdict; `sync`: followed by `WAIT <replicas> <timeout>` (and `WAITAOF`)
    /// on the same node when configured, as Redisson does outside single-server mode. A write
    /// no replica confirmed is recorded on this handle ([`Shortfall`]) and is the verdict's
    /// error: a batch hands the reply to the operations that did not ask for sync.
    pub(super) async fn send_parts(
        &mut self,
        cmd: &Cmd,
        slot: Option<u16>,
        synced: bool,
    ) -> RedisResult<(Value, RedisResult<()>)> {
        let (counts, aof_sync) = (self.live_sync(), self.live_aof());
        if !synced || counts.is_none() && aof_sync.is_none() {
            return Ok((self.raw(cmd, slot).await?, Ok(())));
        }
        let (sync, at) = (counts.as_deref(), slot.unwrap_or(0));
        let replicas = match sync {
            None => 0,
            Some(sync) => match sync.replicas.get(&at).map(|r| *r) {
                Some((n, read)) if read.elapsed() < REPLICA_REFRESH => n,
                _ => {
                    let n = self.connected_replicas(at).await?;
                    sync.replicas.insert(at, (n, Instant::now()));
                    n
                }
            },
        };
        let wait = sync.filter(|_| replicas > 0);
        if wait.is_none() && aof_sync.is_none() {
            return Ok((self.raw(cmd, slot).await?, Ok(())));
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
        let replies = self.raw_pipeline(&pipe, 0, count, slot).await;
        if let (Err(_), Some(sync)) = (&replies, sync) {
            // The node may have changed (failover): re-read its replica count next time.
            sync.replicas.remove(&at);
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
                sync.replicas.remove(&at);
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
    async fn connected_replicas(&mut self, slot: u16) -> RedisResult<i64> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("replication");
        let info = match &mut self.kind {
            Kind::Cluster(r) => r.on_master(slot, &cmd).await?,
            _ => self.raw(&cmd, None).await?,
        };
        let text: String = redis::from_redis_value(info)?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0))
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
pub(super) struct ReplicaCounts {
    pub(super) timeout: Duration,
    pub(super) replicas: DashMap<u16, (i64, Instant)>,
}
