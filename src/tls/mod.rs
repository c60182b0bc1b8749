//! TLS settings ([`Tls`]) and how they turn a URL into a redis-rs client: a custom CA, a client
//! certificate (mutual TLS), and the loudly named switch that skips verification.
//!
//! Trust: without a CA of its own, a `rediss://` connection trusts the operating system's CA
//! store (rustls' native roots), as Java's Redisson trusts the JVM's: a corporate CA installed
//! on the host works, and the OS keeps the list current. The `tls-webpki-roots` feature trusts
//! Mozilla's list compiled into the binary instead, for images without a CA bundle. A CA given
//! here *replaces* both (the usual case for managed services that issue their own CA).
//!
//! `mod.rs` the settings and their PEM data; `provider` which rustls crypto provider a TLS
//! connection uses (and when one is installed); `classify` whether a failed connection failed
//! for TLS, read from the error's types.

use std::fmt;
use std::path::PathBuf;

use crate::error::LockError;

pub(crate) mod classify;
pub(crate) mod provider;

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
///
/// **Crypto provider.** redis-rs builds every TLS connection from rustls' process-wide
/// default provider and cannot be handed one. When a `rediss://` client is built and the
/// application has installed no provider, this crate installs ring (feature `tls`) as that
/// default; for `redis://` it installs nothing. An application that installs its own
/// (`CryptoProvider::install_default`, aws-lc-rs for example) must do so before its first
/// `rediss://` client: rustls refuses a second default.
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
    /// so that skipping verification is always spelled out in code.) Only with the feature
    /// `tls-insecure`, which the default features leave off.
    #[cfg(feature = "tls-insecure")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls-insecure")))]
    pub fn insecure_skip_verification_for_tests_only(mut self) -> Tls {
        self.insecure = true;
        self
    }

    /// Whether `insecure_skip_verification_for_tests_only` (feature `tls-insecure`) was called;
    /// always `false` without that feature.
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

#[cfg(feature = "tls")]
impl Certs {
    /// The PEM data in redis-rs' form.
    pub(crate) fn for_redis(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self.client.clone().map(|(client_cert, client_key)| {
                redis::ClientTlsConfig {
                    client_cert,
                    client_key,
                }
            }),
            root_cert: self.root.clone(),
        }
    }
}
