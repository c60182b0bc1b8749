//! Sentinel: replica sync under group commit (issue 23, area 7) and the failover signals
//! (area 8), on one master, replica and three sentinels.
//!
//! Failover signals: after a failover the old master answers writes with `READONLY`, or, as a
//! replica that lost its master with `replica-serve-stale-data no`, with `MASTERDOWN`. Either
//! reply must make the client ask the sentinels again. Each is tested on its own: the roles are
//! swapped by hand (`REPLICAOF`) and the sentinels told the new master (`SENTINEL REMOVE` /
//! `MONITOR`), so no instance is killed and no connection is cut. A real failover's `CLIENT
//! KILL` would re-resolve the master anyway and hide a client that ignores the reply. The
//! server's `errorstat_<CODE>` proves the client met the signal.

use std::time::Duration;

use redis::Commands;

use crate::support::cluster::{wait_until, Node, TestSentinel, MASTER_NAME};
use crate::support::*;
use redisson_lock::{Client, Config};

const BOUND: Duration = Duration::from_secs(30);

fn sentinel_client(s: &TestSentinel) -> Config {
    Config::sentinel(s.sentinel_urls(), MASTER_NAME)
        .with_response_timeout(Duration::from_secs(2))
        .with_connection_timeout(Duration::from_secs(2))
}

/// `errorstat_<code>`'s count on `node` (0 when it never replied so).
fn errors(node: &Node, code: &str) -> u64 {
    node.info("errorstats")
        .lines()
        .find_map(|l| l.strip_prefix(&format!("errorstat_{code}:count=")))
        .and_then(|n| n.split(',').next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Makes `new` the master (the sentinels' too) and `old` a replica of `old_master_of`, without
/// killing anything: sentinels forget the master, the roles swap, sentinels monitor `new`.
fn swap(s: &TestSentinel, new: &Node, old: &Node, old_master_of: u16) {
    for sentinel in &s.sentinels {
        let _: () = redis::cmd("SENTINEL")
            .arg("REMOVE")
            .arg(MASTER_NAME)
            .query(&mut sentinel.conn())
            .unwrap();
    }
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut new.conn())
        .unwrap();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(old_master_of)
        .query(&mut old.conn())
        .unwrap();
    for sentinel in &s.sentinels {
        let _: () = redis::cmd("SENTINEL")
            .arg("MONITOR")
            .arg(MASTER_NAME)
            .arg("127.0.0.1")
            .arg(new.port)
            .arg(2)
            .query(&mut sentinel.conn())
            .unwrap();
    }
    assert!(
        wait_until(BOUND, || s.master_port() == Some(new.port)),
        "the sentinels name the new master"
    );
}

/// The client's next write meets `code` on the old master and lands on the new one.
async fn signal_sends_the_client_to_the_new_master(
    client: &Client,
    old: &Node,
    new: &Node,
    code: &str,
    name: &str,
) {
    let before = errors(old, code);
    let guard = client
        .get_lock(name)
        .lock()
        .await
        .unwrap_or_else(|e| panic!("after {code}: {e}"));
    assert!(
        errors(old, code) > before,
        "the old master never answered {code}: the signal went untested"
    );
    let held: bool = new.conn().exists(name).unwrap();
    assert!(held, "after {code}: the lock is not on the new master");
    guard.unlock().await.unwrap();
    let held: bool = new.conn().exists(name).unwrap();
    assert!(
        !held,
        "after {code}: the release did not reach the new master"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_holes() {
    let s = TestSentinel::start();

    // Area 7: a stalled replica fails every acquire, batching off and on.
    for batching in [false, true] {
        let client = Client::with_config(
            sentinel_client(&s)
                .with_replica_sync(Some(super::replica_sync::SYNC))
                .with_response_timeout(super::replica_sync::RESPONSE)
                .with_retry_attempts(1)
                .with_batching(batching),
        )
        .await
        .unwrap();
        let master = s.master.url();
        super::replica_sync::stalled_replica_fails_every_acquire(
            &client,
            &s.replica,
            &s.master,
            &format!("sn{batching}"),
            |key| {
                let master = master.clone();
                async move {
                    let mut c = redis::Client::open(master)
                        .unwrap()
                        .get_multiplexed_async_connection()
                        .await
                        .unwrap();
                    exists(&mut c, &key).await
                }
            },
        )
        .await;
    }

    // Area 8: READONLY from the old master, demoted while the client's connection stays open.
    let client = Client::with_config(sentinel_client(&s).with_retry_attempts(5))
        .await
        .unwrap();
    take_and_release(&client.get_lock("fo:warm")).await;
    swap(&s, &s.replica, &s.master, s.replica.port);
    signal_sends_the_client_to_the_new_master(&client, &s.master, &s.replica, "READONLY", "fo:ro")
        .await;

    // MASTERDOWN: the master (now the first replica) turns into a replica of a dead master
    // that refuses stale reads; the other instance becomes the master again.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-serve-stale-data")
        .arg("no")
        .query(&mut s.replica.conn())
        .unwrap();
    take_and_release(&client.get_lock("fo:warm")).await;
    swap(&s, &s.master, &s.replica, dead);
    signal_sends_the_client_to_the_new_master(
        &client,
        &s.replica,
        &s.master,
        "MASTERDOWN",
        "fo:down",
    )
    .await;
}
