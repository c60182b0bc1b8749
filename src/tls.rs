//! TLS settings ([`Tls`]) and how they turn a URL into a redis-rs client: a custom CA, a client
//! certificate (mutual TLS), and the loudly named switch that skips verification.
//!
//! Trust: without a CA of its own, a `rediss://` connection trusts the operating system's CA
//! store (rustls' native roots), as Java's Redisson trusts the JVM's: a corporate CA installed
//! on the host works, and the OS keeps the list current. The `tls-webpki-roots` feature trusts
//! Mozilla's list compiled into the binary instead, for images without a CA bundle. A CA given
//! here *replaces* both (the usual case for managed services that issue their own CA).

use std::fmt;
use std::path::PathBuf;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::error::LockError;

/// `url` with any password replaced by `***`, for messages and `Debug`.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_owned(),
    }
}

/// PEM data, given inline or as a file read at connect.
#[derive(Clone)]
enum Pem {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl Pem {
    fn read(&self, what: &str) -> Result<Vec<u8>, LockError> {
        match self {
            Pem::Bytes(b) => Ok(b.clone()),
            Pem::File(path) => std::fs::read(path).map_err(|e| LockError::Tls {
                url: String::new(),
                reason: format!("cannot read the {what} file {}: {e}", path.display()),
            }),
        }
    }
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(path) => write!(f, "File({})", path.display()),
            // Never the bytes: a private key may be among them.
            Pem::Bytes(b) => write!(f, "Bytes(<{} bytes>)", b.len()),
        }
    }
}

/// TLS settings for `rediss://` URLs, given to [`Config::with_tls`](crate::Config::with_tls).
///
/// Every connection the client opens (commands, the pub/sub subscriber, cluster nodes, the
/// sentinels and the master they name) uses them. A `rediss://` URL needs no settings at all
/// when the server's certificate chains to a CA the host trusts (see the module notes in the
/// README, "Connecting in production").
///
/// ```
/// use redisson_lock::{Config, Tls};
/// let config = Config::new("rediss://redis.internal:6380/")
///     .with_tls(Tls::new().with_ca_file("/etc/redis/ca.pem"));
/// ```
///
/// Files are read when the client connects; an unreadable file or bad PEM is a
/// [`LockError::Tls`] from [`Client::with_config`](crate::Client::with_config).
#[derive(Clone, Debug, Default)]
pub struct Tls {
    ca: Option<Pem>,
    client: Option<(Pem, Pem)>,
    insecure: bool,
}

impl Tls {
    /// No CA of its own (the host's trusted CAs), no client certificate, verification on.
    pub fn new() -> Tls {
        Tls::default()
    }

    /// Trust only the CA certificates in this PEM file (one or more certificates).
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Tls {
        self.ca = Some(Pem::File(path.into()));
        self
    }

    /// Trust only the CA certificates in this PEM data.
    pub fn with_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Tls {
        self.ca = Some(Pem::Bytes(pem.into()));
        self
    }

    /// Present this client certificate (PEM chain) and private key (PEM) to the server: mutual
    /// TLS, for servers started with `tls-auth-clients yes`.
    pub fn with_client_cert_files(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Tls {
        self.client = Some((Pem::File(cert.into()), Pem::File(key.into())));
        self
    }

    /// [`with_client_cert_files`](Tls::with_client_cert_files) with the PEM data itself.
    pub fn with_client_cert_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Tls {
        self.client = Some((Pem::Bytes(cert.into()), Pem::Bytes(key.into())));
        self
    }

    /// **Insecure: test set-ups only.** Accepts any server certificate: no CA check, no host
    /// name check, no expiry check. Anyone on the path can read and change the traffic,
    /// passwords included. Meant for a throwaway server with a self-signed certificate; never
    /// for production. (redis-rs' `#insecure` URL fragment is refused in favour of this switch,
    /// so that skipping verification is always spelled out in code.)
    pub fn insecure_skip_verification_for_tests_only(mut self) -> Tls {
        self.insecure = true;
        self
    }

    /// Whether [`insecure_skip_verification_for_tests_only`] was called.
    ///
    /// [`insecure_skip_verification_for_tests_only`]: Tls::insecure_skip_verification_for_tests_only
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// Whether anything differs from [`Tls::new`].
    pub(crate) fn is_set(&self) -> bool {
        self.ca.is_some() || self.client.is_some() || self.insecure
    }

    /// Reads the files: the certificates for redis-rs, `None` when none are given.
    pub(crate) fn certificates(&self) -> Result<Option<Certs>, LockError> {
        if self.ca.is_none() && self.client.is_none() {
            return Ok(None);
        }
        let root = match &self.ca {
            Some(ca) => Some(ca.read("CA certificate")?),
            None => None,
        };
        let client = match &self.client {
            Some((cert, key)) => Some((cert.read("client certificate")?, key.read("client key")?)),
            None => None,
        };
        Ok(Some(Certs { root, client }))
    }
}

/// PEM data read from a [`Tls`], ready for redis-rs.
#[derive(Clone)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) struct Certs {
    root: Option<Vec<u8>>,
    client: Option<(Vec<u8>, Vec<u8>)>,
}

