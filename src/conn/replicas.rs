//! Replica sync after lock writes: `WAIT` (and `WAITAOF`) pipelined behind a script on the same
//! node, the replica counts they wait for, and what a refusal or a shortfall means.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{Cmd, RedisError, RedisResult, Value};

use super::{protocol_error, Conn, Kind};
use crate::config::{millis, ReplicaSync};
use crate::error::LockError;
use crate::keys::slot_of;

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
    /// Runs a lock script followed by `WAIT <replicas> <timeout>` on the same node, as Redisson
    /// does outside single-server mode, and fails when replicas exist but none confirmed.
    pub(super) async fn synced_write(
        &mut self,
        cmd: &Cmd,
        sync: Option<&ReplicaCounts>,
    ) -> RedisResult<Value> {
        let (reply, verdict) = self.synced_reply(cmd, sync).await?;
        verdict.map(|()| reply)
    }

    /// [`synced_write`](Self::synced_write) with the script's reply kept apart from the sync
    /// verdict (a shortfall is recorded on this handle and returned as the verdict's error): a
    /// batch hands the reply to the operations that did not ask for sync.
    pub(super) async fn synced_reply(
        &mut self,
        cmd: &Cmd,
        sync: Option<&ReplicaCounts>,
    ) -> RedisResult<(Value, RedisResult<()>)> {
        let slot = script_slot(cmd);
        let aof_sync = self.live_aof();
        let replicas = match sync {
            None => 0,
            Some(sync) => match sync.replicas.get(&slot).map(|r| *r) {
                Some((n, read)) if read.elapsed() < REPLICA_REFRESH => n,
                _ => {
                    let n = self
                        .connected_replicas(slot, super::cluster_route::script_slot(cmd))
                        .await?;
                    sync.replicas.insert(slot, (n, Instant::now()));
                    n
                }
            },
        };
        let wait = sync.filter(|_| replicas > 0);
        if wait.is_none() && aof_sync.is_none() {
            return Ok((self.raw(cmd).await?, Ok(())));
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
        let replies = self.raw_pipeline(&pipe, 0, count).await;
        if let (Err(_), Some(sync)) = (&replies, sync) {
            // The node may have changed (failover): re-read its replica count next time.
            sync.replicas.remove(&slot);
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
                sync.replicas.remove(&slot);
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
    /// `number`: the same slot as a number, for the cluster's own routing (`cluster_route`).
    async fn connected_replicas(&mut self, slot: Slot, number: Option<u16>) -> RedisResult<i64> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("replication");
        let info = match &mut self.kind {
            Kind::Cluster(r) if number.is_some() => {
                r.on_master(number.unwrap_or_default(), &cmd).await?
            }
            Kind::Cluster(r) => {
                let route = Route::with_slot(slot, SlotAddr::Master);
                r.fallback()
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?
            }
            _ => self.raw(&cmd).await?,
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
    pub(super) replicas: DashMap<Slot, (i64, Instant)>,
}

/// Only scripts are followed by `WAIT` on a synced handle: the `SCRIPT LOAD` that redis-rs
/// sends after a `NOSCRIPT` writes nothing and has no key to find the master by.
pub(super) fn is_script(cmd: &Cmd) -> bool {
    matches!(
        cmd.args_iter().next(),
        Some(redis::Arg::Simple(name)) if name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL")
    )
}

/// The hash slot of a script's first key (`EVALSHA sha numkeys key ...`); 0 without keys.
fn script_slot(cmd: &Cmd) -> Slot {
    match cmd.args_iter().nth(3) {
        Some(redis::Arg::Simple(key)) => slot_of(key),
        _ => slot_of(b""),
    }
}
