//! Recovery paths with group commit on (issue 31, area 4): one matrix, recovery path x
//! batching off/on. Lone calls were tested to recover; a batch (`lua/batch.lua`, or the few
//! queued scripts sent as one pipeline) has recovery paths of its own, and each is run here
//! with operations queued behind a write pause (`CLIENT PAUSE WRITE`): the first 16 go out
//! alone (`MAX_DIRECT`) and block, the next 24 queue (the client's `queued_operations` says
//! when) and leave as a batch once the pause ends. The fault is set up while they wait:
//!
//! * `NOSCRIPT`: `SCRIPT FLUSH`: the batch script must be loaded and the batch sent again;
//! * reconnect: the fault proxy forwards the batch (or, without batching, one lone script),
//!   swallows the reply and closes the connection: the batch ran and no one knows; every
//!   operation's outcome is unknown and must be settled by the trim, never by a blind resend;
//! * `READONLY` / `MASTERDOWN`: the master is turned into a replica (of a port nothing listens
//!   on, so its data stays; with `replica-serve-stale-data no` for `MASTERDOWN`): every write
//!   is refused and retried, and succeeds once it is a master again (`REPLICAOF NO ONE`, done
//!   after the server counted the refusals: `errorstat_<CODE>`);
//! * replica shortfall: with replica sync on, the replica stalled (SIGSTOP): every operation
//!   of the batch fails with the shortfall and is undone;
//! * `MOVED` / `ASK`, on a cluster: the lock's (empty) slot moves to another master, or is in
//!   migration to it, while the operations wait in the client's queue (behind lone calls
//!   paused on a third master) or, without batching, before the client knows.
//!
//! The workload: 40 owners, each holding its own lock (once, or twice for odd owners); during
//! the pile-up even owners re-enter (count 2) and odd owners release their second hold (count
//! 1). Afterwards every operation must have succeeded, every hash must hold exactly its owner
//! with the count the client believes, and releasing every guard must delete every lock (an
//! inflated or lost count leaves a key or fails a release).
//!
//! Bugs of this kind: the batch not reloading its script on `NOSCRIPT` (every operation gets
//! the error), the batch resent blindly after a lost reply (inflated hold counts), `READONLY`
//! inside a batch taken for a reply (a grant the server never wrote), `MOVED` in a batch not
//! re-routed, a shortfall reported to only one operation of a batch.

use std::time::Duration;

use redis::AsyncCommands;
use redisson_lock::{Client, Config, LockOwner, RLockGuard};

use crate::support::cluster::{wait_until, TestCluster};
use crate::support::proxy::Proxy;
use crate::support::*;

/// Operations at once: 16 go out alone (`MAX_DIRECT`), 24 queue (at least `BATCH_MIN`).
const N: usize = 40;
const ALONE: usize = 16;
const LEASE: Duration = Duration::from_secs(120);
const BOUND: Duration = Duration::from_secs(30);
/// Replica sync's timeout in the shortfall cell (each `WAIT` with the replica stopped lasts
/// this long, one after another on the client's connection).
const SYNC: Duration = Duration::from_millis(200);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    NoScript,
    Reconnect,
    ReadOnly,
    MasterDown,
    Shortfall,
}

/// `errorstat_<code>`'s count on the server behind `raw` (0 when it never replied so).
async fn errors(raw: &mut redis::aio::MultiplexedConnection, code: &str) -> u64 {
    info(raw, "errorstats")
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&format!("errorstat_{code}:count=")))
        .and_then(|n| n.split(',').next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

async fn cmd(raw: &mut redis::aio::MultiplexedConnection, args: &[&str]) {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    let _: redis::Value = c.query_async(raw).await.unwrap();
}

/// `EVALSHA`s the server took so far, run or refused (`cmdstat_evalsha`'s `calls` and
/// `rejected_calls`).
async fn evalshas(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
    let stats = info(raw, "commandstats").await;
    let Some(line) = stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
    else {
        return 0;
    };
    line.split(',')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == "calls" || *k == "rejected_calls")
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// A port nothing listens on (bound, then released): a master that never answers.
fn dead_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port().to_string())
        .unwrap()
}

/// Waits until the client's operations have piled up: with batching, `n - ALONE` queued (the
/// rest are out, blocked by the pause); without, a script blocked on the server.
async fn piled_up(client: &Client, server: &TestServer, n: usize, what: &str) {
    let ok = if client.config().batching() {
        eventually(BOUND, || async {
            client.stats().queued_operations == n - ALONE
        })
        .await
    } else {
        script_parked(server).await
    };
    assert!(
        ok,
        "{what}: the operations never piled up: {:?}",
        client.stats()
    );
}

