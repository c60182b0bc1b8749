//! The rustls crypto provider of `rediss://` connections, and when one is installed.
//!
//! redis-rs (1.x) builds the rustls client configuration of every TLS connection itself, from
//! rustls' *process-wide default* provider; it has no way to be handed a provider. (When no
//! default is installed, rustls installs the one its crate features name, or panics when they
//! name two.) So this crate:
//!
//! - installs **nothing** for plain `redis://` deployments, whatever its features;
//! - for a `rediss://` deployment, when the client is built (`Client::with_config`) and the
//!   application has installed no provider, installs ring (feature `tls`) as the process
//!   default;
//! - uses a provider the application installed before connecting, whichever it is (aws-lc-rs,
//!   for example: the application depends on rustls with that feature and installs it first).
//!
//! (A feature selecting aws-lc-rs here was tried and left out: it compiles a C library in every
//! `--all-features` build, and an application gets the same by installing it first.)
//!
//! An application that installs its own provider (`install_default().expect(..)`) must do so
//! before its first TLS client connects: after that, a default exists and rustls refuses a
//! second one.

/// The provider this build chooses for TLS connections when the application installed none.
#[cfg(feature = "tls")]
fn chosen() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// Called only where a TLS connection is about to be configured: installs [`chosen`] as the
/// process default unless the application (or anyone) installed one.
#[cfg(feature = "tls")]
pub(crate) fn ensure_installed() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _ = chosen().install_default();
    }
}
