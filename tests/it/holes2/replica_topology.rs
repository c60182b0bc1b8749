//! Replica topology changes under replica sync (issue 31, area 5). Replica sync
//! (`Config::with_replica_sync`) follows each lock write with `WAIT <replicas> <timeout>`, with
//! the replica count of the lock's master read from `INFO replication`. The tests before this
//! stalled or killed a replica the client had counted; here replicas come and go while the
//! client lives, on a standalone master with replicas, on Sentinel and on a Cluster shard:
//!
//! * a replica gone for good (detached with `REPLICAOF NO ONE`, or killed): at most one write
//!   may fail for want of it (its `WAIT` times out), then every write succeeds with the new
//!   count, and a write that failed left nothing on the master;
//! * a replica added: writes come to wait for it. Shown with every replica then stalled
//!   (SIGSTOP, so the master still counts them): a write must fail with a shortfall that names
//!   the new count, within a bound (the count is read again at least every 2 s).
//!
//! Bugs of this kind: the count cached forever, read only at connect, never read again after a
//! shortfall (every write fails forever once a replica left), a new replica ignored (a count of
//! 0 sends no `WAIT`, so no reply ever shows the new replica: the crate re-read the count only
//! when `WAIT` disagreed, and ignored new replicas of a master that had none, fixed with this
//! test). Every write here goes to one hash tag per topology, so one cached count is tested,
//! not a fresh read for a new slot.

use std::process::Command;
use std::time::Duration;

use redisson_lock::{Client, Config, LockError};

use crate::support::cluster::{wait_until, TestCluster, TestSentinel, MASTER_NAME};
use crate::support::*;

/// `WAIT`'s timeout: every write with no replica confirming lasts this long.
const SYNC: Duration = Duration::from_secs(1);
/// Long enough for a `WAIT` that takes its whole timeout (the writes share one connection).
const RESPONSE: Duration = Duration::from_secs(60);
const BOUND: Duration = Duration::from_secs(30);
const LEASE: Duration = Duration::from_secs(60);

/// `config` with replica sync [`SYNC`] and one try per call: a retry would hide a failed
/// write (its own `WAIT` reads the new count).
fn synced(config: Config) -> Config {
    config
        .with_replica_sync(Some(SYNC))
        .with_response_timeout(RESPONSE)
        .with_retry_attempts(1)
}

/// A sync connection to the server on `port`, tried again within [`BOUND`] (a loaded machine
/// can miss one connect's timeout while a server forks for a full sync), with the port and the
/// last error in the panic.
fn conn(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let deadline = std::time::Instant::now() + BOUND;
    loop {
        match client.get_connection_with_timeout(Duration::from_secs(5)) {
            Ok(c) => return c,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("connect to {port}: {e} (trying again)");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("cannot connect to the server on port {port}: {e}"),
        }
    }
}

fn info(port: u16, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query(&mut conn(port))
        .unwrap_or_default()
}

/// Whether the master on `port` comes to count exactly `n` connected replicas, each online
/// (past its initial sync: it acknowledges what it applied, so `WAIT` counts it).
fn master_counts(port: u16, n: usize) -> bool {
    wait_until(BOUND, || {
        let info = info(port, "replication");
        info.contains(&format!("connected_slaves:{n}\r"))
            && info.matches("state=online").count() == n
    })
}

/// Whether the `n` replicas of the master on `port` come to confirm a write (`WAIT n`) within
/// a bound: past their initial sync and loading, the lock writes' `WAIT`s count them. The probe
/// writes `{tag}:probe` (a key the master serves, on a cluster).
fn acked(port: u16, n: usize, tag: &str) -> bool {
    wait_until(BOUND, || {
        let mut c = conn(port);
        let _: () = redis::cmd("SET")
            .arg(format!("{{{tag}}}:probe"))
            .arg(1)
            .query(&mut c)
            .unwrap();
        redis::cmd("WAIT")
            .arg(n)
            .arg(200)
            .query::<usize>(&mut c)
            .is_ok_and(|acked| acked == n)
    })
}

/// Starts full syncs at once (the default waits 5 s for more replicas to share one).
fn sync_at_once(port: u16) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg(0)
        .query(&mut conn(port))
        .unwrap();
}

