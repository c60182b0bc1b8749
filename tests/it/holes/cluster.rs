//! The cluster parts of issue 23's areas, on one cluster (three masters with a replica each):
//! forming a cluster is the slow part, so every check here runs on the same one in turn.

use redis::AsyncCommands;
use redisson_lock::{Client, Config};

use crate::support::cluster::{Node, TestCluster};

/// The master serving `key` and its replica.
fn master_and_replica<'c>(cluster: &'c TestCluster, key: &str) -> (&'c Node, &'c Node) {
    let master = cluster.master_of(cluster.keyslot(key));
    let replica = cluster
        .nodes
        .iter()
        .find(|n| {
            n.info("replication")
                .contains(&format!("master_port:{}", master.port))
        })
        .expect("the master has a replica");
    (master, replica)
}

/// Area 7 on the cluster: a stalled replica fails every acquire, batching off and on.
async fn stalled_replica_under_group_commit(cluster: &TestCluster) {
    let raw = redis::cluster::ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    for batching in [false, true] {
        let tag = format!("cl{batching}");
        let (master, replica) = master_and_replica(cluster, &format!("{{rs{tag}}}:0"));
        let client = Client::with_config(
            Config::cluster(cluster.urls())
                .with_replica_sync(Some(super::replica_sync::SYNC))
                .with_response_timeout(super::replica_sync::RESPONSE)
                .with_retry_attempts(1)
                .with_batching(batching),
        )
        .await
        .unwrap();
        super::replica_sync::stalled_replica_fails_every_acquire(
            &client,
            replica,
            master,
            &tag,
            |key| {
                let mut raw = raw.clone();
                async move { raw.exists::<_, bool>(key).await.unwrap_or(true) }
            },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_holes() {
    let cluster = TestCluster::start(1);
    super::watchdog_scale::hundreds_of_watchdog_holds_on_a_cluster(&cluster).await;
    super::subscriptions::cluster_waiters_leave_no_shard_channel_subscribed(&cluster).await;
    super::subscriptions::cluster_waiters_survive_a_cut_subscriber(&cluster).await;
    stalled_replica_under_group_commit(&cluster).await;
}
