//! Settings turned into redis-rs clients, in one pass: the one place that parses the
//! configuration's URLs, applies its TLS settings and credentials, and names connections.
//!
//! [`Endpoints::new`] parses every URL once, refuses what must be refused (the `#insecure`
//! fragment, TLS settings on `redis://`, `rediss://` without the `tls` feature), reads the
//! certificate files once and, for `rediss://` only, makes sure a rustls provider is installed
//! (`tls::provider`). Everything that connects (the command connection in `conn`, the
//! subscriber in `pubsub`, the operator CLI) asks it for clients; nothing else builds one.
//!
//! `mod.rs` the parsed endpoints and the standalone and cluster clients; `sentinel` the
//! sentinel client and the sentinels' credentials; `failure` the reading of a failed first
//! connection (a TLS error, or not).

use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::config::{redact, Config, SentinelAuth, Topology};
use crate::error::{LockError, Result};
use crate::tls::{Certs, Tls};

mod failure;
mod sentinel;

/// The parsed addresses of a deployment with the settings to reach them.
///
/// Public only for the operator CLI (its own per-node and push connections); not part of the
/// crate's API.
#[doc(hidden)]
#[derive(Clone)]
pub struct Endpoints {
    nodes: Nodes,
    tls: Tls,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    certs: Option<Certs>,
    /// `rediss://` (every URL agrees, or the configuration was refused).
    secure: bool,
    /// The first URL, password hidden, for messages.
    shown: String,
    connection_timeout: Duration,
    sentinel_auth: Option<SentinelAuth>,
}

#[derive(Clone)]
enum Nodes {
    Single(ConnectionInfo),
    Cluster(Vec<ConnectionInfo>),
    Sentinel {
        sentinels: Vec<ConnectionInfo>,
        master: String,
    },
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("first", &self.shown)
            .field("secure", &self.secure)
            .finish_non_exhaustive()
    }
}

impl Endpoints {
    /// Parses and checks every URL of `config` and reads its certificates.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidUrl`] for a URL that does not parse or that the TLS settings refuse,
    /// [`LockError::InvalidArgument`] for sentinel URLs that mix `redis://` and `rediss://`,
    /// [`LockError::Tls`] for an unreadable certificate or key.
    pub fn new(config: &Config) -> Result<Endpoints> {
        let tls = config.tls().clone();
        let parse = |urls: &[String]| -> Result<Vec<ConnectionInfo>> {
            urls.iter().map(|url| parse(url, &tls)).collect()
        };
        let nodes = match config.topology() {
            Topology::Single { url } => Nodes::Single(parse(std::slice::from_ref(url))?.remove(0)),
            Topology::Cluster { nodes } => Nodes::Cluster(parse(nodes)?),
            Topology::Sentinel { sentinels, master } => Nodes::Sentinel {
                sentinels: parse(sentinels)?,
                master: master.clone(),
            },
        };
        let infos = match &nodes {
            Nodes::Single(info) => std::slice::from_ref(info),
            Nodes::Cluster(infos)
            | Nodes::Sentinel {
                sentinels: infos, ..
            } => infos.as_slice(),
        };
        let secure = infos.first().is_some_and(is_tls);
        if infos.iter().any(|i| is_tls(i) != secure) {
            return Err(LockError::InvalidArgument(
                "the URLs mix redis:// and rediss://",
            ));
        }
        // Certificates and keys are read (and parsed) now: a bad file is an error before
        // anything connects, never a connection error retried in the background.
        let certs = tls.certificates()?;
        #[cfg(feature = "tls")]
        if secure {
            crate::tls::provider::ensure_installed();
        }
        Ok(Endpoints {
            nodes,
            tls,
            certs,
            secure,
            shown: redact(config.url()),
            connection_timeout: config.connection_timeout(),
            sentinel_auth: config.sentinel_auth().cloned(),
        })
    }

    /// The standalone server's client (outside standalone mode: the first URL's).
    ///
    /// # Errors
    ///
    /// [`LockError::Tls`] for certificates redis-rs cannot use.
    pub fn client(&self) -> Result<redis::Client> {
        let info = match &self.nodes {
            Nodes::Single(info) => info,
            Nodes::Cluster(infos)
            | Nodes::Sentinel {
                sentinels: infos, ..
            } => infos
                .first()
                .ok_or(LockError::InvalidArgument("no URL in the configuration"))?,
        };
        self.client_at(info.clone())
    }

