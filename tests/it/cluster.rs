//! Redis Cluster: a real 3-master cluster (with one replica each) on loopback ports.

use std::time::{Duration, Instant};

use crate::support::cluster::{wait_until, TestCluster};
use crate::support::{
    assert_invalid, eventually, finished, held_for_a_minute, hold_as_java, subscribed,
    take_and_release, try_lock_detached, SPLIT_NAMES,
};
use redis::AsyncCommands;
use redisson_lock::{Client, Config, ShardedPubSub};

async fn client(cluster: &TestCluster, f: impl FnOnce(Config) -> Config) -> Client {
    Client::with_config(f(Config::cluster(cluster.urls())))
        .await
        .expect("cluster client")
}

/// A raw cluster connection: what another (e.g. Java) client sees.
async fn raw(cluster: &TestCluster) -> redis::cluster_async::ClusterConnection {
    redis::cluster::ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap()
}

/// One cluster serves every test in this file, one after another: starting six servers and
/// forming a cluster is the slow part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_suite() {
    let cluster = TestCluster::start(1);
    locks_in_many_slots_and_hash_tags(&cluster).await;
    names_that_split_across_slots_are_refused_before_anything_is_sent(&cluster).await;
    sharded_pubsub_wakes_waiters_across_clients(&cluster).await;
    foreign_spublish_wakes_us_and_our_release_reaches_foreign_ssubscribers(&cluster).await;
    watchdog_renews_locks_in_different_slots(&cluster).await;
    read_write_and_fair_locks_work_on_the_cluster(&cluster).await;
    plain_pubsub_mode_still_wakes(&cluster).await;
    replica_sync_failure_undoes_the_acquire(&cluster).await;
    slot_moved_while_waiting(&cluster).await;
}

/// Issue 10, defect 3: with Redisson's naming rule, a name with unbalanced or empty braces puts
/// its channel or unlock latch in another slot than the key. Such a lock used to be taken and
/// then never released (`CROSSSLOT` on unlock, renewed forever). Every lock kind must refuse it
/// up front, leave nothing in Redis, and keep working for names with a proper hash tag.
async fn names_that_split_across_slots_are_refused_before_anything_is_sent(cluster: &TestCluster) {
    let c = client(cluster, |c| c).await;
    let mut raw = raw(cluster).await;
    for name in SPLIT_NAMES {
        let rw = c.get_read_write_lock(name);
        // A lock that cannot be released must not be taken.
        let results = [
            ("rlock", try_lock_detached(&c.get_lock(name)).await),
            ("fair", try_lock_detached(&c.get_fair_lock(name)).await),
            ("fenced", try_lock_detached(&c.get_fenced_lock(name)).await),
            ("read", try_lock_detached(&rw.read_lock()).await),
            ("write", try_lock_detached(&rw.write_lock()).await),
        ];
        for (kind, r) in results {
            assert_invalid(r, &format!("{kind} {name:?}"));
        }
        assert_invalid(c.get_lock(name).unlock().await, "unlock");
        assert_invalid(c.get_lock(name).force_unlock().await, "force_unlock");
        let exists: bool = raw.exists(name).await.unwrap();
        assert!(!exists, "{name:?}: something was written");
    }
    assert_eq!(
        c.stats().watched_holds,
        0,
        "a refused name is being renewed"
    );
    // Names with one non-empty tag, or no braces, work for every kind.
    for name in ["a{b}c", "{user1}:lock", "plain-name"] {
        take_and_release(&c.get_lock(name)).await;
        take_and_release(&c.get_fair_lock(name)).await;
        take_and_release(&c.get_fenced_lock(name)).await;
        let rw = c.get_read_write_lock(name);
        rw.read_lock().lock().await.unwrap().unlock().await.unwrap();
        take_and_release(&rw.write_lock()).await;
        let exists: bool = raw.exists(name).await.unwrap();
        assert!(!exists, "{name:?} left its key behind");
    }
}

async fn locks_in_many_slots_and_hash_tags(cluster: &TestCluster) {
    let c = client(cluster, |c| c).await;
    assert!(
        c.is_sharded_pubsub(),
        "Redis 7 cluster: AUTO picks sharded pub/sub"
    );
    let mut raw = raw(cluster).await;
    let names: Vec<String> = (0..40)
        .map(|i| format!("cl-lock-{i}"))
        .chain((0..5).map(|i| format!("{{user{i}}}:lock")))
        .collect();
    let slots: std::collections::HashSet<u16> = names.iter().map(|n| cluster.keyslot(n)).collect();
    assert!(slots.len() > 20, "names spread over many slots");
    for name in &names {
        let lock = c.get_lock(name.clone());
        let g = lock.lock().await.unwrap();
        let fields: Vec<String> = raw.hkeys(name).await.unwrap();
        assert_eq!(fields.len(), 1, "{name}");
        assert!(fields[0].starts_with(c.id()), "{name}");
        let inner = g.reenter().await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 2);
        inner.unlock().await.unwrap();
        g.unlock().await.unwrap();
        let exists: bool = raw.exists(name).await.unwrap();
        assert!(!exists, "{name} released");
    }
}

