//! Replica sync under group commit (issue 23, area 7): with a stalled replica (SIGSTOP), every
//! lock write must fail with `is_no_synced_replicas()` and leave no hold, in the client or on
//! the master, exactly as without batching. Eight acquires at once, with a `WAIT` that takes
//! its whole timeout, fill the four flights, so with batching on the others leave in a batch
//! (`lua/batch.lua` followed by one `WAIT`): the shortfall must reach every operation of a
//! batch. Run on a cluster and through Sentinel, batching on and off, with one try per call
//! (`with_retry_attempts(1)`): a retry, sent alone, would report the shortfall of its own
//! `WAIT` and hide a batch that lost it.

use std::future::Future;
use std::time::Duration;

use futures_util::future::join_all;

use crate::support::cluster::{wait_until, Node};
use crate::support::*;
use redisson_lock::{Client, LockError};

/// The replica sync timeout (`WAIT`'s): every flight with the replica stopped lasts this long.
pub const SYNC: Duration = Duration::from_millis(500);
const BOUND: Duration = Duration::from_secs(30);
/// Acquires sent at once: twice the lone operations a batching connection sends before it
/// queues (16), so that with batching on at least 8 (`BATCH_MIN`) queue and leave as a batch.
const AT_ONCE: usize = 32;
/// The clients' response timeout. Synced writes of one client share its multiplexed
/// connection, and `WAIT` blocks that connection on the server: with the replica stopped, the
/// acquires' `WAIT`s (retries included) run one after another, each for its whole timeout. A
/// shorter response timeout turns the later ones into timeouts instead of the shortfall this
/// test is about.
pub const RESPONSE: Duration = Duration::from_secs(60);

/// A node's process id (`INFO server`), read while it runs.
pub fn pid(node: &Node) -> String {
    node.info("server")
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .map(|p| p.trim().to_owned())
        .expect("process_id")
}

/// SIGSTOP / SIGCONT of process `pid`.
pub fn signal(pid: &str, sig: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid)
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig}");
}

/// One acquire of lock kind `i % 5` on `name`, kept on success (detached) so that a success
/// shows as a hold.
async fn acquire(client: Client, i: usize, name: String) -> Result<(), LockError> {
    let lease = Duration::from_secs(60);
    match i % 5 {
        0 => client
            .get_lock(name)
            .lock_with_lease(lease)
            .await
            .map(|g| g.detach()),
        1 => client
            .get_fair_lock(name)
            .lock_with_lease(lease)
            .await
            .map(|g| g.detach()),
        2 => client
            .get_fenced_lock(name)
            .lock_with_lease(lease)
            .await
            .map(|g| g.detach()),
        3 => client
            .get_read_write_lock(name)
            .read_lock()
            .lock_with_lease(lease)
            .await
            .map(|g| g.detach()),
        _ => client
            .get_read_write_lock(name)
            .write_lock()
            .lock_with_lease(lease)
            .await
            .map(|g| g.detach()),
    }
}

/// With `replica` stopped, [`AT_ONCE`] acquires of every kind through `client` (replica sync
/// [`SYNC`], batching on or off) each fail with `is_no_synced_replicas()`, and none leaves a key
/// on the master (`exists`) or a tracked hold; once the replica runs again, each kind is taken.
pub async fn stalled_replica_fails_every_acquire<F, Fut>(
    client: &Client,
    replica: &Node,
    master: &Node,
    tag: &str,
    exists: F,
) where
    F: Fn(String) -> Fut,
    Fut: Future<Output = bool>,
{
    let batching = client.config().batching();
    let what = format!("{tag}, batching {batching}");
    let names: Vec<String> = (0..AT_ONCE).map(|i| format!("{{rs{tag}}}:{i}")).collect();
    // The replica count is read while the replica is healthy (as in production).
    take_and_release(&client.get_lock(names[0].clone())).await;
    let before = client.stats();

    let replica = pid(replica);
    signal(&replica, "STOP");
    let results = join_all(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| tokio::spawn(acquire(client.clone(), i, n.clone()))),
    )
    .await;
    let after = client.stats();
    // Undone on the master while the replica is still stopped (the undo waits for no replica).
    let mut left = Vec::new();
    for n in &names {
        if !eventually(BOUND, || {
            let n = n.clone();
            let e = exists(n);
            async move { !e.await }
        })
        .await
        {
            left.push(n.clone());
        }
    }
    let tracked_clear = eventually(BOUND, || async { client.stats().tracked_holds == 0 }).await;
    signal(&replica, "CONT");

    for (i, r) in results.into_iter().enumerate() {
        let err = r
            .unwrap()
            .expect_err(&format!("{what}: acquire {i} succeeded unconfirmed"));
        assert!(err.is_no_synced_replicas(), "{what}: acquire {i}: {err}");
    }
    assert!(
        left.is_empty(),
        "{what}: unconfirmed acquires left {left:?}"
    );
    assert!(
        tracked_clear,
        "{what}: holds left tracked: {:?}",
        client.stats()
    );
    if batching {
        assert!(
            after.batches > before.batches,
            "{what}: no batch was sent, the batched path went untested: {after:?}"
        );
    }

    // Back to normal: every kind is taken (and confirmed) again.
    assert!(
        wait_until(BOUND, || master
            .info("replication")
            .contains("connected_slaves:1")),
        "{what}: the replica did not come back"
    );
    for (i, n) in names.iter().enumerate().take(5) {
        acquire(client.clone(), i, n.clone())
            .await
            .unwrap_or_else(|e| panic!("{what}: kind {i} after the stall: {e}"));
        assert!(exists(n.clone()).await);
    }
}
