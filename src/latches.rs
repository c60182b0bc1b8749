//! Deletes latch keys in batches, a few milliseconds after their request returned.
//!
//! The latches are the semaphore's receipts (`redisson_semaphore_latch:{name}:<id>`, see
//! `sync/semaphore.rs`). Lock releases used to send theirs here too (Redisson's
//! `redisson_unlock_latch:{name}:<id>`); they write none any more: an unlock retry trims to the
//! owner's known count instead (`lock/engine/release.rs`, docs/protocol.md "Unlock retries").
//!
//! A receipt only matters while its request might be retried, and a retry happens before the
//! request returns. We collect them and send one `UNLINK` per batch (per hash slot on a cluster),
//! sent again after a broken connection as the retry policy allows (`UNLINK` is idempotent; a
//! request's own lost reply closes the connection the next batch goes out on). The key's own PX
//! (a minute at least) bounds any key whose deletion is lost all the same.
//!
//! The queue is bounded (`Config::with_latch_queue`): full batches go out back to back, and a
//! deletion that finds the queue full is dropped and counted; its key expires by its PX. So
//! memory stays bounded at any release rate, and so does the number of latch keys (rate x PX).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use std::time::Duration;

use redis::AsyncCommands;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::conn::Conn;
use crate::keys::slot_of;
use crate::retry::Retry;

/// How long latches are collected before one `UNLINK` removes them (when fewer than a batch).
const DELAY: Duration = Duration::from_millis(10);
/// Keys per `UNLINK`.
const BATCH: usize = 500;

/// The sending side; the task ends when it is dropped (with the client).
#[derive(Debug)]
pub(crate) struct Latches {
    tx: mpsc::Sender<String>,
    dropped: AtomicU64,
}

impl Latches {
    pub(crate) fn start(conn: Conn, config: &Config) -> Latches {
        let (tx, rx) = mpsc::channel(config.latch_queue().max(1));
        tokio::spawn(run(conn, rx, config.clone()));
        Latches {
            tx,
            dropped: AtomicU64::new(0),
        }
    }

    /// Queues a latch for deletion, or leaves it to its PX when the queue is full.
    pub(crate) fn delete(&self, latch: String) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(latch) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Deletions waiting in the queue.
    pub(crate) fn pending(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// Deletions dropped because the queue was full (those latches expired by their PX).
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn drain(rx: &mut mpsc::Receiver<String>, keys: &mut Vec<String>) {
    while keys.len() < BATCH {
        match rx.try_recv() {
            Ok(k) => keys.push(k),
            Err(_) => break,
        }
    }
}

async fn run(mut conn: Conn, mut rx: mpsc::Receiver<String>, config: Config) {
    while let Some(first) = rx.recv().await {
        let mut keys = vec![first];
        drain(&mut rx, &mut keys);
        // Wait for more only when the batch is not full: under load, full batches go out back
        // to back, so deletion keeps up with any unlock rate (the benchmark saw a 10 ms pause
        // per batch fall behind at ~35k unlocks/s).
        if keys.len() < BATCH {
            tokio::time::sleep(DELAY).await;
            drain(&mut rx, &mut keys);
        }
        // One UNLINK per hash slot: a cluster refuses cross-slot commands.
        let mut by_slot: HashMap<Option<u16>, Vec<String>> = HashMap::new();
        for k in keys {
            let slot = conn.is_cluster().then(|| slot_of(k.as_bytes()));
            by_slot.entry(slot).or_default().push(k);
        }
        for (_, group) in by_slot {
            unlink(&mut conn, &group, &config).await;
        }
    }
}

/// One `UNLINK`, tried again after a transient failure (`retry.rs`, at most
/// `Config::retry_attempts` tries); given up, the keys expire by their PX.
async fn unlink(conn: &mut Conn, keys: &[String], config: &Config) {
    let mut retry = Retry::attempts(config).op("latch_delete");
    loop {
        match conn.unlink::<_, i64>(keys).await {
            Ok(_) => return,
            Err(e) if retry.again(&e).await => {}
            Err(e) => {
                tracing::debug!(error = %e, keys = keys.len(), "can't delete the receipts; they expire on their own");
                return;
            }
        }
    }
}