/// Whether the replica on `port` comes to have its link to its master up.
fn linked(port: u16) -> bool {
    wait_until(BOUND, || {
        info(port, "replication").contains("master_link_status:up")
    })
}

/// The process id of the server on `port` (`INFO server`), read while it runs.
fn pid(port: u16) -> String {
    info(port, "server")
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .map(|p| p.trim().to_owned())
        .expect("process_id")
}

/// SIGSTOP / SIGCONT of process `pid`.
fn signal(pid: &str, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid)
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

/// Whether `key` exists on the master on `port`.
fn on_master(port: u16, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<bool>(&mut conn(port))
        .unwrap()
}

/// One lock write: an acquire of `name`, kept (detached) on success.
async fn write(client: &Client, name: &str) -> Result<(), LockError> {
    client
        .get_lock(name)
        .try_lock_with_lease(Duration::ZERO, LEASE)
        .await?
        .map(|g| g.detach())
        .ok_or(LockError::InvalidArgument("held by someone else"))
}

/// The master on `master` has lost a replica for good (the caller saw its count drop): of the
/// next writes on `tag`, at most the first fails (with a shortfall, leaving nothing on the
/// master), and every later one succeeds and is on the master.
async fn writes_follow_a_removal(client: &Client, master: u16, tag: &str, what: &str) {
    for i in 0..4 {
        let name = format!("{{{tag}}}:gone:{what}:{i}");
        match write(client, &name).await {
            Ok(()) => assert!(
                on_master(master, &name),
                "{what}: write {i} not on the master"
            ),
            Err(e) if i == 0 && e.is_no_synced_replicas() => {
                let undone = eventually(BOUND, || async { !on_master(master, &name) }).await;
                assert!(
                    undone,
                    "{what}: the write that fell short is left on the master"
                );
            }
            Err(e) => panic!("{what}: write {i} after the replica left: {e}"),
        }
    }
}

/// `replicas` replicas serve the master on `master` now, the last one added while the client
/// lived, and every one of them is stalled: a write on `tag` must come to fail with a shortfall
/// that counts them all, within a bound (writes before it may still use the old count). Leaves
/// nothing of the failed write on the master.
async fn writes_wait_for_an_added_replica(
    client: &Client,
    master: u16,
    tag: &str,
    replicas: i64,
    what: &str,
) {
    let deadline = std::time::Instant::now() + BOUND;
    let mut seen = Vec::new();
    let mut waited = false;
    for n in 0.. {
        if waited || std::time::Instant::now() > deadline {
            break;
        }
        let name = format!("{{{tag}}}:added:{what}:{n}");
        match write(client, &name).await {
            // Still the old count: no `WAIT` for the stalled replicas (or one that a live
            // replica confirmed). Polled, as the count is re-read on its own schedule.
            Ok(()) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(LockError::ReplicaSync { replicas: r, .. }) => {
                let undone = eventually(BOUND, || async { !on_master(master, &name) }).await;
                assert!(
                    undone,
                    "{what}: the write that fell short is left on the master"
                );
                seen.push(r);
                waited = r == replicas;
            }
            Err(e) => panic!("{what}: write {n}: {e}"),
        }
    }
    assert!(
        waited,
        "{what}: writes never waited for the added replica ({replicas} in all); \
         shortfalls seen counted {seen:?}"
    );
}

/// A master and one replica (two servers); the replica leaves (`REPLICAOF NO ONE`) and comes
/// back (`REPLICAOF`), while one client with replica sync lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_replica_detached_then_attached_again() {
    let master = TestServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let tag = "st";
    assert!(linked(replica.port) && master_counts(master.port, 1) && acked(master.port, 1, tag));
    let client = master.client_with(synced).await;
    // The count (1) is read and confirmed, right before the replica leaves.
    write(&client, &format!("{{{tag}}}:first")).await.unwrap();

    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut conn(replica.port))
        .unwrap();
    assert!(master_counts(master.port, 0), "the replica never left");
    writes_follow_a_removal(&client, master.port, tag, "detached").await;

    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut conn(replica.port))
        .unwrap();
    assert!(linked(replica.port) && master_counts(master.port, 1) && acked(master.port, 1, tag));
    replica.pause();
    writes_wait_for_an_added_replica(&client, master.port, tag, 1, "attached").await;
    replica.resume();
    assert!(acked(master.port, 1, tag));
    write(&client, &format!("{{{tag}}}:last")).await.unwrap();
}

