//! Opening the command connection from the endpoints (`endpoints::Endpoints`), in one pass:
//! the standalone connection manager, the cluster connection (also the subscriber's, with
//! pushes) and its slot map's watch, or the sentinel resolver and the master it names.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;

use super::batch::Batcher;
use super::cluster_route::Router;
use super::cluster_watch::ClusterWatch;
use super::naming::Naming;
use super::replicas::{Refusals, ReplicaCounts};
use super::sentinel_resolve::Resolver;
use super::{Conn, Kind, SentinelConn};
use crate::config::{Config, Topology};
use crate::endpoints::Endpoints;
use crate::error::LockError;

impl Conn {
    /// Connects according to the configured topology; `name`: the connections' name
    /// (`conn/naming.rs`). The first connection fails fast.
    pub(crate) async fn connect(
        endpoints: &Endpoints,
        config: &Config,
        name: String,
    ) -> Result<Conn, LockError> {
        let server = match config.topology() {
            Topology::Single { url } => Some(url.clone()),
            _ => None,
        };
        let naming = Arc::new(Naming::new(name).at(server));
        let kind = match config.topology() {
            Topology::Single { .. } => {
                Kind::Single(manager(endpoints.client()?, config, &naming).await?)
            }
            Topology::Cluster { .. } => {
                let fallback = cluster_connection(endpoints, config, None).await?;
                let router = Router::new(
                    endpoints,
                    fallback,
                    node_config(config),
                    reply_timeout(config),
                    naming.clone(),
                )
                .await;
                Kind::Cluster(Arc::new(router))
            }
            Topology::Sentinel { master, .. } => {
                let (resolver, sentinels) = endpoints.sentinel_parts().await?;
                let aware = config.failover_awareness();
                let timeout = config.connection_timeout();
                let resolver = Resolver::new(resolver, sentinels.clone(), master, timeout);
                let conn = Arc::new(SentinelConn {
                    resolver: tokio::sync::Mutex::new(resolver),
                    current: parking_lot::RwLock::new(None),
                    config: config.clone(),
                    stale: AtomicBool::new(true),
                    changed: aware.then(|| Arc::new(tokio::sync::Notify::new())),
                    master_addr: parking_lot::Mutex::new(None),
                    watchers: parking_lot::Mutex::new(Vec::new()),
                    naming: naming.clone(),
                });
                conn.manager().await?;
                // The client follows `+switch-master` whatever the awareness: after a
                // `SENTINEL FAILOVER` the old master stays writable until the sentinels convert
                // it (their next look at it, up to 10 s), and a client still on it takes locks
                // there while Redisson, which follows the announcement, takes them on the new
                // master (both held one lock in a failover round). Awareness adds the
                // re-verification of the holds.
                conn.watch(sentinels, master);
                Kind::Sentinel(conn)
            }
        };
        let sync = config.replica_sync().map(|timeout| {
            Arc::new(ReplicaCounts {
                timeout,
                replicas: DashMap::new(),
            })
        });
        let router = match &kind {
            Kind::Cluster(r) => Some(r.clone()),
            _ => None,
        };
        let cluster_watch = (router.clone())
            .filter(|_| config.failover_awareness())
            .map(|r| Arc::new(ClusterWatch::start(r)));
        let mut conn = Conn {
            kind,
            sync,
            refusals: Arc::new(Refusals::new(config.replica_sync_policy())),
            aof: config.aof_sync(),
            synced: false,
            shortfall: None,
            batch: None,
            naming,
            cluster_watch,
        };
        if config.batching() {
            conn.batch = Some(Batcher::new(conn.clone(), router));
        }
        Ok(conn)
    }
}

/// A script followed by `WAIT` may take the replica sync timeout on top of the reply timeout.
fn reply_timeout(config: &Config) -> Duration {
    config.response_timeout() + config.replica_sync().unwrap_or(Duration::ZERO)
}

/// The settings of a connection manager: standalone, the master a sentinel named, or one
/// cluster master (`conn/cluster_route.rs`).
fn node_config(config: &Config) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(reply_timeout(config)))
        .set_connection_timeout(Some(config.connection_timeout()))
        // One quick reconnect after a dropped connection; the crate's own `Retry` makes the
        // tries `Config::with_retry_attempts` counts. The manager retried as many times again
        // inside each of them: a call on a dead server took 16 connection attempts and about
        // 15 s to fail instead of 4 and about 1 s.
        .set_number_of_retries(1)
        .set_min_delay(config.retry_delay())
        .set_max_delay(crate::config::MAX_RETRY_DELAY)
}

/// A connection manager for `client` (standalone, or the master a sentinel named).
pub(super) async fn manager(
    client: redis::Client,
    config: &Config,
    naming: &Naming,
) -> Result<ConnectionManager, LockError> {
    let manager_config = node_config(config);
    // The first connection fails fast: one connection timeout at most, no retries. Named
    // before it goes (`Naming::probe`).
    let mut first = tokio::time::timeout(
        config.connection_timeout(),
        client.get_multiplexed_async_connection(),
    )
    .await
    .map_err(|_| LockError::Timeout {
        what: "connecting to Redis",
        waited: config.connection_timeout(),
    })??;
    naming.probe(&mut first).await;
    drop(first);
    Ok(ConnectionManager::new_with_config(client, manager_config).await?)
}

/// A cluster connection. `push`: where RESP3 pushes go (the subscriber's connection).
///
/// Commands are never retried by redis-rs (`retries(0)`): a retried acquire script could count
/// a re-entry twice. Redirections (`MOVED`/`ASK`) reach the lock code, which retries them itself
/// because a redirected command did not run.
pub(crate) async fn cluster_connection(
    endpoints: &Endpoints,
    config: &Config,
    push: Option<tokio::sync::mpsc::UnboundedSender<redis::PushInfo>>,
) -> Result<ClusterConnection, LockError> {
    let mut builder = endpoints
        .cluster_builder()?
        .response_timeout(reply_timeout(config))
        .retries(0);
    if let Some(tx) = push {
        builder = builder
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(tx);
    }
    let client = builder.build()?;
    let conn = tokio::time::timeout(config.connection_timeout(), client.get_async_connection())
        .await
        .map_err(|_| LockError::Timeout {
            what: "connecting to the Redis cluster",
            waited: config.connection_timeout(),
        })??;
    Ok(conn)
}
