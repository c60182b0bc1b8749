//! Failover awareness through Sentinel and on a Cluster: a hold the promoted replica lacks is
//! reported lost at the switch, not at the watchdog's next renewal.
//!
//! Sentinel: how the hold vanishes across the failover: replica sync is off, and the promoted replica
//! must not have the lock's key, the hazard of a failover that comes before the write reached
//! the replica. After the lock is taken (and replicated, `WAIT`), the replica is made writable
//! (`replica-read-only no`) and the key is deleted *on the replica only*: a write on a replica
//! never travels back to its master, so the master still has the hold (its renewals succeed)
//! while the replica, the future master, does not. `SENTINEL FAILOVER` then promotes that
//! replica. The watchdog's period is 30 s (a 90 s watchdog timeout) and the whole test runs in
//! the first few seconds after the lock is taken, so no periodic renewal can explain the loss:
//! only the out-of-turn pass that the switch triggers can.
//!
//! Cluster: the same hazard on a real 3 masters x 1 replica cluster. Cluster replicas redirect
//! every keyed command to their master, even when writable, so the key cannot be deleted there
//! alone; `FLUSHALL` carries no key and runs on the node it is sent to: after the lock is taken
//! and replicated (`WAIT`), the replica of the lock's master is made writable and flushed. The
//! master keeps the hold; `CLUSTER FAILOVER` on the replica (the coordinated failover: the
//! replica's replication offset is the master's, a write on a replica is not in the stream)
//! then promotes the node that lacks it. The client learns of it from its slot map watch
//! (`CLUSTER SLOTS` every 500 ms), not from any command of its own.

use std::time::{Duration, Instant};

use redis::Commands;
use redisson_lock::{Client, Config};

use crate::support::cluster::{
    ask_failover, lose_on_replica, wait_until, TestCluster, TestSentinel, MASTER_NAME,
};

/// How soon after the switch the loss must be reported: generous for a loaded machine, far
/// below the watchdog's 30 s period.
const BOUND: Duration = Duration::from_secs(5);

async fn client(s: &TestSentinel, aware: bool) -> Client {
    Client::with_config(
        Config::sentinel(s.sentinel_urls(), MASTER_NAME)
            .with_watchdog_timeout(Duration::from_secs(90))
            .with_replica_sync(None)
            .with_response_timeout(Duration::from_secs(1))
            .with_connection_timeout(Duration::from_secs(1))
            .with_failover_awareness(aware),
    )
    .await
    .expect("client through sentinels")
}

/// Whether every sentinel (by port) has a pub/sub subscriber: the client's `+switch-master`
/// Waits for `switched` (it ends when the new master is visible) and for the guard's `lost()`,
/// prints the time between them and checks it against [`BOUND`]. `lost()` is bounded well past
/// the watchdog's first tick (30 s), so that with awareness off the test still ends and reports
/// how late the regular renewal told.
async fn lost_within_bound(
    label: &str,
    switched: tokio::task::JoinHandle<Instant>,
    guard: &redisson_lock::RLockGuard,
) {
    let lost = async {
        let _ = tokio::time::timeout(Duration::from_secs(45), guard.lost()).await;
        Instant::now()
    };
    let (switched, lost) = tokio::join!(switched, lost);
    let switched = switched.unwrap();
    let detect = lost.saturating_duration_since(switched);
    eprintln!("{label}time from the switch to lost(): {detect:?}");
    assert!(
        detect < BOUND,
        "lost() {detect:?} after the switch; the watchdog's period is 30 s"
    );
    assert!(guard.is_lost());
}

