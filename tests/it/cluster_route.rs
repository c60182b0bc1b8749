//! The lock scripts' own routing on a Redis Cluster (`conn/cluster_route.rs`): a slot moved by
//! resharding (`MOVED`), a slot being migrated (`ASK`), a master killed and failed over, and
//! group commit leaving with one pipeline per master. One 3 masters x 1 replica cluster.

use std::time::Duration;

use redis::Commands;
use redisson_lock::{Client, Config};

use crate::support::cluster::{wait_until, Node, TestCluster};

fn id(node: &Node) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node.conn())
        .unwrap()
}

fn on(node: &Node, key: &str) -> bool {
    node.conn().exists(key).unwrap()
}

/// The port of the master serving `slot`, as `node` sees it.
fn master_port(node: &Node, slot: u16) -> Option<u16> {
    let slots: redis::Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut node.conn())
        .ok()?;
    let redis::Value::Array(ranges) = slots else {
        return None;
    };
    ranges.iter().find_map(|r| match r {
        redis::Value::Array(items) => match (items.first(), items.get(1), items.get(2)) {
            (
                Some(redis::Value::Int(lo)),
                Some(redis::Value::Int(hi)),
                Some(redis::Value::Array(m)),
            ) if (*lo..=*hi).contains(&i64::from(slot)) => match m.get(1) {
                Some(redis::Value::Int(p)) => u16::try_from(*p).ok(),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_follow_moved_ask_and_failover_and_batch_per_master() {
    let cluster = TestCluster::start(1);
    // Failover awareness off: its slot map watch (a `CLUSTER SLOTS` every 500 ms) would learn
    // of the reshard below before the lock script is sent (under load, between the move and
    // the lock), and no `MOVED` would come back; the router must follow them on its own.
    let client = Client::with_config(
        Config::cluster(cluster.urls())
            .with_batching(true)
            .with_failover_awareness(false)
            .with_response_timeout(Duration::from_secs(2))
            .with_connection_timeout(Duration::from_secs(1)),
    )
    .await
    .expect("cluster client");

    // MOVED: the slot is resharded to another master after the client learned the map.
    let name = "route-moved";
    client
        .get_lock(name)
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let before = client.stats().redirections;
    let to = cluster.move_slot(cluster.keyslot(name));
    let guard = client.get_lock(name).lock().await.unwrap();
    let new_master = cluster.nodes.iter().find(|n| n.port == to).unwrap();
    assert!(on(new_master, name), "the lock is on the slot's new master");
    assert!(
        client.stats().redirections > before,
        "the MOVED reply was followed by the router: {:?}",
        client.stats()
    );
    guard.unlock().await.unwrap();

    // ASK: the slot is being migrated and the key is not on the source any more.
    let name = "route-ask";
    let s = cluster.keyslot(name);
    client
        .get_lock(name)
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let from = cluster.master_of(s);
    let target = cluster
        .nodes
        .iter()
        .find(|n| n.port != from.port && n.info("replication").contains("role:master"))
        .unwrap();
    let (from_id, target_id) = (id(from), id(target));
    let setslot = |node: &Node, how: &str, whom: &str| {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(s)
            .arg(how)
            .arg(whom)
            .query(&mut node.conn())
            .unwrap();
    };
    setslot(target, "IMPORTING", &from_id);
    setslot(from, "MIGRATING", &target_id);
    let before = client.stats().redirections;
    let guard = client.get_lock(name).lock().await.unwrap();
    assert!(client.stats().redirections > before, "{:?}", client.stats());
    for n in &cluster.nodes {
        let _: redis::RedisResult<()> = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(s)
            .arg("NODE")
            .arg(&target_id)
            .query(&mut n.conn());
    }
    assert!(
        on(target, name),
        "ASKING put the new key on the importing master"
    );
    guard.unlock().await.unwrap();

    // Group commit (without replica sync, as the bench): many tasks on distinct names (so
    // distinct slots) leave with one pipeline per master.
    let batching = Client::with_config(
        Config::cluster(cluster.urls())
            .with_batching(true)
            .with_replica_sync(None),
    )
    .await
    .expect("cluster client");
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let client = batching.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    let g = client
                        .get_lock(format!("route-batch-{i}"))
                        .lock()
                        .await
                        .unwrap();
                    g.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let stats = batching.stats();
    assert!(
        stats.node_pipelines >= 1 && stats.pipelined_operations >= 2 * stats.node_pipelines,
        "queued operations left together, per master: {stats:?}"
    );

    // Failover: the master of a lock's slot is killed and its replica takes over.
    let name = "route-failover";
    let s = cluster.keyslot(name);
    client
        .get_lock(name)
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let old = cluster.master_of(s).port;
    let mut cluster = cluster;
    cluster
        .nodes
        .iter_mut()
        .find(|n| n.port == old)
        .unwrap()
        .kill();
    let survivor = cluster.nodes.iter().find(|n| n.port != old).unwrap();
    let promoted = wait_until(Duration::from_secs(30), || {
        master_port(survivor, s).is_some_and(|p| p != old)
    });
    assert!(promoted, "a replica took over slot {s}");
    let guard = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match client.get_lock(name).try_lock().await {
                Ok(Some(g)) => break g,
                // The first try may meet the dead connection (an unknown outcome).
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await
    .expect("the lock is taken on the new master");
    let now = master_port(survivor, s).unwrap();
    assert_ne!(now, old);
    let master = cluster.nodes.iter().find(|n| n.port == now).unwrap();
    assert!(on(master, name), "the lock is on the promoted master");
    guard.unlock().await.unwrap();
}

/// A coordinated failover (`CLUSTER FAILOVER` on a replica: the old master becomes its
/// replica) promotes a node that never loaded the lock scripts: the first script there gets
/// `NOSCRIPT`, and the load must go to that node. Awareness off, so nothing but the script's
/// own `MOVED` tells the client (redis-rs's slot map, by which it would route `SCRIPT LOAD`
/// to every master, still names the demoted node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_gets_the_scripts_it_never_loaded() {
    let cluster = TestCluster::start(1);
    let client = Client::with_config(
        Config::cluster(cluster.urls())
            .with_failover_awareness(false)
            .with_replica_sync(None),
    )
    .await
    .expect("cluster client");
    let name = "route-promoted";
    let lock = client.get_lock(name);
    lock.lock().await.unwrap().unlock().await.unwrap();
    let s = cluster.keyslot(name);
    let replica = cluster.replica_of(cluster.master_of(s));
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut replica.conn())
        .unwrap();
    let promoted = wait_until(Duration::from_secs(30), || {
        cluster.master_of(s).port == replica.port
    });
    assert!(promoted, "the replica took over slot {s}");

    let guard = lock
        .try_lock()
        .await
        .expect("the script runs on the promoted master");
    let guard = guard.expect("the lock is free");
    assert!(on(replica, name), "the lock is on the promoted master");
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    guard.unlock().await.unwrap();
}