/// Parses `url` for a client with these TLS settings: refuses the `#insecure` fragment, TLS
/// settings on a plain `redis://` URL, and `rediss://` in a build without the `tls` feature.
pub(crate) fn connection_info(url: &str, tls: &Tls) -> Result<ConnectionInfo, LockError> {
    let info = url
        .into_connection_info()
        .map_err(|e| LockError::InvalidUrl {
            url: redact(url),
            reason: e.to_string(),
        })?;
    check(info, &redact(url), tls)
}

/// [`connection_info`] for parsed settings; `shown`: the address for messages.
pub(crate) fn check(
    info: ConnectionInfo,
    shown: &str,
    tls: &Tls,
) -> Result<ConnectionInfo, LockError> {
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
pub(crate) fn is_tls(info: &ConnectionInfo) -> bool {
    matches!(info.addr(), ConnectionAddr::TcpTls { .. })
}

/// A redis-rs client for `info` (from [`connection_info`]) with the TLS settings applied.
pub(crate) fn client(info: ConnectionInfo, tls: &Tls) -> Result<redis::Client, LockError> {
    if !is_tls(&info) {
        return Ok(redis::Client::open(info)?);
    }
    imp::client(info, tls)
}

#[cfg(feature = "tls")]
mod imp {
    use super::*;
    use redis::{ClientTlsConfig, TlsCertificates, TlsMode};

    /// rustls needs a crypto provider: the application's if it installed one, else ring.
    pub(crate) fn ensure_provider() {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race to another installer is fine: a provider is installed either way.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    }

    pub(crate) fn certificates(certs: Certs) -> TlsCertificates {
        TlsCertificates {
            client_tls: certs
                .client
                .map(|(client_cert, client_key)| ClientTlsConfig {
                    client_cert,
                    client_key,
                }),
            root_cert: certs.root,
        }
    }

    /// Redis-rs parses the PEM here: a bad one is a clear TLS error, not a connection error.
    fn pem_error(e: redis::RedisError) -> LockError {
        LockError::Tls {
            url: String::new(),
            reason: format!("bad TLS certificate or key: {e}"),
        }
    }

    pub(super) fn client(mut info: ConnectionInfo, tls: &Tls) -> Result<redis::Client, LockError> {
        ensure_provider();
        if let ConnectionAddr::TcpTls { host, port, .. } = info.addr().clone() {
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: tls.insecure,
                tls_params: None,
            });
        }
        match tls.certificates()? {
            Some(certs) => {
                redis::Client::build_with_tls(info, certificates(certs)).map_err(pem_error)
            }
            None => Ok(redis::Client::open(info)?),
        }
    }

    /// Applies the settings to a cluster client builder (seeds already parsed).
    pub(crate) fn cluster(
        mut builder: redis::cluster::ClusterClientBuilder,
        tls: &Tls,
    ) -> Result<redis::cluster::ClusterClientBuilder, LockError> {
        ensure_provider();
        if tls.insecure {
            builder = builder.tls(TlsMode::Insecure);
        }
        if let Some(certs) = tls.certificates()? {
            builder = builder.certs(certificates(certs));
        }
        Ok(builder)
    }

    pub(crate) fn mode(tls: &Tls) -> TlsMode {
        if tls.insecure {
            TlsMode::Insecure
        } else {
            TlsMode::Secure
        }
    }
}

#[cfg(not(feature = "tls"))]
mod imp {
    use super::*;

    pub(super) fn client(info: ConnectionInfo, _tls: &Tls) -> Result<redis::Client, LockError> {
        Ok(redis::Client::open(info)?)
    }

    pub(crate) fn cluster(
        builder: redis::cluster::ClusterClientBuilder,
        _tls: &Tls,
    ) -> Result<redis::cluster::ClusterClientBuilder, LockError> {
        Ok(builder)
    }
}

