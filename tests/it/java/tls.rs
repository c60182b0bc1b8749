//! Redisson over `rediss://` against the same TLS server as the crate (issue 21): the two
//! exclude each other and wake each other's waiters by message, pub/sub included, over TLS.
//! Runs on a server built with TLS (Debian's Redis); on one without (the Valkey wheel) it says
//! so and checks nothing.

use std::time::{Duration, Instant};

use redisson_lock::LockOwner;

use super::wakeups::{HOLDER_LEASE, WOKEN_WITHIN};
use super::{peer_versions, JavaPeer, PeerTarget};
use crate::support::redisson::channel;
use crate::support::tls::{Pki, TlsServer};
use crate::support::{channel_subscribers, fields};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_over_tls_excludes_and_wakes_the_crate_both_ways() {
    crate::require_tls!();
    let pki = Pki::new();
    // Server authentication only: Redisson trusts the test CA (--tls-ca), as a managed
    // service's clients trust its CA.
    let server = TlsServer::start(&pki, false);
    let client = redisson_lock::Client::with_config(
        redisson_lock::Config::new(server.url())
            .with_tls(redisson_lock::Tls::new().with_ca_file(&pki.ca)),
    )
    .await
    .unwrap();
    let mut raw = server.plain.conn().await;
    let ca = pki.ca.to_str().unwrap().to_owned();
    for v in peer_versions() {
        let url = server.url().trim_end_matches('/').to_owned();
        let peer =
            JavaPeer::start_with(&v, PeerTarget::Single(url), None, &["--tls-ca", &ca]).await;
        let name = format!("itls:{v}");

        // Java holds over TLS: the crate sees Redisson's field and cannot take the lock.
        peer.lock("h", "lock", &name, Some(HOLDER_LEASE)).await;
        let java_field = peer.field("h").await;
        let held = fields(&mut raw, &name).await;
        assert_eq!(held.get(&java_field), Some(&1), "{v}: {held:?}");
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));
        assert!(
            lock.try_lock().await.unwrap().is_none(),
            "{v}: took a Java hold"
        );

        // A Rust waiter, parked on the channel over TLS, is woken by the Java unlock.
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.lock_with_lease(HOLDER_LEASE).await.unwrap() })
        };
        assert!(
            channel_subscribers(&server.plain, &channel(&name), 1).await,
            "{v}: the Rust waiter never subscribed"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let released = Instant::now();
        peer.unlock("h", "lock", &name).await.unwrap();
        let guard = tokio::time::timeout(HOLDER_LEASE, waiter)
            .await
            .unwrap_or_else(|_| panic!("{v}: the Rust waiter was not woken over TLS"))
            .unwrap();
        assert!(
            released.elapsed() < WOKEN_WITHIN,
            "{v}: woken {:?} after the Java unlock",
            released.elapsed()
        );

        // Now Rust holds: Java cannot take it, and its waiter is woken by the Rust unlock.
        assert!(
            !peer
                .try_lock("o", "lock", &name, Duration::ZERO, None)
                .await,
            "{v}: Java took a Rust hold over TLS"
        );
        let java_waiter = peer.send("w", &format!("trylock lock {name} 50000 -1"));
        assert!(
            channel_subscribers(&server.plain, &channel(&name), 1).await,
            "{v}: the Java waiter never subscribed"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let released = Instant::now();
        guard.unlock().await.unwrap();
        assert_eq!(java_waiter.await, Ok("true".to_owned()), "{v}");
        assert!(
            released.elapsed() < WOKEN_WITHIN,
            "{v}: Java woken {:?} after the Rust unlock",
            released.elapsed()
        );
        peer.unlock("w", "lock", &name).await.unwrap();
    }
}
