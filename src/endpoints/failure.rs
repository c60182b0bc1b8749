//! A failed first connection turned into a clear error: [`LockError::Tls`] when TLS is the
//! cause, with the (redacted) URL. The cause is read from the error's types
//! (`tls::classify`) and the IO error's kind, never from its words.

use redis::ConnectionAddr;

use super::{Endpoints, Nodes};
use crate::error::{is_connection_error, LockError};
use crate::tls::classify::rustls_cause;

impl Endpoints {
    /// `e`, from the first connection or its first reply, as the caller should see it: a TLS
    /// error when rustls refused something (a certificate either way, an alert, a record that
    /// is not TLS), when a `rediss://` address accepts TCP but no TLS session, or when a server
    /// behind `redis://` closes the connection unasked (a TLS-only port). Other errors pass as
    /// they are. Never retries: it only reads the error (and, after a failure on `rediss://`
    /// that is not rustls', tries a bare TCP connect to tell "unreachable" from "no TLS here").
    pub(crate) async fn connect_error(&self, e: LockError) -> LockError {
        let tls = |reason: String| LockError::Tls {
            url: self.shown.clone(),
            reason,
        };
        match e {
            LockError::Tls { url: u, reason } if u.is_empty() => tls(reason),
            LockError::Redis(e) => {
                let text = e.to_string();
                if rustls_cause(&e).is_some() {
                    tls(text)
                } else if self.secure && is_connection_error(&e) && self.listening().await {
                    tls(format!(
                        "no TLS session could be set up ({text}): does this port speak TLS? \
                         (a plain-text server behind rediss://?)"
                    ))
                } else if !self.secure
                    && is_connection_error(&e)
                    && !e.is_connection_refusal()
                    && !e.is_timeout()
                {
                    tls(format!(
                        "the server closed the connection without a reply ({text}): if it \
                         accepts only TLS on this port, use a rediss:// URL"
                    ))
                } else {
                    LockError::Redis(e)
                }
            }
            LockError::Timeout { what, waited } if self.secure && self.listening().await => {
                tls(format!(
                    "{what} did not complete within {waited:?}: no TLS handshake; the server may \
                     not speak TLS on this port (a plain-text server behind rediss://?)"
                ))
            }
            e => e,
        }
    }

    /// Whether the first configured address accepts a TCP connection (within a second): a TLS
    /// session that failed there failed for want of TLS, not of a server.
    async fn listening(&self) -> bool {
        let info = match &self.nodes {
            Nodes::Single(info) => Some(info),
            Nodes::Cluster(infos)
            | Nodes::Sentinel {
                sentinels: infos, ..
            } => infos.first(),
        };
        let Some((host, port)) = info.and_then(|i| match i.addr() {
            ConnectionAddr::TcpTls { host, port, .. } | ConnectionAddr::Tcp(host, port) => {
                Some((host.clone(), *port))
            }
            _ => None,
        }) else {
            return false;
        };
        let connect = tokio::net::TcpStream::connect((host.as_str(), port));
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(1), connect).await,
            Ok(Ok(_))
        )
    }
}
