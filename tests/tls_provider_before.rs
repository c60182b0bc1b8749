//! An application that installs its own rustls crypto provider *before* connecting: the crate
//! uses it and installs nothing over it (the process-wide default is global, hence a test
//! binary of its own).

#[allow(unused_imports, unused_macros)]
#[path = "it/support/mod.rs"]
mod support;

use redisson_lock::Client;
use rustls::crypto::CryptoProvider;

use support::tls::{tls_support, Pki, TlsServer};

#[tokio::test]
async fn the_applications_provider_installed_before_connecting_is_kept() {
    // The application's own provider, recognisable by its single cipher suite.
    let mut mine = rustls::crypto::ring::default_provider();
    mine.cipher_suites
        .retain(|s| s.suite() == rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256);
    mine.install_default()
        .expect("nothing installed before the application");
    if let Some(reason) = tls_support() {
        eprintln!("{reason}");
        return;
    }
    let pki = Pki::new();
    let server = TlsServer::start(&pki, false);
    let client = Client::with_config(server.config(&pki))
        .await
        .expect("connects over TLS with the application's provider");
    let guard = client.get_lock("provider:before").lock().await.unwrap();
    guard.unlock().await.unwrap();
    let installed = CryptoProvider::get_default().expect("a provider is installed");
    assert_eq!(
        installed.cipher_suites.len(),
        1,
        "the process default is still the application's provider"
    );
}
