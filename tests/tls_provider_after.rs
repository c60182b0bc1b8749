//! An application that installs its own rustls crypto provider *after* its clients connected
//! (the usual `install_default().expect(..)` at start-up, run after a `redis://` client): it
//! must not panic, because the crate installs no provider for plain connections, standalone
//! or cluster. Then a `rediss://` client connects with the application's provider. (The
//! process-wide default is global, hence a test binary of its own.)

#[allow(unused_imports, unused_macros)]
#[path = "it/support/mod.rs"]
mod support;

use redisson_lock::{Client, Config};
use rustls::crypto::CryptoProvider;

use support::cluster::TestCluster;
use support::tls::{tls_support, Pki, TlsServer};
use support::TestServer;

async fn take_and_release(client: &Client, name: &str) {
    let guard = client.get_lock(name).lock().await.unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_application_installs_its_provider_after_plain_clients_connected() {
    let server = TestServer::start();
    let single = Client::connect(&server.url()).await.unwrap();
    take_and_release(&single, "provider:after:single").await;
    let cluster = TestCluster::start(0);
    let clustered = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    take_and_release(&clustered, "provider:after:cluster").await;
    assert!(
        CryptoProvider::get_default().is_none(),
        "plain redis:// clients installed a rustls provider"
    );

    // The application's start-up code, after its clients connected.
    let mut mine = rustls::crypto::ring::default_provider();
    mine.cipher_suites
        .retain(|s| s.suite() == rustls::CipherSuite::TLS13_AES_256_GCM_SHA384);
    mine.install_default()
        .expect("the application installs its own provider");

    // TLS clients made from now on use it.
    if let Some(reason) = tls_support() {
        eprintln!("{reason}");
        return;
    }
    let pki = Pki::new();
    let tls_server = TlsServer::start(&pki, false);
    let secure = Client::with_config(tls_server.config(&pki)).await.unwrap();
    take_and_release(&secure, "provider:after:tls").await;
    let installed = CryptoProvider::get_default().expect("installed");
    assert_eq!(installed.cipher_suites.len(), 1, "still the application's");
}