/// Joins `tasks` within a bound.
async fn join<T>(tasks: Vec<tokio::task::JoinHandle<T>>, what: &str) -> Vec<T> {
    let all = futures_util::future::join_all(tasks);
    tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .unwrap_or_else(|_| panic!("{what}: operations hung"))
        .into_iter()
        .map(|r| r.expect("no panic"))
        .collect()
}

/// One cell of the matrix on a standalone server (see the module's doc).
async fn cell(path: Path, batching: bool) {
    let what = format!("{path:?}, batching {batching}");
    if path == Path::Shortfall {
        return shortfall_cell(batching, &what).await;
    }
    let server = TestServer::start();
    let proxy = match path {
        Path::Reconnect => Some(Proxy::start(server.port).await),
        _ => None,
    };
    let url = proxy.as_ref().map_or(server.url(), Proxy::url);
    let client = Client::with_config(
        Config::new(url)
            .with_batching(batching)
            .with_retry_attempts(40)
            .with_retry_delay(Duration::from_millis(200))
            .with_response_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    let mut raw = server.conn().await;
    let p = "rec";
    let lock = |i: usize| {
        client
            .get_lock(format!("{p}:{i}"))
            .with_owner(LockOwner::new(1 + i as u64))
    };
    // Each owner holds its lock once; odd owners twice.
    let mut firsts = Vec::new();
    let mut seconds: Vec<Option<RLockGuard>> = Vec::new();
    for i in 0..N {
        firsts.push(lock(i).lock_with_lease(LEASE).await.unwrap());
        seconds.push(match i % 2 {
            1 => Some(lock(i).lock_with_lease(LEASE).await.unwrap()),
            _ => None,
        });
    }
    let before = client.stats();

    cmd(&mut raw, &["CLIENT", "PAUSE", "60000", "WRITE"]).await;
    if let Some(proxy) = &proxy {
        // The first request carrying a batch (a header of a lock.lua operation: three bytes,
        // the first 1) or, without batching, owner 5's re-entry.
        match batching {
            true => proxy.drop_reply_after(b"\r\n$3\r\n\x01"),
            false => proxy.drop_reply_after(format!("\r\n{p}:4\r\n").as_bytes()),
        }
    }
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let (lock, second) = (lock(i), seconds[i].take());
            tokio::spawn(async move {
                match second {
                    None => lock.lock_with_lease(LEASE).await.map(Some),
                    Some(g) => g.unlock().await.map(|()| None),
                }
            })
        })
        .collect();
    piled_up(&client, &server, N, &what).await;
    // Nothing has run since the pause: from here on, each lone operation sends its script at
    // most twice (`NOSCRIPT`, then after loading it) and the batch too.
    let sent_before = evalshas(&mut raw).await;
    match path {
        Path::NoScript => cmd(&mut raw, &["SCRIPT", "FLUSH"]).await,
        Path::ReadOnly => cmd(&mut raw, &["REPLICAOF", "127.0.0.1", &dead_port()]).await,
        Path::MasterDown => {
            cmd(
                &mut raw,
                &["CONFIG", "SET", "replica-serve-stale-data", "no"],
            )
            .await;
            cmd(&mut raw, &["REPLICAOF", "127.0.0.1", &dead_port()]).await;
        }
        Path::Reconnect | Path::Shortfall => {}
    }
    let (readonly, masterdown) = (
        errors(&mut raw, "READONLY").await,
        errors(&mut raw, "MASTERDOWN").await,
    );
    cmd(&mut raw, &["CLIENT", "UNPAUSE"]).await;
    let batched = || async { !batching || client.stats().batches > before.batches };
    match path {
        Path::Reconnect => {
            let proxy = proxy.as_ref().unwrap();
            assert!(
                proxy.wait_dropped(1, BOUND).await,
                "{what}: the trap never fired"
            );
        }
        Path::ReadOnly | Path::MasterDown => {
            // Every operation refused at least once before the server is a master again: each
            // script's write raises READONLY (inside a batch too: one per operation), while
            // MASTERDOWN refuses the whole call (the batch once).
            let (code, from, refusals) = match path {
                Path::ReadOnly => ("READONLY", readonly, N as u64),
                _ => (
                    "MASTERDOWN",
                    masterdown,
                    (1 + N - ALONE * usize::from(batching)) as u64,
                ),
            };
            let refused = eventually(BOUND, || async {
                errors(&mut server.conn().await, code).await >= from + refusals && batched().await
            })
            .await;
            assert!(refused, "{what}: the writes were never refused with {code}");
            cmd(&mut raw, &["REPLICAOF", "NO", "ONE"]).await;
            cmd(
                &mut raw,
                &["CONFIG", "SET", "replica-serve-stale-data", "yes"],
            )
            .await;
        }
        Path::NoScript | Path::Shortfall => {}
    }

    let results = join(tasks, &what).await;
    let after = client.stats();
    if batching {
        assert!(
            after.batches > before.batches,
            "{what}: no batch was sent, the batch's path went untested: {after:?}"
        );
    }
    let mut again = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(g) => again.push(g),
            Err(e) => panic!("{what}: operation {i} failed: {e}"),
        }
    }
    // What Redis holds: each lock its one owner, with the count the client booked.
    for i in 0..N {
        let key = format!("{p}:{i}");
        let held = fields(&mut raw, &key).await;
        let owner = field(&client, LockOwner::new(1 + i as u64));
        let count = if i % 2 == 0 { 2 } else { 1 };
        assert_eq!(
            held,
            [(owner, count)].into_iter().collect(),
            "{what}: {key} after the recovery"
        );
    }
    // The batch itself recovered: it loaded its own script and ran again as one batch. Had it
    // handed NOSCRIPT to each operation, each would have reloaded its own script and gone
    // alone (24 more sends; on a busy client, queued again, they would meet NOSCRIPT again).
    if path == Path::NoScript && batching {
        let sent = evalshas(&mut raw).await - sent_before;
        assert!(
            sent <= 2 * ALONE as u64 + 2,
            "{what}: {sent} EVALSHAs after the flush: the batch did not recover as a batch"
        );
    }
    // Releasing every guard deletes every lock: no count inflated, none lost.
    for (i, g) in firsts.into_iter().enumerate() {
        if let Some(g) = again[i].take() {
            g.unlock()
                .await
                .unwrap_or_else(|e| panic!("{what}: {i}: {e}"));
        }
        g.unlock()
            .await
            .unwrap_or_else(|e| panic!("{what}: {i}: {e}"));
        let key = format!("{p}:{i}");
        assert!(
            !exists(&mut raw, &key).await,
            "{what}: {key} left after every release: {:?}",
            fields(&mut raw, &key).await
        );
    }
    assert_no_tracked_holds(&client, BOUND).await;
}

