//! Whether a failed connection failed for TLS, read from the error's types (never its words):
//! a `rustls::Error` anywhere in the error's sources (a certificate refused either way, a fatal
//! alert from the server, a record that is not TLS: a plain-text server behind `rediss://`).
//! redis-rs wraps it in an `io::Error` (tokio-rustls reports handshake and record failures as
//! `InvalidData` with the rustls error inside), itself behind an `Arc` in the `RedisError`.

use std::error::Error;

/// The rustls error in `e`'s sources, as text, if there is one.
pub(crate) fn rustls_cause(e: &(dyn Error + 'static)) -> Option<String> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(found) = rustls_in(err) {
            return Some(found);
        }
        next = err.source();
    }
    None
}

/// `err` itself, the error an `Arc` holds, or the error an `io::Error` carries, as a rustls
/// error (`io::Error::source` skips the error it carries, so it is opened here).
fn rustls_in(err: &(dyn Error + 'static)) -> Option<String> {
    if let Some(shared) = err.downcast_ref::<std::sync::Arc<dyn Error + Send + Sync>>() {
        let inner: &(dyn Error + 'static) = &**shared;
        return rustls_in(inner).or_else(|| inner.source().and_then(rustls_cause));
    }
    if let Some(io) = err.downcast_ref::<std::io::Error>() {
        let inner = io.get_ref()?;
        let inner: &(dyn Error + 'static) = inner;
        return rustls_in(inner);
    }
    is_rustls(err)
}

#[cfg(feature = "tls")]
fn is_rustls(err: &(dyn Error + 'static)) -> Option<String> {
    err.downcast_ref::<rustls::Error>().map(|e| e.to_string())
}

#[cfg(not(feature = "tls"))]
fn is_rustls(_err: &(dyn Error + 'static)) -> Option<String> {
    None
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::rustls_cause;

    #[test]
    fn found_through_redis_and_io_wrappers() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        let redis = redis::RedisError::from(io);
        let found = rustls_cause(&redis).expect("the rustls error inside");
        assert!(found.contains("UnknownIssuer"), "{found}");
        // Words alone are not a TLS failure.
        let words = std::io::Error::other("invalid peer certificate: UnknownIssuer handshake");
        assert_eq!(rustls_cause(&redis::RedisError::from(words)), None);
    }
}
