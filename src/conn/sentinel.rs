//! The command connection through Sentinel: the master is resolved by asking the sentinels,
//! and again after a connection error or a `READONLY`/`MASTERDOWN` reply (a failover).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::sentinel::SentinelClient;
use redis::{Cmd, RedisError, RedisResult, Value};

use super::open::manager;
use crate::config::Config;
use crate::error::LockError;

/// A master found through Sentinel, re-resolved after connection errors or `READONLY` replies
/// (the old master was demoted).
pub(crate) struct SentinelConn {
    pub(super) resolver: tokio::sync::Mutex<SentinelClient>,
    pub(super) current: parking_lot::RwLock<Option<ConnectionManager>>,
    pub(super) config: Config,
    pub(super) stale: AtomicBool,
}

impl SentinelConn {
    /// The current master's `redis::Client`, asking the sentinels.
    pub(crate) async fn master_client(&self) -> RedisResult<redis::Client> {
        self.resolver.lock().await.async_get_client().await
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
        let client = resolver.async_get_client().await?;
        let m = manager(client, &self.config).await.map_err(|e| match e {
            LockError::Redis(e) => e,
            other => RedisError::from(std::io::Error::other(other.to_string())),
        })?;
        *self.current.write() = Some(m.clone());
        self.stale.store(false, Ordering::Release);
        Ok(m)
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