    /// A client for other settings (a cluster node's address with the seed's credentials, as
    /// the CLI opens), with this deployment's TLS settings.
    ///
    /// # Errors
    ///
    /// As [`Endpoints::new`].
    pub fn client_for(&self, info: impl IntoConnectionInfo) -> Result<redis::Client> {
        let info = info
            .into_connection_info()
            .map_err(|e| LockError::InvalidUrl {
                url: String::from("(redis-rs connection settings)"),
                reason: e.to_string(),
            })?;
        let shown = match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                format!("{host}:{port}")
            }
            other => other.to_string(),
        };
        let info = check(info, &shown, &self.tls)?;
        self.client_at(info)
    }

    /// A client for one cluster node at `host:port` (an address from the cluster's slot map),
    /// with the first seed's credentials and this deployment's TLS settings.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] outside cluster mode; as [`Endpoints::new`].
    pub(crate) fn cluster_node_client(&self, host: &str, port: u16) -> Result<redis::Client> {
        let Nodes::Cluster(infos) = &self.nodes else {
            return Err(LockError::InvalidArgument(
                "a cluster node client needs a cluster configuration",
            ));
        };
        let seed = infos
            .first()
            .ok_or(LockError::InvalidArgument("no URL in the configuration"))?;
        let host = host.to_owned();
        let addr = match seed.addr() {
            ConnectionAddr::TcpTls { .. } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        self.client_at(seed.clone().set_addr(addr))
    }

    /// A client for `info` (checked), TLS applied.
    fn client_at(&self, info: ConnectionInfo) -> Result<redis::Client> {
        if !is_tls(&info) {
            return Ok(redis::Client::open(info)?);
        }
        self.tls_client(info)
    }

    #[cfg(feature = "tls")]
    fn tls_client(&self, mut info: ConnectionInfo) -> Result<redis::Client> {
        crate::tls::provider::ensure_installed();
        if let ConnectionAddr::TcpTls { host, port, .. } = info.addr().clone() {
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: self.tls.is_insecure(),
                tls_params: None,
            });
        }
        match &self.certs {
            // Redis-rs parses the PEM here: a bad one is a clear TLS error.
            Some(certs) => {
                redis::Client::build_with_tls(info, certs.for_redis()).map_err(|e| LockError::Tls {
                    url: self.shown.clone(),
                    reason: format!("bad TLS certificate or key: {e}"),
                })
            }
            None => Ok(redis::Client::open(info)?),
        }
    }

    #[cfg(not(feature = "tls"))]
    fn tls_client(&self, info: ConnectionInfo) -> Result<redis::Client> {
        // `check` refuses rediss:// without the feature; never reached.
        Ok(redis::Client::open(info)?)
    }

    /// A cluster client builder for the seed nodes, with the TLS settings and the connection
    /// timeout applied.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] outside cluster mode.
    pub fn cluster_builder(&self) -> Result<redis::cluster::ClusterClientBuilder> {
        let Nodes::Cluster(infos) = &self.nodes else {
            return Err(LockError::InvalidArgument(
                "a cluster client needs a cluster configuration",
            ));
        };
        #[allow(unused_mut)]
        let mut builder = redis::cluster::ClusterClientBuilder::new(infos.clone())
            .connection_timeout(self.connection_timeout);
        #[cfg(feature = "tls")]
        if self.secure {
            crate::tls::provider::ensure_installed();
            if self.tls.is_insecure() {
                builder = builder.tls(redis::TlsMode::Insecure);
            }
            if let Some(certs) = &self.certs {
                builder = builder.certs(certs.for_redis());
            }
        }
        Ok(builder)
    }
}

/// Parses `url` for a client with these TLS settings (see [`check`]).
fn parse(url: &str, tls: &Tls) -> Result<ConnectionInfo> {
    let info = url
        .into_connection_info()
        .map_err(|e| LockError::InvalidUrl {
            url: redact(url),
            reason: e.to_string(),
        })?;
    check(info, &redact(url), tls)
}

/// Refuses the `#insecure` fragment, TLS settings on a plain `redis://` URL, and `rediss://` in
/// a build without the `tls` feature; `shown`: the address for messages.
fn check(info: ConnectionInfo, shown: &str, tls: &Tls) -> Result<ConnectionInfo> {
    let bad = |reason: &str| LockError::InvalidUrl {
        url: shown.to_owned(),
        reason: reason.to_owned(),
    };
    match info.addr() {
        ConnectionAddr::TcpTls { insecure: true, .. } => Err(bad(
            "the #insecure fragment is not accepted: use \
             Tls::insecure_skip_verification_for_tests_only (test set-ups only)",
        )),
        ConnectionAddr::TcpTls { .. } if cfg!(not(feature = "tls")) => Err(bad(
            "rediss:// needs the crate's `tls` feature (on by default)",
        )),
        ConnectionAddr::Tcp(..) | ConnectionAddr::Unix(_) if tls.is_set() => Err(bad(
            "TLS settings were given but this URL is not rediss:// (plain text would ignore them)",
        )),
        _ => Ok(info),
    }
}

/// Whether the URL asks for TLS (`rediss://`).
fn is_tls(info: &ConnectionInfo) -> bool {
    matches!(info.addr(), ConnectionAddr::TcpTls { .. })
}
