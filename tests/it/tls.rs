//! TLS (issue 21): every lock kind, the waiting path (pub/sub) and the watchdog over mutual TLS
//! on a real redis-server; cluster (`tls-cluster yes`) and sentinel (`tls-replication yes`);
//! each failure case a clear `LockError::Tls` at connect, within a bound. Servers without TLS
//! (the Valkey wheel) are reported and skipped by `require_tls!`.

use std::time::Duration;

use redisson_lock::{Client, Config, LockError, Tls};

use crate::require_tls;
use crate::support::tls::{tls_cluster, tls_sentinel, Pki, TlsServer, MASTER};
use crate::support::{take_and_release, TestServer};

/// A connect that must fail: returns its error, and fails the test if it hangs past `BOUND`
/// (a failure case must never be a retry loop).
const BOUND: Duration = Duration::from_secs(30);

async fn connect_err(config: Config) -> LockError {
    match tokio::time::timeout(BOUND, Client::with_config(config)).await {
        Ok(Ok(_)) => panic!("connect succeeded where it must fail"),
        Ok(Err(e)) => e,
        Err(_) => panic!("connect did not return within {BOUND:?}"),
    }
}

/// The ports (`laddr`) the server's clients are connected to, from `CLIENT LIST` on the plain
/// port, leaving out the inspecting connection itself.
async fn client_ports(server: &TestServer) -> Vec<(u16, String)> {
    let mut raw = server.conn().await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut raw)
        .await
        .unwrap();
    list.lines()
        .filter(|l| !l.contains("cmd=client|list"))
        .filter_map(|l| {
            let laddr = l.split(' ').find_map(|f| f.strip_prefix("laddr="))?;
            let port = laddr.rsplit(':').next()?.parse().ok()?;
            Some((port, l.to_owned()))
        })
        .collect()
}