/// Sentinel (a master, its replica and three sentinels): a second replica is added (waited
/// for: both stalled, the shortfall counts two), then killed, then the first one too (at most
/// one write fails each time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_replica_added_then_both_removed() {
    let mut s = TestSentinel::start();
    let master = s.master.port;
    let tag = "sn";
    assert!(
        master_counts(master, 1) && acked(master, 1, tag),
        "the replica is not online"
    );
    sync_at_once(master);
    let client = Client::with_config(synced(Config::sentinel(s.sentinel_urls(), MASTER_NAME)))
        .await
        .unwrap();
    write(&client, &format!("{{{tag}}}:first")).await.unwrap();

    let mut added = TestServer::start_with(&["--replicaof", "127.0.0.1", &master.to_string()]);
    assert!(linked(added.port) && master_counts(master, 2) && acked(master, 2, tag));
    let first = pid(s.replica.port);
    signal(&first, "STOP");
    added.pause();
    writes_wait_for_an_added_replica(&client, master, tag, 2, "added").await;
    signal(&first, "CONT");
    added.resume();
    assert!(acked(master, 2, tag));
    write(&client, &format!("{{{tag}}}:both")).await.unwrap();

    added.kill();
    assert!(master_counts(master, 1), "the added replica never left");
    writes_follow_a_removal(&client, master, tag, "added-killed").await;
    // A tag whose count is read right now (its first write), so a count kept after the
    // shortfall would still be fresh for the writes that follow.
    let tag = "sn0";
    write(&client, &format!("{{{tag}}}:first")).await.unwrap();
    s.replica.kill();
    assert!(master_counts(master, 0), "the first replica never left");
    writes_follow_a_removal(&client, master, tag, "first-killed").await;
}

/// A free loopback port (bound, then released), for a node's cluster bus.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// A cluster of three masters without replicas: a replica joins the shard of the client's
/// lock (`CLUSTER MEET`, `CLUSTER REPLICATE`) and is waited for, then it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_replica_joins_a_shard_then_dies() {
    let cluster = TestCluster::start(0);
    let client = Client::with_config(synced(Config::cluster(cluster.urls())))
        .await
        .unwrap();
    let tag = "cl";
    write(&client, &format!("{{{tag}}}:first")).await.unwrap();
    let master = cluster.master_of(cluster.keyslot(tag)).port;
    let master_id: String = redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut conn(master))
        .unwrap();
    sync_at_once(master);

    let bus = free_port().to_string();
    let mut replica = TestServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "2000",
        "--cluster-port",
        &bus,
    ]);
    let _: () = redis::cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(master)
        .query(&mut conn(replica.port))
        .unwrap();
    assert!(
        wait_until(BOUND, || {
            redis::cmd("CLUSTER")
                .arg("NODES")
                .query::<String>(&mut conn(replica.port))
                .is_ok_and(|nodes| nodes.contains(&master_id))
        }),
        "the new node never met the master"
    );
    assert!(
        wait_until(BOUND, || {
            redis::cmd("CLUSTER")
                .arg("REPLICATE")
                .arg(&master_id)
                .query::<()>(&mut conn(replica.port))
                .is_ok()
        }),
        "the new node never became the master's replica"
    );
    assert!(linked(replica.port) && master_counts(master, 1) && acked(master, 1, tag));
    replica.pause();
    writes_wait_for_an_added_replica(&client, master, tag, 1, "joined").await;
    replica.resume();
    assert!(acked(master, 1, tag));
    write(&client, &format!("{{{tag}}}:both")).await.unwrap();

    // A tag of the same master whose count is read right now (its first write), so a count
    // kept after the shortfall would still be fresh for the writes that follow.
    let tag = (0..)
        .map(|i| format!("cl{i}"))
        .find(|t| cluster.master_of(cluster.keyslot(t)).port == master)
        .unwrap();
    write(&client, &format!("{{{tag}}}:first")).await.unwrap();
    replica.kill();
    assert!(master_counts(master, 0), "the replica never left");
    writes_follow_a_removal(&client, master, &tag, "died").await;
}
