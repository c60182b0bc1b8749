//! The peer and the crate on the suite's real topologies. Cluster (3 masters, one replica each):
//! Redisson in cluster mode with its default sharded pub/sub (`AUTO`) and the crate with its
//! default (`ShardedPubSub::Auto`), on RLock names in every master's slots: exclusion both ways
//! and wake-ups both ways by message, each waiter seen on the owning master's shard channel
//! (`PUBSUB SHARDNUMSUB`), never on a plain one. Sentinel (a master, a replica, 3 sentinels):
//! exclusion both ways and a wake-up each way.

use std::time::{Duration, Instant};

use redisson_lock::{Client, Config, LockOwner};

use super::sync_ops::{parked_on_latch, peers_on};
use super::wakeups::{HOLDER_LEASE, WOKEN_WITHIN};
use super::{JavaPeer, PeerTarget};
use crate::support::cluster::{TestCluster, TestSentinel, MASTER_NAME};
use crate::support::eventually;
use crate::support::redisson::channel;

/// A fresh async connection to the node at `url`.
async fn node(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// `PUBSUB <sub> <channel>` on the node at `url`: its subscriber count there.
async fn subscribers(url: &str, sub: &str, channel: &str) -> i64 {
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg(sub)
        .arg(channel)
        .query_async(&mut node(url).await)
        .await
        .unwrap();
    n
}

/// `CONFIG RESETSTAT` on the node at `url`: its command counts start from zero.
async fn reset_stats_on(url: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut node(url).await)
        .await
        .unwrap();
}

/// Scripts (`EVALSHA` and `EVAL`) the node at `url` ran since its last reset.
async fn scripts_on(url: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut node(url).await)
        .await
        .unwrap();
    ["evalsha", "eval"]
        .iter()
        .filter_map(|c| {
            let prefix = format!("cmdstat_{c}:calls=");
            info.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}

/// Waits until the node at `url` ran two scripts since its reset: the Rust waiter tried,
/// subscribed and tried again (only a message wakes it now).
async fn rust_parked(url: &str, what: &str) {
    let ok = eventually(Duration::from_secs(30), || async {
        scripts_on(url).await >= 2
    })
    .await;
    assert!(
        ok,
        "{what}: the Rust waiter never made its second try on {url}"
    );
}

/// One lock name per master for `tag`: names on every shard.
async fn names_on_every_master(cluster: &TestCluster, tag: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for i in 0.. {
        let name = format!("ict:{tag}:{i}");
        let master = cluster.master_of(cluster.keyslot(&name)).url();
        if !out.iter().any(|(_, m)| *m == master) {
            out.push((name, master));
        }
        if out.len() == 3 {
            break;
        }
    }
    out
}

/// Waits until nobody is subscribed to `name`'s shard channel on `master` (the last waiter's
/// client unsubscribed), so that a count of 1 after it is the next waiter.
async fn shard_quiet(master: &str, name: &str, what: &str) {
    let ch = channel(name);
    let ok = eventually(Duration::from_secs(30), || async {
        subscribers(master, "SHARDNUMSUB", &ch).await == 0
    })
    .await;
    assert!(ok, "{what}: {ch} keeps a shard subscriber on {master}");
}

/// Waits until the waiter on `name` is subscribed to its shard channel on `master`, and
/// checks that no node has it as a plain channel.
async fn parked_on_shard(cluster: &TestCluster, master: &str, name: &str, what: &str) {
    let ch = channel(name);
    let ok = eventually(Duration::from_secs(30), || async {
        subscribers(master, "SHARDNUMSUB", &ch).await == 1
    })
    .await;
    assert!(
        ok,
        "{what}: no shard subscriber of {ch} on its master {master}"
    );
    for n in &cluster.nodes {
        assert_eq!(
            subscribers(&n.url(), "NUMSUB", &ch).await,
            0,
            "{what}: {ch} is a plain channel on {}",
            n.url()
        );
    }
}

async fn rlock_both_ways_on_the_cluster(cluster: &TestCluster, client: &Client, peer: &JavaPeer) {
    let v = peer.version().to_owned();
    for (name, master) in names_on_every_master(cluster, &v).await {
        let what = format!("{v} {name}");
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));

        // Java holds: Rust cannot take it; the Java unlock wakes the parked Rust waiter.
        shard_quiet(&master, &name, &what).await;
        peer.lock("h", "lock", &name, Some(HOLDER_LEASE)).await;
        assert!(lock.try_lock().await.unwrap().is_none(), "{what}");
        reset_stats_on(&master).await;
        let waiter = tokio::spawn({
            let lock = lock.clone();
            async move {
                let guard = lock.lock_with_lease(HOLDER_LEASE).await.unwrap();
                (Instant::now(), guard)
            }
        });
        parked_on_shard(cluster, &master, &name, &what).await;
        rust_parked(&master, &what).await;
        let released = Instant::now();
        peer.unlock("h", "lock", &name).await.unwrap();
        let (at, guard) = tokio::time::timeout(HOLDER_LEASE, waiter)
            .await
            .unwrap_or_else(|_| panic!("{what}: the Rust waiter was not woken"))
            .unwrap();
        let after = at.saturating_duration_since(released);
        assert!(after < WOKEN_WITHIN, "{what}: Rust woken {after:?} after");

        // Rust holds (60 s lease): Java cannot take it; the Rust unlock wakes the parked Java
        // waiter.
        shard_quiet(&master, &name, &what).await;
        assert!(
            !peer
                .try_lock("w", "lock", &name, Duration::ZERO, None)
                .await,
            "{what}"
        );
        let reply = peer.send("w", &format!("trylock lock {name} 50000 -1"));
        parked_on_shard(cluster, &master, &name, &what).await;
        parked_on_latch(peer, "w", &what).await;
        let released = Instant::now();
        guard.unlock().await.unwrap();
        assert_eq!(reply.await, Ok("true".to_owned()), "{what}");
        let after = released.elapsed();
        assert!(after < WOKEN_WITHIN, "{what}: Java woken {after:?} after");
        assert!(lock.try_lock().await.unwrap().is_none(), "{what}");
        peer.unlock("w", "lock", &name).await.unwrap();
    }
}

