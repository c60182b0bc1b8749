//! The command connection through Sentinel: the master is resolved by asking the sentinels,
//! and again after a connection error or a `READONLY`/`MASTERDOWN` reply (a failover).
//!
//! One task per sentinel listens on the sentinel's own pub/sub for `+switch-master` of the
//! configured master and moves at once to the address it announces (`ROLE` there must say
//! master, else the sentinels are asked), as Redisson does: the old master of a
//! `SENTINEL FAILOVER` stays writable until the sentinels convert it, so a client that waited
//! for an error, or asked a sentinel that has not heard of the switch yet, would take locks
//! there while others take them on the new master (`conn/sentinel_resolve.rs`). With
//! failover awareness (`Config::with_failover_awareness`), whenever a resolution names a
//! different master than the one before (after that message, or after an error), `changed` is
//! notified and the watchdog re-verifies every hold out of turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, RedisError, RedisResult, Value};

use super::naming::Naming;
use super::open::manager;
use super::sentinel_resolve::{addr_of, Resolver};
use crate::config::Config;
use crate::error::LockError;

/// A master found through Sentinel, re-resolved after connection errors or `READONLY` replies
/// (the old master was demoted).
pub(crate) struct SentinelConn {
    pub(super) resolver: tokio::sync::Mutex<Resolver>,
    pub(super) current: parking_lot::RwLock<Option<ConnectionManager>>,
    pub(super) config: Config,
    pub(super) stale: AtomicBool,
    /// Notified when a resolution names a different master (failover awareness on).
    pub(super) changed: Option<Arc<Notify>>,
    /// The address of the master last resolved.
    pub(super) master_addr: parking_lot::Mutex<Option<String>>,
    /// The `+switch-master` listeners, one per sentinel (aborted with the connection).
    pub(super) watchers: parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The client's connection name (the connect probe is named too: `Naming::probe`).
    pub(super) naming: Arc<Naming>,
}

impl Drop for SentinelConn {
    fn drop(&mut self) {
        for w in self.watchers.get_mut().drain(..) {
            w.abort();
        }
    }
}

impl SentinelConn {
    /// A new connection's master: each time as the sentinels name it now (a replaced master
    /// refused: `conn/sentinel_resolve.rs`). The subscriber opens its connection there.
    pub(crate) async fn master_client(&self) -> RedisResult<redis::Client> {
        self.resolver.lock().await.resolve().await
    }

    pub(super) async fn manager(&self) -> RedisResult<ConnectionManager> {
        if !self.stale.load(Ordering::Acquire) {
            if let Some(m) = self.current.read().clone() {
                return Ok(m);
            }
        }
        let mut resolver = self.resolver.lock().await;
        if !self.stale.load(Ordering::Acquire) {
            if let Some(m) = self.current.read().clone() {
                return Ok(m);
            }
        }
        let client = resolver.resolve().await?;
        self.open(client).await
    }

    /// Opens the command connection on the master `client` names; the caller holds the
    /// resolver's lock. The watchdog is told of a new master once the connection is there:
    /// its pass must renew on the new master, not on the old one.
    async fn open(&self, client: redis::Client) -> RedisResult<ConnectionManager> {
        let addr = client.get_connection_info().addr();
        let addr = addr_of(addr).unwrap_or_else(|| addr.to_string());
        let m = manager(client, &self.config, &self.naming)
            .await
            .map_err(|e| match e {
                LockError::Redis(e) => e,
                other => RedisError::from(std::io::Error::other(other.to_string())),
            })?;
        *self.current.write() = Some(m.clone());
        self.stale.store(false, Ordering::Release);
        self.resolved(addr);
        Ok(m)
    }

    /// Records the master's address just resolved; a different one than before means a
    /// failover: the watchdog is told (failover awareness on).
    fn resolved(&self, addr: String) {
        let before = self.master_addr.lock().replace(addr.clone());
        if before.is_some_and(|b| b != addr) {
            tracing::info!(master = %addr, "sentinel: a new master; re-verifying the holds");
            if let Some(changed) = &self.changed {
                changed.notify_one();
            }
        }
    }

    /// What the watchdog waits on for an out-of-turn pass (failover awareness on).
    pub(crate) fn topology_changed(&self) -> Option<Arc<Notify>> {
        self.changed.clone()
    }

