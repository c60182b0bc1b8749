//! Group commit (issue 11): lock scripts that queue while the connection has its flights out
//! leave as one script call, and what Redis holds afterwards is exactly what the separate
//! scripts would have left (Redisson's layout), with each operation's own reply and error.
//!
//! Batches are made deterministic with `CLIENT PAUSE WRITE`: the first scripts block in
//! flight, everything sent meanwhile queues, and leaves as one batch when the pause ends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::probes::*;
use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{Client, LockError, LockOwner};

const LEASE: Duration = Duration::from_secs(60);

/// Runs `n` acquires of `name(i)`, each by its own owner, while writes are paused, so that all
/// but the first 16 (the lone operations a connection sends before it queues) queue into one
/// batch; returns each task's result.
async fn acquire_during_pause(
    server: &TestServer,
    client: &redisson_lock::Client,
    n: usize,
    name: impl Fn(usize) -> String,
) -> Vec<Result<(String, String), LockError>> {
    let mut raw = server.conn().await;
    pause_writes(&mut raw, 400).await;
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (client, name) = (client.clone(), name(i));
            tokio::spawn(async move {
                let owner = LockOwner::new(1_000 + i as u64);
                let lock = client.get_lock(name.clone()).with_owner(owner);
                match lock.try_lock_with_lease(Duration::ZERO, LEASE).await? {
                    Some(g) => {
                        g.detach();
                        Ok((name, crate::support::field(&client, owner)))
                    }
                    None => Err(LockError::InvalidArgument("not acquired")),
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Holds the locks `<prefix>:0` to `<prefix>:<n - 1>` of `client`, one after the other, with
/// `lease` (or the watchdog's); their guards, in that order.
async fn hold_each(
    client: &Client,
    prefix: &str,
    n: usize,
    lease: Option<Duration>,
) -> Vec<redisson_lock::RLockGuard> {
    let mut guards = Vec::new();
    for i in 0..n {
        let lock = client.get_lock(format!("{prefix}:{i}"));
        guards.push(match lease {
            Some(lease) => lock.lock_with_lease(lease).await.unwrap(),
            None => lock.lock().await.unwrap(),
        });
    }
    guards
}

/// A server and a client of it with batching on.
async fn batching() -> (TestServer, Client) {
    let server = TestServer::start();
    let client = server.client_with(|c| c.with_batching(true)).await;
    (server, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_acquires_leave_as_one_batch_with_redissons_layout() {
    let (server, client) = batching().await;
    let results = acquire_during_pause(&server, &client, 40, |i| format!("gc:{i}")).await;
    let stats = client.stats();
    assert!(
        stats.batches >= 1 && stats.batched_operations >= 20,
        "the acquires sent during the pause left in batches: {stats:?}"
    );
    let mut raw = server.conn().await;
    for r in results {
        let (name, field) = r.expect("every batched acquire got its own reply");
        // Exactly what lock.lua leaves: one field, count 1, the lease as PTTL.
        let held = fields(&mut raw, &name).await;
        assert_eq!(held.len(), 1, "{name}: {held:?}");
        assert_eq!(held.get(&field), Some(&1), "{name}: {held:?}");
        let ttl = pttl(&mut raw, &name).await;
        assert!(ttl > 50_000 && ttl <= 60_000, "{name}: pttl {ttl}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_queued_operations_leave_as_their_own_scripts_not_a_batch() {
    // Issue 24 item 1: a batch of two or three costs the server more than the scripts alone,
    // so a queue shorter than BATCH_MIN (8) leaves as separate script calls: 16 lone
    // operations out during the pause, 3 queued behind them, 19 EVALSHAs in all, no batch.
    // Keys 17 and 18 are strings: their acquires fail with WRONGTYPE, each alone, whether it
    // went out in a flight or in the pipeline of the queued ones.
    let (server, client) = batching().await;
    let mut raw = server.conn().await;
    raw.set::<_, _, ()>("few:17", "x").await.unwrap();
    raw.set::<_, _, ()>("few:18", "x").await.unwrap();
    crate::support::redisson::reset_stats(&server).await;
    let results = acquire_during_pause(&server, &client, 19, |i| format!("few:{i}")).await;
    for (i, r) in results.into_iter().enumerate() {
        if i >= 17 {
            assert!(
                matches!(r, Err(LockError::WrongType { .. })),
                "few:{i}: {r:?}"
            );
            continue;
        }
        let (name, field) = r.unwrap_or_else(|e| panic!("few:{i}: {e}"));
        assert_eq!(
            fields(&mut raw, &name).await.get(&field),
            Some(&1),
            "{name}"
        );
    }
    assert_eq!(client.stats().batches, 0, "{:?}", client.stats());
    assert_eq!(
        crate::support::redisson::calls(&server, "evalsha").await,
        19
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_every_script_goes_alone() {
    let server = TestServer::start();
    // Off by default.
    let client = server.client().await;
    let results = acquire_during_pause(&server, &client, 24, |i| format!("solo:{i}")).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(client.stats().batches, 0, "{:?}", client.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_operation_fails_alone_in_its_batch() {
    let (server, client) = batching().await;
    let mut raw = server.conn().await;
    // Keys 3, 7, 20 and 27 are strings: their acquires fail with WRONGTYPE (the last two
    // among the queued operations, inside the batch).
    raw.set::<_, _, ()>("mixed:3", "x").await.unwrap();
    raw.set::<_, _, ()>("mixed:7", "x").await.unwrap();
    raw.set::<_, _, ()>("mixed:20", "x").await.unwrap();
    raw.set::<_, _, ()>("mixed:27", "x").await.unwrap();
    let results = acquire_during_pause(&server, &client, 32, |i| format!("mixed:{i}")).await;
    assert!(client.stats().batches >= 1, "{:?}", client.stats());
    for (i, r) in results.into_iter().enumerate() {
        match i {
            3 | 7 | 20 | 27 => assert!(
                matches!(r, Err(LockError::WrongType { .. })),
                "mixed:{i}: {r:?}"
            ),
            _ => {
                let (name, field) = r.unwrap_or_else(|e| panic!("mixed:{i}: {e}"));
                assert_eq!(fields(&mut raw, &name).await.get(&field), Some(&1));
            }
        }
    }
    // The strings are untouched.
    for k in ["mixed:3", "mixed:7", "mixed:20", "mixed:27"] {
        assert_eq!(raw.get::<_, String>(k).await.unwrap(), "x");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_releases_publish_redissons_message_and_delete_the_hash() {
    let (server, client) = batching().await;
    const N: usize = 32;
    let guards = hold_each(&client, "rel", N, None).await;
    // A subscriber counts the release messages, as a Java waiter would receive them.
    let mut pubsub = server.raw().get_async_pubsub().await.unwrap();
    pubsub
        .psubscribe("redisson_lock__channel:{rel:*}")
        .await
        .unwrap();
    let mut raw = server.conn().await;
    pause_writes(&mut raw, 400).await;
    let releases: Vec<_> = guards
        .into_iter()
        .map(|g| tokio::spawn(async move { g.unlock().await }))
        .collect();
    for r in releases {
        r.await
            .unwrap()
            .expect("every batched release got its own reply");
    }
    assert!(client.stats().batches >= 1, "{:?}", client.stats());
    let mut messages = pubsub.on_message();
    for _ in 0..N {
        let msg = tokio::time::timeout(Duration::from_secs(30), futures_next(&mut messages))
            .await
            .expect("a release message per release");
        let payload: String = msg.get_payload().unwrap();
        assert_eq!(payload, "0", "Redisson's UNLOCK_MESSAGE");
    }
    for i in 0..N {
        assert!(!exists(&mut raw, &format!("rel:{i}")).await);
    }
}

async fn futures_next<S: futures_util::Stream + Unpin>(s: &mut S) -> S::Item {
    use futures_util::StreamExt;
    s.next().await.expect("stream open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_lock_excludes_under_batching() {
    // Many tasks of one client on a few names: batches carry acquires and releases of the same
    // lock; the critical sections never overlap and every hold count ends at zero.
    let (server, client) = batching().await;
    let inside: Arc<Vec<AtomicUsize>> = Arc::new((0..4).map(|_| AtomicUsize::new(0)).collect());
    let overlaps = Arc::new(AtomicUsize::new(0));
    concurrently(64, |t| {
        let (client, inside, overlaps) = (client.clone(), inside.clone(), overlaps.clone());
        async move {
            for i in 0..40 {
                let k = (t + i) % 4;
                let guard = client.get_lock(format!("hot:{k}")).lock().await.unwrap();
                if inside[k].fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::task::yield_now().await;
                inside[k].fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }
    })
    .await;
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    let stats = client.stats();
    assert!(stats.batches > 0, "contention formed batches: {stats:?}");
    let mut raw = server.conn().await;
    for k in 0..4 {
        assert!(!exists(&mut raw, &format!("hot:{k}")).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_dropped_while_queued_leave_nothing_behind() {
    let (server, client) = batching().await;
    let mut raw = server.conn().await;
    pause_writes(&mut raw, 400).await;
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.get_lock(format!("gone:{i}")).lock().await })
        })
        .collect();
    // Wait until they are all queued or in flight, then drop the callers.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for t in &tasks {
        t.abort();
    }
    assert!(writes_resumed(&server, Duration::from_secs(30)).await);
    // Whatever ran is trimmed back by the clean-up; nothing stays held or tracked.
    let clean = eventually(Duration::from_secs(30), || async {
        let mut raw = server.conn().await;
        let mut left = 0;
        for i in 0..16 {
            left += usize::from(exists(&mut raw, &format!("gone:{i}")).await);
        }
        left == 0 && client.stats().tracked_holds == 0
    })
    .await;
    assert!(clean, "{:?}", client.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dying_under_a_batch_fails_each_operation_cleanly() {
    let mut server = TestServer::start();
    let client = server
        .client_with(|c| {
            c.with_batching(true)
                .with_retry_attempts(1)
                .with_response_timeout(Duration::from_secs(2))
        })
        .await;
    let mut raw = server.conn().await;
    pause_writes(&mut raw, 2_000).await;
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .get_lock(format!("dead:{i}"))
                    .try_lock_with_lease(Duration::ZERO, LEASE)
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.kill();
    for t in tasks {
        let r = t.await.expect("no panic");
        assert!(r.is_err(), "a dead server is an error, not a grant: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_on_a_cluster_go_per_slot() {
    let cluster = crate::support::cluster::TestCluster::start(0);
    let client = redisson_lock::Client::with_config(
        redisson_lock::Config::cluster(cluster.urls()).with_batching(true),
    )
    .await
    .unwrap();
    concurrently(64, |t| {
        let client = client.clone();
        async move {
            for i in 0..20 {
                take_and_release(&client.get_lock(format!("slotted:{}", (t * 7 + i) % 48))).await;
            }
        }
    })
    .await;
    let stats = client.stats();
    assert!(stats.batches > 0, "{stats:?}");
    assert_eq!(stats.tracked_holds, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_finds_its_hold_gone_is_reported_alone_in_its_batch() {
    // The unlock script's nil reply (the owner holds nothing: the lease ran out) inside a batch
    // must reach its own caller as an error, and must not cut the replies of the others short.
    let (server, client) = batching().await;
    const N: usize = 32;
    let guards = hold_each(&client, "lost", N, Some(LEASE)).await;
    let mut raw = server.conn().await;
    for i in (0..N).step_by(3) {
        // As if the lease had run out.
        raw.del::<_, ()>(format!("lost:{i}")).await.unwrap();
    }
    pause_writes(&mut raw, 400).await;
    let releases: Vec<_> = guards
        .into_iter()
        .map(|g| tokio::spawn(async move { g.unlock().await }))
        .collect();
    for (i, r) in releases.into_iter().enumerate() {
        let r = r.await.unwrap();
        if i % 3 == 0 {
            assert!(r.is_err(), "lost:{i}: the hold was gone: {r:?}");
        } else {
            r.unwrap_or_else(|e| panic!("lost:{i}: {e}"));
            assert!(!exists(&mut raw, &format!("lost:{i}")).await);
        }
    }
    assert!(client.stats().batches >= 1, "{:?}", client.stats());
}

/// One phase of [`scenario`]: lock kinds' acquires and releases, each by its own owner.
#[derive(Clone, Copy)]
enum Step {
    Read(u64),
    Write(u64),
    Fenced(u64),
    Reentrant(u64),
    ReadRelease(u64),
    WriteRelease(u64),
    FencedRelease(u64),
    ReentrantRelease(u64),
}

/// Takes `lock` for [`LEASE`] and keeps it (the snapshot reads what it left).
async fn take<K: redisson_lock::LockKind>(lock: redisson_lock::Lock<K>) -> Result<(), LockError> {
    lock.lock_with_lease(LEASE).await.map(|g| g.detach())
}

async fn run_step(client: Client, p: String, step: Step) {
    use Step::*;
    let owner = |i: u64| LockOwner::new(2_000 + i);
    let read = |i| {
        let rw = client.get_read_write_lock(format!("{p}:rw"));
        rw.read_lock().with_owner(owner(i))
    };
    let write = |i| {
        let rw = client.get_read_write_lock(format!("{p}:w{i}"));
        rw.write_lock().with_owner(owner(0))
    };
    let fenced = |i| {
        client
            .get_fenced_lock(format!("{p}:f{i}"))
            .with_owner(owner(0))
    };
    let reentrant = |i| client.get_lock(format!("{p}:r{i}")).with_owner(owner(0));
    let r = match step {
        Read(i) => take(read(i)).await,
        Write(i) => take(write(i)).await,
        Fenced(i) => take(fenced(i)).await,
        Reentrant(i) => take(reentrant(i)).await,
        ReadRelease(i) => read(i).unlock().await,
        WriteRelease(i) => write(i).unlock().await,
        FencedRelease(i) => fenced(i).unlock().await,
        ReentrantRelease(i) => reentrant(i).unlock().await,
    };
    r.unwrap_or_else(|e| panic!("{p}: a step failed: {e}"));
}

/// Everything under `<p>:` and `{<p>:`, with `p` and the client's id written `P` and `U`:
/// each key's type, content and whether its TTL is the lease's.
async fn snapshot(raw: &mut redis::aio::MultiplexedConnection, p: &str, id: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{p}:*"))
        .query_async(raw)
        .await
        .unwrap();
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        let content = match key_type(raw, &key).await.as_str() {
            "hash" => {
                let mut h: Vec<(String, String)> = raw.hgetall(&key).await.unwrap();
                h.sort();
                format!("{h:?}")
            }
            "string" => raw.get::<_, String>(&key).await.unwrap(),
            other => other.to_string(),
        };
        let ttl = pttl(raw, &key).await;
        let lease = ttl > 50_000 && ttl <= 60_000;
        out.push(
            format!("{key} {content} lease:{lease}")
                .replace(p, "P")
                .replace(id, "U"),
        );
    }
    out
}

/// Runs each phase's steps at once while writes are paused (so all but the first 16 queue), and
/// takes a snapshot after each phase.
async fn scenario(server: &TestServer, client: &Client, p: &str) -> Vec<Vec<String>> {
    use Step::*;
    let phases: Vec<Vec<Step>> = vec![
        (0..12)
            .flat_map(|i| [Read(i), Write(i), Fenced(i), Reentrant(i)])
            .collect(),
        (0..6)
            .map(ReadRelease)
            .chain((0..12).flat_map(|i| [Reentrant(i), FencedRelease(i)]))
            .collect(),
        (0..12)
            .flat_map(|i| [WriteRelease(i), ReentrantRelease(i), ReentrantRelease(i)])
            .collect(),
    ];
    let id = crate::support::field(client, LockOwner::new(0));
    let id = id.rsplit_once(':').unwrap().0.to_string();
    let mut raw = server.conn().await;
    let mut snapshots = Vec::new();
    for steps in phases {
        pause_writes(&mut raw, 300).await;
        let tasks: Vec<_> = steps
            .into_iter()
            .map(|s| tokio::spawn(run_step(client.clone(), p.to_string(), s)))
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        snapshots.push(snapshot(&mut raw, p, &id).await);
    }
    snapshots
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_batched_kind_leaves_what_its_scripts_leave_alone() {
    // The same steps, by a client without batching and by one with it, on one server: each
    // phase ends with the same keys, contents and leases (read, write, fenced and reentrant
    // acquires, re-entries, and releases that leave holds or delete the lock).
    let server = TestServer::start();
    let plain = server.client().await;
    let alone = scenario(&server, &plain, "plain").await;
    assert_eq!(plain.stats().batches, 0);
    let batched = server.client_with(|c| c.with_batching(true)).await;
    let together = scenario(&server, &batched, "batched").await;
    let stats = batched.stats();
    assert!(
        stats.batches >= 3 && stats.batched_operations >= 40,
        "most steps of each phase left in batches: {stats:?}"
    );
    for (phase, (a, b)) in alone.iter().zip(&together).enumerate() {
        assert!(!a.is_empty(), "phase {phase} holds something");
        assert_eq!(
            a, b,
            "phase {phase}: alone (left) and batched (right) differ"
        );
    }
}