/// Waits (event-driven enough: polls every 20 ms, up to 20 s) until `client` has subscribed.
async fn subscribed(client: &Client) {
    for _ in 0..1000 {
        if client.stats().subscribed_channels > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the waiter never subscribed");
}

/// `CLIENT LIST` of `server` once a connection there has subscribed (polls every 20 ms, up to
/// 20 s).
async fn server_side_subscriber(server: &TestServer) -> Vec<(u16, String)> {
    for _ in 0..1000 {
        let ports = client_ports(server).await;
        if ports.iter().any(|(_, l)| l.contains(" sub=1 ")) {
            return ports;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no connection subscribed on the server");
}

#[tokio::test]
async fn every_lock_kind_waits_and_renews_over_mutual_tls() {
    require_tls!();
    let pki = Pki::new();
    let server = TlsServer::start(&pki, true);
    let config = server
        .config(&pki)
        .with_watchdog_timeout(Duration::from_millis(900));
    let a = Client::with_config(config.clone()).await.unwrap();
    let b = Client::with_config(config).await.unwrap();

    // The waiting path: b waits on a held lock and is woken by a's release (pub/sub over TLS).
    let held = a.get_lock("tls:lock").lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = b.get_lock("tls:lock");
        async move { lock.try_lock_for(Duration::from_secs(60)).await }
    });
    // The server's view, not the client's: the client counts a channel as soon as it asks for
    // it, before its subscriber connection (opened on demand) has sent SUBSCRIBE (a run on a
    // loaded machine listed that connection unnamed with sub=0).
    let during_wait = server_side_subscriber(&server.plain).await;
    // The watchdog: the lease (900 ms) passes three times over while a holds it.
    tokio::time::sleep(Duration::from_millis(2700)).await;
    assert!(!held.is_lost(), "the watchdog did not renew over TLS");
    held.unlock().await.unwrap();
    let guard = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("b woke and took the lock");
    guard.unlock().await.unwrap();

    // Every other kind, once each.
    take_and_release(&a.get_fair_lock("tls:fair")).await;
    let rw = a.get_read_write_lock("tls:rw");
    take_and_release(&rw.read_lock()).await;
    take_and_release(&rw.write_lock()).await;
    let fenced = a.get_fenced_lock("tls:fenced").lock().await.unwrap();
    assert!(fenced.token() > 0);
    fenced.unlock().await.unwrap();
    take_and_release(&a.get_spin_lock("tls:spin")).await;
    let sem = a.get_semaphore("tls:sem");
    assert!(sem.try_set_permits(1).await.unwrap());
    sem.acquire().await.unwrap();
    sem.release().await.unwrap();
    let latch = a.get_count_down_latch("tls:latch");
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    assert!(latch.wait_for(Duration::from_secs(10)).await.unwrap());
    let permits = a.get_permit_expirable_semaphore("tls:permits");
    assert!(permits.try_set_permits(1).await.unwrap());
    let id = permits.acquire().await.unwrap();
    permits.release(&id).await.unwrap();

    // Every connection of both clients, the subscribers included, is on the TLS port.
    let ports = client_ports(&server.plain).await;
    for (port, line) in during_wait.iter().chain(&ports) {
        assert_eq!(*port, server.tls_port, "a connection not over TLS: {line}");
    }
}

#[tokio::test]
async fn failures_are_clear_tls_errors_at_connect() {
    require_tls!();
    let pki = Pki::new();
    let server = TlsServer::start(&pki, false);

    // Unknown CA: the host's store does not know our throwaway CA, nor does another CA.
    let (other_ca, _) = crate::support::tls::make_ca("another CA");
    let e = connect_err(Config::new(server.url()).with_tls(Tls::new().with_ca_pem(other_ca.pem())))
        .await;
    assert!(e.is_tls(), "unknown CA: {e:?}");
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
    let e = connect_err(Config::new(server.url())).await;
    assert!(e.is_tls(), "unknown CA (host store): {e:?}");

    // Wrong host name: a certificate for another name.
    let wrong = pki.issue("wrong-name", &["redis.example.com"], false);
    let wrong_server = TlsServer::start_cert(&pki, &wrong, false);
    let e = connect_err(wrong_server.config(&pki)).await;
    assert!(e.is_tls(), "wrong host name: {e:?}");
    assert!(e.to_string().contains("not valid for name"), "{e}");

    // Expired certificate.
    let expired = pki.issue("expired", &["localhost", "127.0.0.1"], true);
    let expired_server = TlsServer::start_cert(&pki, &expired, false);
    let e = connect_err(expired_server.config(&pki)).await;
    assert!(e.is_tls(), "expired: {e:?}");
    assert!(e.to_string().to_lowercase().contains("expired"), "{e}");

    // A plain-text server behind rediss://.
    let plain = TestServer::start();
    let url = format!("rediss://127.0.0.1:{}/", plain.port);
    let e = connect_err(Config::new(url).with_tls(pki.client_tls())).await;
    eprintln!("plain server behind rediss://: {e}");
    assert!(e.is_tls(), "plain server behind rediss://: {e:?}");
    assert!(e.to_string().contains("TLS"), "{e}");

    // A TLS server behind redis://.
    let url = format!("redis://127.0.0.1:{}/", server.tls_port);
    let e = connect_err(Config::new(url)).await;
    eprintln!("TLS server behind redis://: {e}");
    assert!(e.is_tls(), "TLS server behind redis://: {e:?}");
    assert!(e.to_string().contains("rediss://"), "{e}");
}

#[tokio::test]
async fn mutual_tls_needs_the_client_certificate() {
    require_tls!();
    let pki = Pki::new();
    let server = TlsServer::start(&pki, true);
    let e = connect_err(Config::new(server.url()).with_tls(Tls::new().with_ca_file(&pki.ca))).await;
    assert!(e.is_tls(), "no client certificate: {e:?}");
    // Inline PEM works as well as files.
    let tls = Tls::new()
        .with_ca_pem(pki.ca_pem.clone())
        .with_client_cert_pem(pki.client.cert_pem.clone(), pki.client.key_pem.clone());
    let client = Client::with_config(Config::new(server.url()).with_tls(tls))
        .await
        .unwrap();
    take_and_release(&client.get_lock("tls:pem")).await;
}

#[tokio::test]
async fn bad_settings_are_refused_before_connecting() {
    let pki = Pki::new();
    // A CA file that does not exist.
    let e = connect_err(
        Config::new("rediss://127.0.0.1:1/")
            .with_tls(Tls::new().with_ca_file("/nonexistent/ca.pem")),
    )
    .await;
    assert!(
        e.is_tls() && e.to_string().contains("/nonexistent/ca.pem"),
        "{e:?}"
    );
    // redis-rs' #insecure fragment: the loud switch must be used instead.
    let e = connect_err(Config::new("rediss://127.0.0.1:1/#insecure")).await;
    assert!(e.is_invalid_argument(), "{e:?}");
    assert!(
        e.to_string()
            .contains("insecure_skip_verification_for_tests_only"),
        "{e}"
    );
    // TLS settings on a plain URL would be ignored: refused.
    let e = connect_err(Config::new("redis://127.0.0.1:1/").with_tls(pki.client_tls())).await;
    assert!(e.is_invalid_argument(), "{e:?}");
}

#[cfg(feature = "tls-insecure")]
#[tokio::test]
async fn the_insecure_switch_skips_verification() {
    require_tls!();
    let pki = Pki::new();
    let wrong = pki.issue("wrong-name", &["redis.example.com"], false);
    let server = TlsServer::start_cert(&pki, &wrong, false);
    let tls = Tls::new().insecure_skip_verification_for_tests_only();
    assert!(tls.is_insecure());
    let client = Client::with_config(Config::new(server.url()).with_tls(tls))
        .await
        .unwrap();
    take_and_release(&client.get_lock("tls:insecure")).await;
}

#[tokio::test]
async fn cluster_over_tls() {
    require_tls!();
    let pki = Pki::new();
    let (_cluster, urls) = tls_cluster(&pki);
    let config = Config::cluster(urls).with_tls(pki.client_tls());
    let a = Client::with_config(config.clone()).await.unwrap();
    let b = Client::with_config(config).await.unwrap();
    // Names on different slots, so more than one node is reached.
    for name in ["tls:c:1", "tls:c:2", "tls:c:3", "tls:c:4"] {
        take_and_release(&a.get_lock(name)).await;
    }
    let held = a.get_lock("tls:c:wait").lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = b.get_lock("tls:c:wait");
        async move { lock.try_lock_for(Duration::from_secs(60)).await }
    });
    subscribed(&b).await;
    held.unlock().await.unwrap();
    let guard = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("woken over TLS pub/sub");
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn sentinel_over_tls() {
    require_tls!();
    let pki = Pki::new();
    let (_set, urls) = tls_sentinel(&pki);
    let config = Config::sentinel(urls, MASTER)
        .with_tls(pki.client_tls())
        .with_replica_sync(None);
    let a = Client::with_config(config.clone()).await.unwrap();
    let b = Client::with_config(config).await.unwrap();
    let held = a.get_lock("tls:s:wait").lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = b.get_lock("tls:s:wait");
        async move { lock.try_lock_for(Duration::from_secs(60)).await }
    });
    subscribed(&b).await;
    held.unlock().await.unwrap();
    let guard = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("woken over TLS pub/sub");
    guard.unlock().await.unwrap();
}

