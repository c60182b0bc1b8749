//! The deployment the CLI talks to: a connected [`Client`] (whose command connection follows
//! the topology) plus what the crate does not route for us: one connection per cluster node (for
//! `SCAN` and `PUBSUB NUMSUB`, which are node-local) and a push connection for `watch`.

use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion, PushInfo};
use redisson_lock::{Client, Config, Connection, Endpoints};
use tokio::sync::mpsc::UnboundedSender;

use crate::server::{self, Server};
use crate::{Failure, Global, Result};

/// A cluster node as `CLUSTER NODES` describes it.
#[derive(Clone, Debug)]
pub struct Node {
    pub host: String,
    pub port: u16,
    pub master: bool,
}

/// A connected deployment.
pub struct Target {
    pub client: Client,
    config: Config,
    /// The server read at connect, named in every output.
    pub server: Server,
}

impl Target {
    /// Connects as the flags say; a failure names the (redacted) URL.
    /// `read_only`: the command only reads (`Config::with_read_only`); `default_url`: the URL
    /// is the built-in default (said in the output and in a failure).
    pub async fn connect(global: &Global, read_only: bool, default_url: bool) -> Result<Target> {
        let password = password(global)?;
        // The password joins the user the URL names (`redis://ops@host` authenticates as
        // `ops`); a URL with a password of its own beside a second source is refused.
        let with_password = |url: &String| match &password {
            Some(p) => redisson_lock::url_with_password(url, p).map_err(Failure),
            None => Ok(url.clone()),
        };
        let urls = |urls: &[String]| urls.iter().map(with_password).collect::<Result<Vec<_>>>();
        let config = if !global.cluster.is_empty() {
            Config::cluster(urls(&global.cluster)?)
        } else if !global.sentinel.is_empty() {
            let master = global.master.clone().unwrap_or_default();
            Config::sentinel(urls(&global.sentinel)?, master)
        } else {
            let url = match &global.url_file {
                Some(file) => first_line(file, "URL")?,
                None => global.url.clone(),
            };
            Config::new(with_password(&url)?)
        };
        let config = match global.watchdog_timeout {
            Some(lease) => config.with_watchdog_timeout(lease),
            None => config,
        };
        let config = match tls(global) {
            Some(tls) => config.with_tls(tls),
            None => config,
        }
        .with_read_only(read_only);
        match Client::with_config(config.clone()).await {
            Ok(client) => {
                let url = redact(config.url());
                tracing::info!(%url, topology = topology_name(&config), "connected");
                let master = global
                    .master
                    .clone()
                    .filter(|_| !global.sentinel.is_empty());
                let seeds = if global.cluster.is_empty() {
                    &global.sentinel
                } else {
                    &global.cluster
                };
                let url = if seeds.is_empty() {
                    url
                } else {
                    seeds
                        .iter()
                        .map(|u| redact(u))
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let server = Server::new(topology_name(&config), url, default_url, master, vec![]);
                let mut target = Target {
                    client,
                    config,
                    server,
                };
                target.server = target.read_server().await;
                Ok(target)
            }
            Err(e) => Err(Failure(format!(
                "cannot connect to {}{}: {e}",
                redact(config.url()),
                if default_url {
                    format!(" ({})", server::DEFAULT_NOTE)
                } else {
                    String::new()
                }
            ))),
        }
    }

    /// The server (each master of a cluster) as it is now: address, role, name and version.
    /// Never fails: what cannot be read is said in the description.
    pub async fn read_server(&self) -> Server {
        let mut nodes = Vec::new();
        match self.config.topology() {
            redisson_lock::Topology::Cluster { .. } => {
                match self.node_conns_with_addr(true).await {
                    Ok(conns) => {
                        for (addr, mut conn) in conns {
                            nodes.push(server::read(&mut conn, addr).await);
                        }
                    }
                    Err(e) => nodes.push(server::Node {
                        error: Some(format!("CLUSTER NODES refused: {}", e.0)),
                        ..server::Node::default()
                    }),
                }
            }
            redisson_lock::Topology::Sentinel { .. } => {
                let addr = match self.sentinel_master().await {
                    Ok(addr) => addr,
                    Err(e) => format!("the master the sentinels name ({})", e.0),
                };
                nodes.push(server::read(&mut self.conn(), addr).await);
            }
            _ => {
                let addr = self
                    .config
                    .url()
                    .into_connection_info()
                    .map(|i| i.addr().to_string())
                    .unwrap_or_else(|_| redact(self.config.url()));
                nodes.push(server::read(&mut self.conn(), addr).await);
            }
        }
        Server::new(
            self.server.topology,
            self.server.url.clone(),
            self.server.default_url,
            self.server.master_name.clone(),
            nodes,
        )
    }

    /// The address of the master the sentinels name now.
    async fn sentinel_master(&self) -> Result<String> {
        let mut resolver = Endpoints::new(&self.config)?.sentinel_client().await?;
        let client = resolver.async_get_client().await?;
        Ok(client.get_connection_info().addr().to_string())
    }

    /// A command connection routed by the crate (by key slot on a cluster).
    pub fn conn(&self) -> Connection {
        self.client.connection()
    }

    pub fn is_cluster(&self) -> bool {
        matches!(
            self.config.topology(),
            redisson_lock::Topology::Cluster { .. }
        )
    }

    /// One direct connection per reachable cluster node (`masters_only`: masters only); an
    /// empty list outside a cluster.
    pub async fn node_conns(&self, masters_only: bool) -> Result<Vec<MultiplexedConnection>> {
        Ok(self
            .node_conns_with_addr(masters_only)
            .await?
            .into_iter()
            .map(|(_, c)| c)
            .collect())
    }

    /// As [`node_conns`](Target::node_conns), each with the node's `host:port`.
    pub async fn node_conns_with_addr(
        &self,
        masters_only: bool,
    ) -> Result<Vec<(String, MultiplexedConnection)>> {
        if !self.is_cluster() {
            return Ok(Vec::new());
        }
        let mut conns = Vec::new();
        for node in self.nodes().await? {
            if masters_only && !node.master {
                continue;
            }
            let client =
                Endpoints::new(&self.config)?.client_for(self.node_info(&node.host, node.port)?)?;
            let conn = tokio::time::timeout(
                self.config.connection_timeout(),
                client.get_multiplexed_async_connection(),
            )
            .await
            .map_err(|_| {
                Failure(format!(
                    "timed out connecting to {}:{}",
                    node.host, node.port
                ))
            })??;
            // Named as the CLI's client names its own: `list --orphans` counts the connections
            // that carry no client uuid, and must not count its own (refused: left unnamed).
            let mut conn = conn;
            let name = format!("redisson-lock-cli:{}", self.client.id());
            let _: redis::RedisResult<()> = redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(name)
                .query_async(&mut conn)
                .await;
            conns.push((format!("{}:{}", node.host, node.port), conn));
        }
        Ok(conns)
    }

    /// The cluster's nodes, from `CLUSTER NODES` (failed and address-less nodes left out).
    async fn nodes(&self) -> Result<Vec<Node>> {
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut self.conn())
            .await?;
        Ok(parse_cluster_nodes(&text))
    }