/// listeners (the sentinels subscribe to nothing on one another).
pub(crate) fn sentinels_watched(ports: &[u16]) -> bool {
    ports.iter().all(|p| {
        let c = redis::Client::open(format!("redis://127.0.0.1:{p}/")).unwrap();
        let Ok(mut c) = c.get_connection_with_timeout(Duration::from_secs(2)) else {
            return false;
        };
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut c)
            .unwrap_or_default();
        list.lines().any(|l| l.contains(" sub=1 "))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_the_new_master_lacks_is_lost_at_the_switch() {
    let s = TestSentinel::start();
    let client = client(&s, true).await;
    let guard = client.get_lock("fa-1").lock().await.unwrap();

    // The hold reaches the replica, then the replica alone loses it.
    lose_on_replica(&s.master, &s.replica, redis::cmd("DEL").arg("fa-1"));
    let mut master = s.master.conn();
    let on_master: bool = master.exists("fa-1").unwrap();
    assert!(on_master, "the master still has the hold");

    // The client listens on every sentinel before the switch.
    let ports: Vec<u16> = s.sentinels.iter().map(|n| n.port).collect();
    let watched = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(20), || sentinels_watched(&ports))
    })
    .await
    .unwrap();
    assert!(
        watched,
        "the client subscribed to +switch-master on every sentinel"
    );
    assert!(!guard.is_lost());

    // The failover (retried while the sentinels do not yet count the replica as good).
    let old = s.master.port;
    let replica_port = s.replica.port;
    let sentinel_port = s.sentinels[0].port;
    let switched = tokio::task::spawn_blocking(move || {
        let mut sentinel = redis::Client::open(format!("redis://127.0.0.1:{sentinel_port}/"))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap();
        ask_failover(&mut sentinel);
        let promoted = wait_until(Duration::from_secs(30), || {
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query::<(String, u16)>(&mut sentinel)
                .is_ok_and(|(_, p)| p != old)
        });
        assert!(promoted, "the sentinels promoted the replica");
        Instant::now()
    });
    lost_within_bound("", switched, &guard).await;
    let port = s.master_port();
    assert_eq!(port, Some(replica_port));
}

/// Calls of `CLUSTER SLOTS` served by the cluster's nodes so far (`INFO commandstats`).
fn slots_polls(cluster: &TestCluster) -> u64 {
    cluster
        .nodes
        .iter()
        .map(|n| {
            n.info("commandstats")
                .lines()
                .find_map(|l| l.strip_prefix("cmdstat_cluster|slots:calls="))
                .and_then(|l| l.split(',').next())
                .and_then(|c| c.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_the_new_cluster_master_lacks_is_lost_at_the_switch() {
    let cluster = TestCluster::start(1);
    let client = Client::with_config(
        Config::cluster(cluster.urls())
            .with_watchdog_timeout(Duration::from_secs(90))
            .with_replica_sync(None)
            .with_response_timeout(Duration::from_secs(1))
            .with_connection_timeout(Duration::from_secs(1))
            .with_failover_awareness(true)
            .with_client_name("fa-cluster-watch"),
    )
    .await
    .expect("cluster client");
    let guard = client.get_lock("fa-c").lock().await.unwrap();
    let polls = slots_polls(&cluster);

    // The hold reaches the replica, then the replica alone loses it.
    let slot = cluster.keyslot("fa-c");
    let master = cluster.master_of(slot);
    let replica = cluster.replica_of(master);
    lose_on_replica(master, replica, &redis::cmd("FLUSHALL"));
    let mut m = master.conn();
    let on_replica: i64 = redis::cmd("DBSIZE").query(&mut replica.conn()).unwrap();
    assert_eq!(on_replica, 0, "the replica lost the hold");
    let on_master: bool = m.exists("fa-c").unwrap();
    assert!(on_master, "the master still has the hold");
    let (replica_port, master_port) = (replica.port, master.port);

    // The watch has read the slot map since the client connected (two polls at least).
    let cluster = std::sync::Arc::new(cluster);
    let seen = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || {
            wait_until(Duration::from_secs(20), || {
                slots_polls(&cluster) >= polls + 3
            })
        })
        .await
        .unwrap()
    };
    assert!(seen, "the client polls CLUSTER SLOTS");
    assert!(!guard.is_lost());

    // The coordinated failover, to the replica that lacks the hold.
    let switched = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || {
            let node = cluster
                .nodes
                .iter()
                .find(|n| n.port == replica_port)
                .unwrap();
            let _: () = redis::cmd("CLUSTER")
                .arg("FAILOVER")
                .query(&mut node.conn())
                .unwrap();
            let promoted = wait_until(Duration::from_secs(30), || {
                cluster.master_of(slot).port == replica_port
            });
            assert!(promoted, "the replica took over the lock's slot");
            Instant::now()
        })
    };
    lost_within_bound("cluster: ", switched, &guard).await;
    assert_ne!(cluster.master_of(slot).port, master_port);

    // The watch ends with the client: no connection of it is left open on any node.
    drop(guard);
    drop(client);
    let gone = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(20), || {
            cluster.nodes.iter().all(|n| {
                let list: String = redis::cmd("CLIENT")
                    .arg("LIST")
                    .query(&mut n.conn())
                    .unwrap_or_default();
                !list.contains("name=fa-cluster-watch")
            })
        })
    })
    .await
    .unwrap();
    assert!(gone, "the client's connections closed once it was dropped");
}