#[test]
fn debug_never_shows_passwords_or_keys() {
    let pki = Pki::new();
    let config = Config::new("rediss://locker:s3cret-pw@127.0.0.1:6380/").with_tls(
        Tls::new()
            .with_ca_pem(pki.ca_pem.clone())
            .with_client_cert_pem(pki.client.cert_pem.clone(), pki.client.key_pem.clone()),
    );
    let text = format!("{config:?}");
    assert!(!text.contains("s3cret-pw"), "{text}");
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    assert!(text.contains("127.0.0.1:6380"), "{text}");
    let cluster = Config::cluster(["redis://u:s3cret-pw@127.0.0.1:7000/"]);
    assert!(!format!("{cluster:?}").contains("s3cret-pw"));
    let sentinel = Config::sentinel(["redis://u:s3cret-pw@127.0.0.1:26379/"], "m");
    assert!(!format!("{sentinel:?}").contains("s3cret-pw"));
}

#[tokio::test]
async fn certificate_failures_are_read_from_the_rustls_error() {
    require_tls!();
    // A certificate refused is rustls' verdict, carried in the error's sources: the error says
    // what rustls said, never the guess made for errors without one ("does this port speak
    // TLS?", which would send an operator to the wrong place).
    let pki = Pki::new();
    let server = TlsServer::start(&pki, false);
    let (other_ca, _) = crate::support::tls::make_ca("a CA the server does not use");
    let unknown_ca = Config::new(server.url()).with_tls(Tls::new().with_ca_pem(other_ca.pem()));
    let wrong = pki.issue("other-host", &["redis.example.com"], false);
    let wrong_server = TlsServer::start_cert(&pki, &wrong, false);
    for (case, config) in [
        ("unknown CA", unknown_ca),
        ("wrong host name", wrong_server.config(&pki)),
    ] {
        let e = connect_err(config).await;
        let text = e.to_string();
        assert!(e.is_tls(), "{case}: {e:?}");
        assert!(text.contains("invalid peer certificate"), "{case}: {text}");
        assert!(!text.contains("does this port speak TLS"), "{case}: {text}");
    }
}