async fn sharded_pubsub_wakes_waiters_across_clients(cluster: &TestCluster) {
    let a = client(cluster, |c| c).await;
    let b = client(cluster, |c| c).await;
    for name in ["cl-wake-1", "{tag}:cl-wake-2", "cl-wake-3"] {
        // A long lease: only the release message can wake the waiter in time.
        let held = held_for_a_minute(&a.get_lock(name)).await;
        let lock = b.get_lock(name);
        let waiter = tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            let at = Instant::now();
            g.unlock().await.unwrap();
            at
        });
        assert!(subscribed(&b, 1).await, "waiter subscribed");
        let released = Instant::now();
        held.unlock().await.unwrap();
        let acquired = tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("waiter woken well before the 60 s lease")
            .unwrap();
        assert!(acquired >= released);
    }
}

/// A task of `c` waiting for the lock `name` (held by Java) that keeps the hold it gets,
/// returned once `c` is subscribed to its channel.
async fn parked_behind_java(
    c: &Client,
    name: &str,
) -> tokio::task::JoinHandle<redisson_lock::Result<()>> {
    let lock = c.get_lock(name);
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) });
    assert!(subscribed(c, 1).await);
    waiter
}

/// Java's release message on a sharded channel: `SPUBLISH <channel> 0` on `node`.
fn java_release_message(node: &mut redis::Connection, channel: &str) {
    let _: i64 = redis::cmd("SPUBLISH")
        .arg(channel)
        .arg("0")
        .query(node)
        .unwrap();
}

async fn foreign_spublish_wakes_us_and_our_release_reaches_foreign_ssubscribers(
    cluster: &TestCluster,
) {
    let c = client(cluster, |c| c).await;
    let name = "cl-foreign";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut raw = raw(cluster).await;
    // A Java client holds the lock.
    hold_as_java(&mut raw, name, "java-uuid:1").await;
    let waiter = parked_behind_java(&c, name).await;
    // The Java client releases: DEL, then SPUBLISH on the node owning the channel's slot.
    let _: () = raw.del(name).await.unwrap();
    let mut node = cluster.master_of(cluster.keyslot(&channel)).conn();
    java_release_message(&mut node, &channel);
    finished(
        waiter,
        Duration::from_secs(20),
        "woken by the foreign SPUBLISH, not the 60 s TTL",
    )
    .await;
    let lock = c.get_lock(name);
    assert_eq!(
        lock.hold_count().await.unwrap(),
        0,
        "detached hold belongs to the waiter task"
    );

    // A foreign SSUBSCRIBEr hears our release.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut listener = redis::cluster::ClusterClientBuilder::new(cluster.urls())
        .use_protocol(redis::ProtocolVersion::RESP3)
        .push_sender(tx)
        .build()
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    listener.ssubscribe(&channel).await.unwrap();
    let _: () = raw.del(name).await.unwrap();
    let g = c.get_lock(name).lock().await.unwrap();
    g.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(push) = rx.recv().await {
            if push.kind == redis::PushKind::SMessage {
                return push.data;
            }
        }
        Vec::new()
    })
    .await
    .expect("smessage");
    assert_eq!(got.get(1), Some(&redis::Value::BulkString(b"0".to_vec())));
}

async fn watchdog_renews_locks_in_different_slots(cluster: &TestCluster) {
    let c = client(cluster, |c| {
        c.with_watchdog_timeout(Duration::from_millis(1500))
    })
    .await;
    let names = ["cl-wd-a", "cl-wd-b", "cl-wd-c", "cl-wd-d"];
    assert!(
        names
            .iter()
            .map(|n| cluster.keyslot(n))
            .collect::<std::collections::HashSet<_>>()
            .len()
            > 1
    );
    let mut guards = Vec::new();
    for n in names {
        guards.push(c.get_lock(n).lock().await.unwrap());
    }
    // Three leases: without renewal every key would be gone.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let mut raw = raw(cluster).await;
    for n in names {
        let exists: bool = raw.exists(n).await.unwrap();
        assert!(exists, "{n} renewed (one script per slot)");
    }
    for g in guards {
        assert!(!g.is_lost());
        g.unlock().await.unwrap();
    }
}

