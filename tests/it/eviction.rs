//! A lock key evicted under memory pressure (`maxmemory` with an evicting policy): Redis deletes
//! it without a word to anyone, so another client may take the lock while the holder still
//! works. What the crate owes then: the holder is *told* (its watchdog finds the hold gone:
//! `lost()` resolves, within a renewal period of the eviction), its release never touches the
//! new holder's lock, and where the token counter survives (it has no TTL, so `volatile-*`
//! policies never evict it) the fenced resource refuses the stale holder's write.
//! docs/production.md ("Eviction") says which policies to run; docs/guarantees.md (W14) gives
//! the window.

use std::time::Duration;

use crate::support::{config_set, info, info_field, TestServer};
use redisson_lock::{Client, Config};

/// A watchdog lease short enough that the renewal after the eviction comes soon (period 1 s).
pub(crate) const LEASE: Duration = Duration::from_secs(3);
/// How long the junk may be written before the test gives up on the eviction.
const FILL_FOR: Duration = Duration::from_secs(90);

/// Caps the server's memory a little above what it uses now, then writes junk (1 KB values,
/// with a TTL when `ttl` so that `volatile-*` policies may evict them too) until `lost`
/// resolves: the holder was told its key is gone. Panics after [`FILL_FOR`].
pub(crate) async fn evict_until_lost(
    raw: &mut redis::aio::MultiplexedConnection,
    ttl: bool,
    lost: impl std::future::Future<Output = ()>,
) {
    let used: u64 = info_field(&info(raw, "memory").await, "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("INFO memory has used_memory");
    config_set(raw, "maxmemory", &(used + 2 * 1024 * 1024).to_string()).await;
    tokio::pin!(lost);
    let value = vec![b'x'; 1024];
    let started = std::time::Instant::now();
    let mut next = 0u64;
    loop {
        let mut pipe = redis::pipe();
        for _ in 0..500 {
            let key = format!("junk:{next}");
            next += 1;
            if ttl {
                pipe.cmd("SET")
                    .arg(key)
                    .arg(&value)
                    .arg("EX")
                    .arg(3600)
                    .ignore();
            } else {
                pipe.cmd("SET").arg(key).arg(&value).ignore();
            }
        }
        let _: () = pipe.query_async(raw).await.unwrap();
        tokio::select! {
            () = &mut lost => break,
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        assert!(
            started.elapsed() < FILL_FOR,
            "the lock key was never evicted (or its loss never reported) after {next} junk keys"
        );
    }
    let evicted = info(raw, "stats").await;
    assert!(
        evicted.lines().any(|l| l
            .strip_prefix("evicted_keys:")
            .is_some_and(|n| n.trim() != "0")),
        "the hold was reported lost without any eviction"
    );
    // Room again, for what follows.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query_async(raw)
        .await
        .unwrap();
}

/// A server evicting by `policy`, two clients on it with [`LEASE`], and a raw connection.
async fn evicting(
    policy: &str,
) -> (
    TestServer,
    Client,
    Client,
    redis::aio::MultiplexedConnection,
) {
    let server = TestServer::start_with(&["--maxmemory-policy", policy]);
    let config = Config::new(server.url()).with_watchdog_timeout(LEASE);
    let a = Client::with_config(config.clone()).await.unwrap();
    let b = Client::with_config(config).await.unwrap();
    let raw = server.conn().await;
    (server, a, b, raw)
}

/// `allkeys-lru` evicts the RLock's hash under a watchdog hold: the holder is told (`lost()`),
/// another client then takes the lock, and the first holder's release fails with `LeaseLost`
/// and leaves the new holder's lock alone: a double grant, but never an unnoticed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_lock_is_reported_lost_and_its_release_spares_the_next_holder() {
    let (_server, a, b, mut raw) = evicting("allkeys-lru").await;
    let held = a.get_lock("evicted:rlock").lock().await.unwrap();
    evict_until_lost(&mut raw, false, held.lost()).await;
    assert!(held.is_lost());

    let taken = b
        .get_lock("evicted:rlock")
        .try_lock_for(Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the evicted lock is free for another client");
    let e = held.unlock().await.unwrap_err();
    assert!(e.is_lease_lost(), "{e:?}");
    assert!(
        b.get_lock("evicted:rlock").is_locked().await.unwrap(),
        "the stale holder's release removed the new holder's lock"
    );
    taken.unlock().await.unwrap();
}

/// `volatile-lru` evicts only keys with a TTL: the fenced lock's hash (it has one), never its
/// token counter nor the fenced resource (they have none). The holder is told, the next holder
/// gets a greater token, and the resource refuses the stale holder's write after the new one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_fenced_lock_is_reported_lost_and_its_stale_write_refused() {
    let (_server, a, b, mut raw) = evicting("volatile-lru").await;
    let resource = a.get_fenced_value("evicted:resource");
    let stale = a.get_fenced_lock("evicted:fenced").lock().await.unwrap();
    assert!(resource.set(stale.token(), "a").await.unwrap());
    evict_until_lost(&mut raw, true, stale.lost()).await;

    let next = b
        .get_fenced_lock("evicted:fenced")
        .try_lock_for(Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the evicted lock is free for another client");
    assert!(
        next.token() > stale.token(),
        "the token counter was evicted"
    );
    let resource_b = b.get_fenced_value("evicted:resource");
    assert!(resource_b.set(next.token(), "b").await.unwrap());
    // The stale holder, unaware (it did not check its guard), writes: refused.
    assert!(!resource.set(stale.token(), "a, stale").await.unwrap());
    assert_eq!(resource.get().await.unwrap().as_deref(), Some(&b"b"[..]));
    assert!(stale.unlock().await.is_err());
    next.unlock().await.unwrap();
}