/// One cluster for both Redisson versions (forming it is the slow part).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_exclusion_and_wakeups_on_shard_channels() {
    let cluster = TestCluster::start(1);
    let client = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .expect("cluster client");
    assert!(client.is_sharded_pubsub(), "the crate's default on 7.0");
    let peers = peers_on(PeerTarget::Cluster(cluster.urls()), None).await;
    for peer in &peers {
        rlock_both_ways_on_the_cluster(&cluster, &client, peer).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_exclusion_and_wakeups() {
    let s = TestSentinel::start();
    let client = Client::with_config(Config::sentinel(s.sentinel_urls(), MASTER_NAME))
        .await
        .expect("client through sentinels");
    let target = PeerTarget::Sentinel {
        urls: s.sentinel_urls(),
        master: MASTER_NAME.to_owned(),
    };
    let master = s.master.url();
    for peer in peers_on(target, None).await {
        let v = peer.version().to_owned();
        let name = format!("ist:{v}");
        let lock = client.get_lock(&name).with_owner(LockOwner::new(1));
        let ch = channel(&name);
        let waiting = || async { subscribers(&master, "NUMSUB", &ch).await == 1 };
        let quiet = || async { subscribers(&master, "NUMSUB", &ch).await == 0 };

        peer.lock("h", "lock", &name, Some(HOLDER_LEASE)).await;
        assert!(lock.try_lock().await.unwrap().is_none(), "{v}");
        reset_stats_on(&master).await;
        let waiter = tokio::spawn({
            let lock = lock.clone();
            async move {
                let guard = lock.lock_with_lease(HOLDER_LEASE).await.unwrap();
                (Instant::now(), guard)
            }
        });
        assert!(
            eventually(Duration::from_secs(30), waiting).await,
            "{v}: the Rust waiter never subscribed on the master"
        );
        rust_parked(&master, &v).await;
        let released = Instant::now();
        peer.unlock("h", "lock", &name).await.unwrap();
        let (at, guard) = tokio::time::timeout(HOLDER_LEASE, waiter)
            .await
            .unwrap_or_else(|_| panic!("{v}: the Rust waiter was not woken"))
            .unwrap();
        let after = at.saturating_duration_since(released);
        assert!(after < WOKEN_WITHIN, "{v}: Rust woken {after:?} after");

        assert!(
            !peer
                .try_lock("w", "lock", &name, Duration::ZERO, None)
                .await,
            "{v}"
        );
        assert!(
            eventually(Duration::from_secs(30), quiet).await,
            "{v}: the Rust client kept its subscription"
        );
        let reply = peer.send("w", &format!("trylock lock {name} 50000 -1"));
        assert!(
            eventually(Duration::from_secs(30), waiting).await,
            "{v}: the Java waiter never subscribed on the master"
        );
        parked_on_latch(&peer, "w", &v).await;
        let released = Instant::now();
        guard.unlock().await.unwrap();
        assert_eq!(reply.await, Ok("true".to_owned()), "{v}");
        let after = released.elapsed();
        assert!(after < WOKEN_WITHIN, "{v}: Java woken {after:?} after");
        assert!(lock.try_lock().await.unwrap().is_none(), "{v}");
        peer.unlock("w", "lock", &name).await.unwrap();
    }
}