pub(crate) use imp::cluster;

/// A sentinel client: the sentinels and the master they name are reached with the scheme,
/// credentials and TLS settings of the sentinel URLs (as Redisson uses one password for both
/// unless told otherwise).
pub(crate) fn sentinel_client(
    sentinels: &[String],
    master: &str,
    tls: &Tls,
) -> Result<redis::sentinel::SentinelClient, LockError> {
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
    let infos = sentinels
        .iter()
        .map(|url| connection_info(url, tls))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = infos.first() else {
        return Err(LockError::InvalidArgument(
            "sentinel mode needs at least one sentinel",
        ));
    };
    let secure = is_tls(first);
    if infos.iter().any(|i| is_tls(i) != secure) {
        return Err(LockError::InvalidArgument(
            "the sentinel URLs mix redis:// and rediss://",
        ));
    }
    let settings = first.redis_settings().clone();
    let mut builder = SentinelClientBuilder::new(
        infos.iter().map(|i| i.addr().clone()),
        master,
        SentinelServerType::Master,
    )?
    .set_client_to_redis_db(settings.db());
    if let Some(user) = settings.username() {
        builder = builder
            .set_client_to_redis_username(user)
            .set_client_to_sentinel_username(user);
    }
    if let Some(password) = settings.password() {
        builder = builder
            .set_client_to_redis_password(password)
            .set_client_to_sentinel_password(password);
    }
    #[cfg(feature = "tls")]
    if secure {
        imp::ensure_provider();
        let mode = imp::mode(tls);
        builder = builder
            .set_client_to_redis_tls_mode(mode)
            .set_client_to_sentinel_tls_mode(mode);
        if let Some(certs) = tls.certificates()? {
            let certs = imp::certificates(certs);
            builder = builder
                .set_client_to_redis_certificates(certs.clone())
                .set_client_to_sentinel_certificates(certs);
        }
    }
    Ok(builder.build()?)
}

/// Turns a failed first connection into a clear error: [`LockError::Tls`] when TLS is the
/// cause (a certificate refused either way, a server that does not speak TLS on a `rediss://`
/// URL, a TLS-only port behind `redis://`), with the (redacted) URL. Other errors pass as they
/// are. Never retries: it only reads the error (and, after a timeout on `rediss://`, tries a
/// bare TCP connect to tell "unreachable" from "no TLS here").
pub(crate) async fn connect_error(e: LockError, url: &str, settings: &Tls) -> LockError {
    let shown = redact(url);
    let secure = connection_info(url, settings)
        .map(|i| is_tls(&i))
        .unwrap_or(false);
    let tls = |reason: String| LockError::Tls {
        url: shown.clone(),
        reason,
    };
    match e {
        LockError::Tls { url: u, reason } if u.is_empty() => tls(reason),
        LockError::Redis(e) => {
            let text = e.to_string();
            let tls_words = [
                "certificate",
                "fatal alert",
                "corrupt message",
                "InvalidContentType",
                "handshake",
                "peer ",
            ];
            if secure && tls_words.iter().any(|w| text.contains(w)) {
                tls(text)
            } else if secure
                && crate::error::is_connection_error(&e)
                && listening(url, settings).await
            {
                tls(format!(
                    "no TLS session could be set up ({text}): does this port speak TLS? \
                     (a plain-text server behind rediss://?)"
                ))
            } else if !secure
                && crate::error::is_connection_error(&e)
                && !e.is_connection_refusal()
                && !e.is_timeout()
            {
                tls(format!(
                    "the server closed the connection without a reply ({text}): if it accepts \
                     only TLS on this port, use a rediss:// URL"
                ))
            } else {
                LockError::Redis(e)
            }
        }
        LockError::Timeout { what, waited } if secure && listening(url, settings).await => {
            tls(format!(
                "{what} did not complete within {waited:?}: no TLS handshake; the server may not \
             speak TLS on this port (a plain-text server behind rediss://?)"
            ))
        }
        e => e,
    }
}

/// Whether the configured address accepts a TCP connection (within a second): a TLS session
/// that failed there failed for want of TLS, not of a server.
async fn listening(url: &str, settings: &Tls) -> bool {
    let Ok(info) = connection_info(url, settings) else {
        return false;
    };
    let (host, port) = match info.addr() {
        ConnectionAddr::TcpTls { host, port, .. } | ConnectionAddr::Tcp(host, port) => {
            (host.clone(), *port)
        }
        _ => return false,
    };
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(1), connect).await,
        Ok(Ok(_))
    )
}