    /// A sentinel announced `+switch-master` for our master: `new` replaced `old` (both
    /// `host:port`). The client moves to `new` now if `ROLE` there says master (every sentinel
    /// announces it: the second copy finds the client there already), else it re-resolves;
    /// either way `old` is refused from now on. Should neither work, the watchdog is told
    /// anyway: its pass re-resolves in turn.
    async fn switched(&self, old: &str, new: &str) {
        let mut resolver = self.resolver.lock().await;
        resolver.switches.announce(old, new);
        let there = self.master_addr.lock().as_deref() == Some(new);
        if there && !self.stale.load(Ordering::Acquire) && self.current.read().is_some() {
            return;
        }
        // Commands wait for the switch (on the resolver's lock) instead of going to the old
        // master meanwhile.
        self.stale.store(true, Ordering::Release);
        if let Some(client) = resolver.announced(new).await {
            match self.open(client).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, master = %new, "sentinel: can't open the announced master")
                }
            }
        }
        drop(resolver);
        if let Err(e) = self.manager().await {
            tracing::warn!(error = %e, "sentinel: can't resolve the new master yet");
            if let Some(changed) = &self.changed {
                changed.notify_one();
            }
        }
    }

    /// Starts one `+switch-master` listener per sentinel (`clients`: the sentinels' own).
    pub(super) fn watch(self: &Arc<Self>, clients: Vec<redis::Client>, master: &str) {
        let tasks = clients
            .into_iter()
            .map(|c| tokio::spawn(listen(Arc::downgrade(self), c, master.to_owned())))
            .collect();
        *self.watchers.lock() = tasks;
    }

    /// Marks the master stale after a reply that says it may no longer be the master: a
    /// connection error, or `READONLY` / `MASTERDOWN`. Those two come back as a reply value (a
    /// script's error, or one entry of a pipeline such as the script and its `WAIT`), not as an
    /// `Err` of the call, so every value is looked at too.
    pub(super) fn observe(&self, r: Result<&[Value], &RedisError>) {
        let stale = match r {
            Err(e) => demoted(e.code()) || crate::error::is_connection_error(e),
            Ok(values) => values.iter().any(|v| match v {
                Value::ServerError(e) => demoted(Some(e.code())),
                _ => false,
            }),
        };
        if stale {
            self.stale.store(true, Ordering::Release);
        }
    }

    pub(super) async fn request(self: Arc<Self>, cmd: &Cmd) -> RedisResult<Value> {
        let mut conn = self.manager().await?;
        let r = conn.req_packed_command(cmd).await;
        self.observe(r.as_ref().map(std::slice::from_ref));
        r
    }

    pub(super) async fn request_pipeline(
        self: Arc<Self>,
        pipe: &redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let mut conn = self.manager().await?;
        let r = conn.req_packed_commands(pipe, offset, count).await;
        self.observe(r.as_ref().map(Vec::as_slice));
        r
    }
}

/// A reply code saying this server is not (or no longer) a usable master.
fn demoted(code: Option<&str>) -> bool {
    matches!(code, Some("READONLY" | "MASTERDOWN"))
}

/// Listens to one sentinel's `+switch-master` for `master`, reconnecting after a second when
/// the sentinel goes away, until the connection is dropped.
async fn listen(conn: Weak<SentinelConn>, client: redis::Client, master: String) {
    loop {
        let Some(timeout) = conn.upgrade().map(|c| c.config.connection_timeout()) else {
            return;
        };
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            redis::RedisResult::Ok(pubsub)
        };
        match tokio::time::timeout(timeout, subscribed).await {
            Ok(Ok(pubsub)) => {
                let mut messages = pubsub.into_on_message();
                while let Some(msg) = messages.next().await {
                    let Ok(payload) = msg.get_payload::<String>() else {
                        continue;
                    };
                    // `<master name> <old ip> <old port> <new ip> <new port>`
                    let parts: Vec<&str> = payload.split(' ').collect();
                    let [name, old_ip, old_port, new_ip, new_port] = parts[..] else {
                        continue;
                    };
                    if name != master {
                        continue;
                    }
                    let Some(c) = conn.upgrade() else { return };
                    tracing::info!(event = %payload, "sentinel: +switch-master");
                    let (old, new) = (
                        format!("{old_ip}:{old_port}"),
                        format!("{new_ip}:{new_port}"),
                    );
                    c.switched(&old, &new).await;
                }
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "sentinel: can't subscribe to +switch-master")
            }
            Err(_) => tracing::debug!("sentinel: subscribing to +switch-master timed out"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};

    use super::*;

    /// A connection that never connects: only its bookkeeping is exercised.
    fn conn(aware: bool) -> SentinelConn {
        let resolver = SentinelClientBuilder::new(
            [redis::ConnectionAddr::Tcp("127.0.0.1".into(), 1)],
            "mymaster",
            SentinelServerType::Master,
        )
        .unwrap()
        .build()
        .unwrap();
        SentinelConn {
            resolver: tokio::sync::Mutex::new(Resolver::new(
                resolver,
                Vec::new(),
                "mymaster",
                Duration::from_secs(1),
            )),
            current: parking_lot::RwLock::new(None),
            config: Config::sentinel(["redis://127.0.0.1:1/"], "mymaster"),
            stale: AtomicBool::new(true),
            changed: aware.then(|| Arc::new(Notify::new())),
            master_addr: parking_lot::Mutex::new(None),
            watchers: parking_lot::Mutex::new(Vec::new()),
            naming: Arc::new(Naming::new("test".into())),
        }
    }

    /// Whether the watchdog was told (consumes the notification).
    fn told(c: &SentinelConn) -> bool {
        let changed = c.topology_changed().unwrap();
        let told = changed.notified().now_or_never().is_some();
        told
    }

    #[test]
    fn a_different_master_after_an_error_wakes_the_watchdog() {
        let c = conn(true);
        // The first resolution and the same master again (a reconnect) are no failover.
        c.resolved("127.0.0.1:7000".into());
        assert!(!told(&c));
        c.resolved("127.0.0.1:7000".into());
        assert!(!told(&c));
        // A different master is one: the watchdog is told, once.
        c.resolved("127.0.0.1:7001".into());
        assert!(told(&c));
        assert!(!told(&c));
    }

    #[test]
    fn awareness_off_tells_nobody() {
        let c = conn(false);
        c.resolved("127.0.0.1:7000".into());
        c.resolved("127.0.0.1:7001".into());
        assert!(c.topology_changed().is_none());
    }
}