    /// The seed's connection settings (credentials, TLS, protocol) pointed at `host:port`.
    fn node_info(&self, host: &str, port: u16) -> Result<ConnectionInfo> {
        let info = self.config.url().into_connection_info()?;
        let addr = match info.addr().clone() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure,
                tls_params,
            },
            _ => ConnectionAddr::Tcp(host.to_owned(), port),
        };
        Ok(info.set_addr(addr))
    }

    /// A RESP3 connection whose pushes (pub/sub messages) go to `tx`: a cluster connection on a
    /// cluster, else a connection to the (current) master.
    pub async fn push_conn(&self, tx: UnboundedSender<PushInfo>) -> Result<PushConn> {
        use redisson_lock::Topology;
        match self.config.topology() {
            Topology::Cluster { .. } => {
                let client = Endpoints::new(&self.config)?
                    .cluster_builder()?
                    .use_protocol(ProtocolVersion::RESP3)
                    .push_sender(tx)
                    .build()?;
                Ok(PushConn::Cluster(client.get_async_connection().await?))
            }
            Topology::Sentinel { .. } => {
                let mut resolver = Endpoints::new(&self.config)?.sentinel_client().await?;
                let client = resolver.async_get_client().await?;
                single_push_conn(client.get_connection_info().clone(), tx).await
            }
            Topology::Single { .. } => {
                let info = Endpoints::new(&self.config)?.client()?;
                single_push_conn(info.get_connection_info().clone(), tx).await
            }
            _ => Err(Failure("unsupported topology".into())),
        }
    }
}