async fn read_write_and_fair_locks_work_on_the_cluster(cluster: &TestCluster) {
    let c = client(cluster, |c| c).await;
    let rw = c.get_read_write_lock("cl-rw");
    let r = rw.read_lock().lock().await.unwrap();
    // Another owner's writer is kept out (this task's own would be refused: `Reentry`).
    let other_writer = rw.write_lock().with_owner(redisson_lock::LockOwner::new(2));
    assert!(other_writer.try_lock().await.unwrap().is_none());
    assert!(rw.write_lock().try_lock().await.unwrap_err().is_reentry());
    let wl = rw.write_lock();
    let writer = tokio::spawn(async move { wl.lock().await.unwrap().unlock().await.unwrap() });
    r.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), writer)
        .await
        .unwrap()
        .unwrap();

    let fair = c.get_fair_lock("cl-fair");
    let held = held_for_a_minute(&fair).await;
    let f2 = fair.clone();
    let waiter = tokio::spawn(async move { f2.lock().await.unwrap().unlock().await.unwrap() });
    let mut raw = raw(cluster).await;
    assert!(
        eventually(Duration::from_secs(10), || {
            let mut raw = raw.clone();
            async move {
                raw.llen::<_, i64>("redisson_lock_queue:{cl-fair}")
                    .await
                    .unwrap_or(0)
                    == 1
            }
        })
        .await
    );
    held.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .unwrap()
        .unwrap();
    let queued: i64 = raw.llen("redisson_lock_queue:{cl-fair}").await.unwrap();
    assert_eq!(queued, 0);
}

async fn plain_pubsub_mode_still_wakes(cluster: &TestCluster) {
    let a = client(cluster, |c| c.with_sharded_pubsub(ShardedPubSub::Off)).await;
    let b = client(cluster, |c| c.with_sharded_pubsub(ShardedPubSub::Off)).await;
    assert!(!a.is_sharded_pubsub());
    let held = held_for_a_minute(&a.get_lock("cl-plain")).await;
    let lock = b.get_lock("cl-plain");
    let waiter = tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() });
    assert!(subscribed(&b, 1).await);
    held.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .unwrap()
        .unwrap();
}

async fn replica_sync_failure_undoes_the_acquire(cluster: &TestCluster) {
    let name = "cl-sync";
    let c = client(cluster, |c| {
        c.with_replica_sync(Some(Duration::from_millis(300)))
    })
    .await;
    // Warm the replica count cache while the replica is healthy.
    take_and_release(&c.get_lock(name)).await;
    let master = cluster.master_of(cluster.keyslot(name));
    let replica = cluster
        .nodes
        .iter()
        .find(|n| {
            n.info("replication")
                .contains(&format!("master_port:{}", master.port))
        })
        .expect("the master has a replica");
    let pid: i64 = {
        replica
            .info("server")
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|p| p.trim().parse().ok())
            .unwrap()
    };
    let signal = |sig: &str| {
        std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .unwrap();
    };
    signal("STOP");
    let r = c.get_lock(name).try_lock().await;
    signal("CONT");
    let err = r.expect_err("no replica confirmed the write");
    assert!(err.is_no_synced_replicas(), "{err}");
    // The acquire was undone: no hold of ours remains.
    let mut raw = raw(cluster).await;
    assert!(
        eventually(Duration::from_secs(10), || {
            let mut raw = raw.clone();
            async move { !raw.exists::<_, bool>(name).await.unwrap_or(true) }
        })
        .await,
        "acquire undone"
    );
    let _ = &mut raw;
    // And after the replica is back, locking works again.
    assert!(wait_until(Duration::from_secs(10), || {
        master.info("replication").contains("connected_slaves:1")
    }));
    let g = c.get_lock(name).lock().await.unwrap();
    g.unlock().await.unwrap();
}

async fn slot_moved_while_waiting(cluster: &TestCluster) {
    let name = "cl-move";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    assert_eq!(cluster.keyslot(name), cluster.keyslot(&channel));
    let c = client(cluster, |c| c).await;
    let mut raw = raw(cluster).await;
    // A foreign holder with a long TTL.
    hold_as_java(&mut raw, name, "java-uuid:9").await;
    let waiter = parked_behind_java(&c, name).await;
    let old = cluster.master_of(cluster.keyslot(name)).port;
    let new = cluster.move_slot(cluster.keyslot(name));
    assert_ne!(old, new);
    // Let our subscriber follow the slot to its new owner, then release as Java would there.
    let mut node = cluster.master_of(cluster.keyslot(name)).conn();
    assert!(
        wait_until(Duration::from_secs(20), || {
            let n: Vec<redis::Value> = redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg(&channel)
                .query(&mut node)
                .unwrap_or_default();
            matches!(n.get(1), Some(redis::Value::Int(1)))
        }),
        "waiter resubscribed at the new owner"
    );
    let _: i64 = redis::cmd("DEL").arg(name).query(&mut node).unwrap();
    java_release_message(&mut node, &channel);
    finished(
        waiter,
        Duration::from_secs(30),
        "acquired well before the 60 s TTL",
    )
    .await;
    let holder: Vec<String> = redis::cmd("HKEYS").arg(name).query(&mut node).unwrap();
    assert_eq!(holder.len(), 1);
    assert!(holder[0].starts_with(c.id()));
}