/// Whether the replica of `server` comes to confirm a write (`WAIT 1`) within a bound: past its
/// initial sync and loading, the lock writes' `WAIT`s count it.
async fn acks(server: &TestServer) -> bool {
    eventually(BOUND, || async {
        let mut raw = server.conn().await;
        let _: () = raw.set("probe:acks", 1).await.unwrap();
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(200)
            .query_async(&mut raw)
            .await
            .unwrap();
        acked == 1
    })
    .await
}

/// The shortfall cell: a master and a stalled replica, replica sync on, one try per call; 24
/// fresh acquires at once (8 queue: a batch with batching on) each fail with the shortfall and
/// leave nothing, on the master or in the client; with the replica back, they succeed.
async fn shortfall_cell(batching: bool, what: &str) {
    const M: usize = ALONE + 8;
    let server = TestServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = server.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut raw = server.conn().await;
    assert!(
        acks(&server).await,
        "{what}: the replica never confirmed a write"
    );
    let client = Client::with_config(
        server
            .config()
            .with_batching(batching)
            .with_replica_sync(Some(SYNC))
            .with_retry_attempts(1)
            .with_response_timeout(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let p = "short";
    let lock = |i: usize| {
        client
            .get_lock(format!("{p}:{i}"))
            .with_owner(LockOwner::new(1 + i as u64))
    };
    // The replica count (1) is read by the first operations, before the replica stops (an
    // acquire of this client before the pause could fall short of a replica slow under load,
    // at this short sync timeout).
    let before = client.stats();

    cmd(&mut raw, &["CLIENT", "PAUSE", "60000", "WRITE"]).await;
    let tasks: Vec<_> = (0..M)
        .map(|i| {
            let lock = lock(i);
            tokio::spawn(async move {
                lock.try_lock_with_lease(Duration::ZERO, LEASE)
                    .await
                    .map(|g| g.map(|g| g.detach()).is_some())
            })
        })
        .collect();
    piled_up(&client, &server, M, what).await;
    replica.pause();
    cmd(&mut raw, &["CLIENT", "UNPAUSE"]).await;
    let results = join(tasks, what).await;
    let after = client.stats();
    // Undone on the master while the replica is still stopped.
    let held = || async {
        let mut raw = server.conn().await;
        let mut left = Vec::new();
        for i in 0..M {
            let key = format!("{p}:{i}");
            if exists(&mut raw, &key).await {
                left.push(key);
            }
        }
        left
    };
    eventually(BOUND, || async { held().await.is_empty() }).await;
    let left = held().await;
    let untracked = eventually(BOUND, || async { client.stats().tracked_holds == 0 }).await;
    replica.resume();

    for (i, r) in results.into_iter().enumerate() {
        match r {
            Err(e) if e.is_no_synced_replicas() => {}
            other => panic!("{what}: acquire {i} was not failed by the shortfall: {other:?}"),
        }
    }
    assert!(
        left.is_empty(),
        "{what}: unconfirmed acquires left {left:?}"
    );
    assert!(
        untracked,
        "{what}: holds left tracked: {:?}",
        client.stats()
    );
    if batching {
        assert!(
            after.batches > before.batches,
            "{what}: no batch was sent, the batch's path went untested: {after:?}"
        );
    }
    // The replica back: the same acquires come to be confirmed (one may still fall short of
    // a replica slow under load, at this short sync timeout: it is undone, and tried again).
    assert!(acks(&server).await, "{what}: the replica never came back");
    for i in 0..2 {
        let confirmed = eventually(BOUND, || async {
            match lock(i).try_lock_with_lease(Duration::ZERO, LEASE).await {
                Ok(Some(g)) => g.unlock().await.is_ok(),
                Ok(None) => false,
                Err(e) if e.is_no_synced_replicas() => false,
                Err(e) => panic!("{what}: acquire {i} with the replica back: {e}"),
            }
        })
        .await;
        assert!(
            confirmed,
            "{what}: acquire {i} never confirmed with the replica back"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noscript_between_pile_up_and_release() {
    for batching in [false, true] {
        cell(Path::NoScript, batching).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_lost_with_the_reply_of_queued_operations() {
    for batching in [false, true] {
        cell(Path::Reconnect, batching).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_turned_replica_readonly() {
    for batching in [false, true] {
        cell(Path::ReadOnly, batching).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_turned_replica_masterdown() {
    for batching in [false, true] {
        cell(Path::MasterDown, batching).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_shortfall_reaches_every_queued_operation() {
    for batching in [false, true] {
        cell(Path::Shortfall, batching).await;
    }
}

/// The cluster column: `MOVED` (the slot moved to another master while the operations wait on
/// its old one) and `ASK` (the slot in migration to it), batching off and on, on one cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_and_ask_on_a_cluster() {
    let cluster = TestCluster::start(0);
    for (ask, batching) in [(false, false), (false, true), (true, false), (true, true)] {
        redirected_cell(&cluster, ask, batching).await;
    }
}

/// `CLUSTER <args...>` on the node on `port`.
fn cluster_cmd(port: u16, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut c = redis::cmd("CLUSTER");
    for a in args {
        c.arg(*a);
    }
    c.query(&mut conn(port))
}

fn conn(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap()
}

/// `errorstat_<code>`'s count on the node on `port`.
fn node_errors(port: u16, code: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut conn(port))
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("errorstat_{code}:count=")))
        .and_then(|n| n.split(',').next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Whether the node on `port` comes to hold a script call blocked by its pause.
fn parked_on(port: u16) -> bool {
    wait_until(BOUND, || {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut conn(port))
            .unwrap_or_default();
        list.lines().any(|c| {
            c.contains("cmd=evalsha")
                && c.split(' ')
                    .any(|f| f.starts_with("flags=") && f.contains('b'))
        })
    })
}

fn pause(port: u16, on: bool) {
    let mut c = redis::cmd("CLIENT");
    match on {
        true => c.arg("PAUSE").arg(60_000).arg("WRITE"),
        false => c.arg("UNPAUSE"),
    };
    let _: () = c.query(&mut conn(port)).unwrap();
}

/// 24 fresh acquires of one slot's locks meet `MOVED` (the slot given to another master while
/// they wait) or `ASK` (the slot migrating to it, until the migration ends); every one must
/// succeed on the new master with exactly its hold. So that the batch is the first to meet
/// the redirection (a lone call's `MOVED` refreshes the slot map, and a batch sent after it
/// would go straight to the new master), 17 acquires on a third master, paused, take the
/// connection's lone slots first (16; one queues); the 24 queue behind them, and leave as a
/// batch, to the old master, once the third master's pause ends. Without batching the 24 go
/// out alone at once, to the old master the client's slot map still names.
async fn redirected_cell(cluster: &TestCluster, ask: bool, batching: bool) {
    const BLOCKERS: usize = ALONE + 1;
    const OPS: usize = N - ALONE;
    let code = if ask { "ASK" } else { "MOVED" };
    let what = format!("{code}, batching {batching}");
    let tag = format!("mv{ask}{batching}");
    let client = Client::with_config(
        Config::cluster(cluster.urls())
            .with_batching(batching)
            .with_retry_attempts(40)
            .with_retry_delay(Duration::from_millis(200))
            .with_response_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    let slot = cluster.keyslot(&tag);
    let from = cluster.master_of(slot).port;
    let masters: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    let to = *masters.iter().find(|p| **p != from).unwrap();
    let third = *masters.iter().find(|p| **p != from && **p != to).unwrap();
    let blocker_tag = (0..)
        .map(|i| format!("blk{i}"))
        .find(|t| cluster.master_of(cluster.keyslot(t)).port == third)
        .unwrap();
    let id = |port: u16| -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut conn(port))
            .unwrap()
    };
    let (from_id, to_id) = (id(from), id(to));
    let lock = |tag: &str, i: usize| {
        client
            .get_lock(format!("{{{tag}}}:{i}"))
            .with_owner(LockOwner::new(1 + i as u64))
    };
    let before = client.stats();
    pause(third, true);
    let spawn = |tag: &str, n: usize| -> Vec<_> {
        (0..n)
            .map(|i| {
                let lock = lock(tag, i);
                tokio::spawn(async move { lock.lock_with_lease(LEASE).await })
            })
            .collect()
    };
    let blockers = spawn(&blocker_tag, BLOCKERS);
    let piled = match batching {
        true => eventually(BOUND, || async { client.stats().queued_operations == 1 }).await,
        false => parked_on(third),
    };
    assert!(
        piled,
        "{what}: the blockers never piled up: {:?}",
        client.stats()
    );
    // The old master is never paused: a pause holds `CLUSTER SETSLOT` too on Valkey. The client
    // learns of the move only from the redirection.
    let slot_s = slot.to_string();
    let give = |port: u16| cluster_cmd(port, &["SETSLOT", &slot_s, "NODE", &to_id]);
    let refused_from = node_errors(from, code);
    if ask {
        cluster_cmd(to, &["SETSLOT", &slot_s, "IMPORTING", &from_id]).unwrap();
        cluster_cmd(from, &["SETSLOT", &slot_s, "MIGRATING", &to_id]).unwrap();
    } else {
        give(to).unwrap();
        give(from).unwrap();
    }
    let tasks = spawn(&tag, OPS);
    if batching {
        let piled = eventually(BOUND, || async {
            client.stats().queued_operations == 1 + OPS
        })
        .await;
        assert!(piled, "{what}: never piled up: {:?}", client.stats());
    }
    pause(third, false);
    // The batch met the redirection, or without batching the lone scripts: each of them for
    // ASK (it never changes the client's slot map), at least one for MOVED (the first one
    // refreshes the map, and those sent after it go to the new master at once).
    let refusals = if batching || !ask { 1 } else { OPS as u64 };
    let refused = eventually(BOUND, || async {
        node_errors(from, code) >= refused_from + refusals
            && (!batching || client.stats().batches > before.batches)
    })
    .await;
    assert!(refused, "{what}: the operations never met {code}");
    // The migration ends (the slot everywhere on its new master).
    for n in &cluster.nodes {
        let _ = give(n.port);
    }
    for (i, r) in join(blockers, &what).await.into_iter().enumerate() {
        let g = r.unwrap_or_else(|e| panic!("{what}: blocker {i}: {e}"));
        g.unlock().await.unwrap();
    }
    let results = join(tasks, &what).await;
    if batching {
        let after = client.stats();
        assert!(
            after.batches > before.batches,
            "{what}: no batch was sent: {after:?}"
        );
    }
    let mut target = conn(to);
    let mut guards = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        guards.push(r.unwrap_or_else(|e| panic!("{what}: acquire {i}: {e}")));
        let key = format!("{{{tag}}}:{i}");
        let held: std::collections::HashMap<String, i64> =
            redis::cmd("HGETALL").arg(&key).query(&mut target).unwrap();
        let owner = field(&client, LockOwner::new(1 + i as u64));
        assert_eq!(
            held,
            [(owner, 1)].into_iter().collect(),
            "{what}: {key} on the new master"
        );
    }
    for (i, g) in guards.into_iter().enumerate() {
        g.unlock()
            .await
            .unwrap_or_else(|e| panic!("{what}: release {i}: {e}"));
        let key = format!("{{{tag}}}:{i}");
        let left: bool = redis::cmd("EXISTS").arg(&key).query(&mut target).unwrap();
        assert!(!left, "{what}: {key} left after its release");
    }
}