fn topology_name(config: &Config) -> &'static str {
    match config.topology() {
        redisson_lock::Topology::Cluster { .. } => "cluster",
        redisson_lock::Topology::Sentinel { .. } => "sentinel",
        _ => "standalone",
    }
}

/// The password from `--password-file` or `$REDIS_PASSWORD` (`None`: neither).
fn password(global: &Global) -> Result<Option<String>> {
    match &global.password_file {
        Some(file) => first_line(file, "password").map(Some),
        None => Ok(global.password.clone().filter(|p| !p.is_empty())),
    }
}

/// The first line of a credentials file, trimmed; a clear error when it cannot be read or is
/// empty (never its content).
fn first_line(file: &std::path::Path, what: &str) -> Result<String> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        Failure(format!(
            "cannot read the {what} file {}: {e}",
            file.display()
        ))
    })?;
    let line = text.lines().next().unwrap_or("").trim().to_owned();
    if line.is_empty() {
        return Err(Failure(format!(
            "the {what} file {} is empty",
            file.display()
        )));
    }
    Ok(line)
}

/// The TLS flags as crate settings (`None`: no flag given).
fn tls(global: &Global) -> Option<redisson_lock::Tls> {
    let mut tls = redisson_lock::Tls::new();
    let mut set = false;
    if let Some(ca) = &global.tls_ca {
        tls = tls.with_ca_file(ca);
        set = true;
    }
    if let (Some(cert), Some(key)) = (&global.tls_cert, &global.tls_key) {
        tls = tls.with_client_cert_files(cert, key);
        set = true;
    }
    #[cfg(feature = "tls-insecure")]
    if global.insecure_skip_tls_verify {
        tls = tls.insecure_skip_verification_for_tests_only();
        set = true;
    }
    set.then_some(tls)
}

/// A connection with the connection settings (TLS parameters included) of `info`.
async fn single_push_conn(info: ConnectionInfo, tx: UnboundedSender<PushInfo>) -> Result<PushConn> {
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    let client = redis::Client::open(info.set_redis_settings(settings))?;
    let config = redis::AsyncConnectionConfig::new().set_push_sender(tx);
    let conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    Ok(PushConn::Single(conn))
}

/// A subscriber connection of either shape.
pub enum PushConn {
    Single(MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl PushConn {
    pub async fn subscribe(&mut self, channel: &str, sharded: bool) -> Result<()> {
        match self {
            PushConn::Single(c) => c.subscribe(channel).await?,
            PushConn::Cluster(c) if sharded => c.ssubscribe(channel).await?,
            PushConn::Cluster(c) => c.subscribe(channel).await?,
        }
        Ok(())
    }

    pub async fn psubscribe(&mut self, pattern: &str) -> Result<()> {
        match self {
            PushConn::Single(c) => c.psubscribe(pattern).await?,
            PushConn::Cluster(c) => c.psubscribe(pattern).await?,
        }
        Ok(())
    }
}

/// Nodes of a `CLUSTER NODES` reply: `<id> <ip:port@cport[,host]> <flags> ...`.
pub fn parse_cluster_nodes(text: &str) -> Vec<Node> {
    let mut nodes = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
            continue;
        };
        if flags.contains("fail") || flags.contains("noaddr") || flags.contains("handshake") {
            continue;
        }
        let hostport = addr.split('@').next().unwrap_or("");
        let Some((host, port)) = hostport.rsplit_once(':') else {
            continue;
        };
        let Ok(port) = port.parse::<u16>() else {
            continue;
        };
        if host.is_empty() || port == 0 {
            continue;
        }
        nodes.push(Node {
            host: host.to_owned(),
            port,
            master: flags.split(',').any(|f| f == "master"),
        });
    }
    nodes
}

/// `url` with its user and password replaced by `***` (the crate's own rule).
pub fn redact(url: &str) -> String {
    redisson_lock::redact_url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_parse() {
        let text = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1 4 connected
67ed 127.0.0.1:30002@40002,host-b master - 0 1 2 connected 5461-10922
e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460
292f :0@0 master,fail,noaddr - 1 1 3 disconnected
";
        let nodes = parse_cluster_nodes(text);
        assert_eq!(nodes.len(), 3, "{nodes:?}");
        assert_eq!((nodes[0].port, nodes[0].master), (30004, false));
        assert_eq!(
            (nodes[1].host.as_str(), nodes[1].port),
            ("127.0.0.1", 30002)
        );
        assert!(nodes[1].master && nodes[2].master);
    }
}
