//! The cluster parts of issue 23's areas, on one cluster (three masters with a replica each):
//! forming a cluster is the slow part, so every check here runs on the same one in turn.

use crate::support::cluster::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_holes() {
    let cluster = TestCluster::start(1);
    super::watchdog_scale::hundreds_of_watchdog_holds_on_a_cluster(&cluster).await;
    super::subscriptions::cluster_waiters_leave_no_shard_channel_subscribed(&cluster).await;
    super::subscriptions::cluster_waiters_survive_a_cut_subscriber(&cluster).await;
}
