//! The watchdog at scale (issue 23, area 2): hundreds of watchdog holds on one client, well over
//! one renewal batch (100 keys per script) per renewal kind and, on a cluster, per slot. Every
//! key's PTTL (and every read hold's `rwlock_timeout` key) must stay above two thirds of a short
//! lease for several renewal periods. A renewal pass that skips some holds (a lost chunk, an
//! off-by-one in a batch, one group per slot or kind only) lets their keys run down and fails.

use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::support::cluster::TestCluster;
use crate::support::redisson::tagged;
use crate::support::*;
use redisson_lock::{Client, Config, LockGuard, LockKind};

/// The short watchdog lease: renewals every 1.5 s.
const LEASE: Duration = Duration::from_millis(4_500);
/// 2/3 of the lease is 3 s; 650 ms of slack for a late tick and a slow batch on a loaded
/// machine (a hold renewed every lease/2, or not at all, falls below it).
const FLOOR_MS: i64 = 2_350;
/// How long the TTLs are watched: over four renewal periods.
const WATCH: Duration = Duration::from_millis(6_500);

/// Type-erased guards of every kind, kept alive while the keys are watched.
#[derive(Default)]
struct Held {
    guards: Vec<Box<dyn std::any::Any + Send>>,
    lost: Vec<Box<dyn Fn() -> bool + Send>>,
    /// Every key whose TTL the watchdog must keep up.
    keys: Vec<String>,
}

impl Held {
    async fn take<K: LockKind>(&mut self, lock: redisson_lock::Lock<K>, read: bool) {
        let guard: LockGuard<K> = lock.lock().await.unwrap();
        assert_eq!(guard.lease(), None, "a watchdog hold");
        self.keys.push(lock.name().to_owned());
        if read {
            let field = format!("{}:{}", lock.client().id(), guard.owner().id());
            self.keys
                .push(format!("{}:{field}:rwlock_timeout:1", tagged(lock.name())));
        }
        let guard = std::sync::Arc::new(guard);
        let g = guard.clone();
        self.lost.push(Box::new(move || g.is_lost()));
        self.guards.push(Box::new(guard));
    }
}

/// Takes `per_kind` watchdog holds of every kind (read locks renew with their own script) plus
/// `same_slot` RLocks whose names share one hash tag.
async fn hold_many(client: &Client, prefix: &str, per_kind: usize, same_slot: usize) -> Held {
    let mut held = Held::default();
    for i in 0..same_slot {
        held.take(client.get_lock(format!("{{{prefix}}}:{i}")), false)
            .await;
    }
    for i in 0..per_kind {
        held.take(client.get_lock(format!("{prefix}:l:{i}")), false)
            .await;
        let rw = client.get_read_write_lock(format!("{prefix}:r:{i}"));
        held.take(rw.read_lock(), true).await;
    }
    for i in 0..per_kind / 4 {
        held.take(client.get_fair_lock(format!("{prefix}:f:{i}")), false)
            .await;
        held.take(client.get_fenced_lock(format!("{prefix}:t:{i}")), false)
            .await;
        held.take(client.get_spin_lock(format!("{prefix}:s:{i}")), false)
            .await;
        let rw = client.get_read_write_lock(format!("{prefix}:w:{i}"));
        held.take(rw.write_lock(), false).await;
    }
    held
}

/// Watches every key's PTTL for [`WATCH`] and returns the lowest seen per key, in key order.
async fn lowest_ttls<C>(raw: &C, keys: &[String]) -> Vec<i64>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let mut lowest = vec![i64::MAX; keys.len()];
    let until = Instant::now() + WATCH;
    while Instant::now() < until {
        let ttls = join_all(keys.iter().map(|k| {
            let mut raw = raw.clone();
            let k = k.clone();
            async move {
                redis::cmd("PTTL")
                    .arg(&k)
                    .query_async::<i64>(&mut raw)
                    .await
                    .unwrap()
            }
        }))
        .await;
        for (low, t) in lowest.iter_mut().zip(ttls) {
            *low = (*low).min(t);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lowest
}

fn assert_renewed(held: &Held, lowest: &[i64], what: &str) {
    let low: Vec<(&String, &i64)> = held
        .keys
        .iter()
        .zip(lowest)
        .filter(|(_, t)| **t < FLOOR_MS)
        .collect();
    assert!(
        low.is_empty(),
        "{what}: {} of {} keys fell below {FLOOR_MS} ms under renewal, e.g. {:?}",
        low.len(),
        held.keys.len(),
        &low[..low.len().min(8)]
    );
    let lost = held.lost.iter().filter(|l| l()).count();
    assert_eq!(lost, 0, "{what}: guards report lost holds");
}

/// Standalone: 600 holds on one client (240 RLocks and 240 read locks, 30 of each other kind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_watchdog_holds_all_stay_renewed() {
    let (_server, client, raw) = fixture_with(|c| c.with_watchdog_timeout(LEASE)).await;
    let held = hold_many(&client, "wds", 120, 120).await;
    assert!(held.keys.len() >= 500, "{}", held.keys.len());
    let lowest = lowest_ttls(&raw, &held.keys).await;
    assert_renewed(&held, &lowest, "standalone");
    drop(held);
}

/// The same on a cluster: 250 RLocks in one slot (three batches for that slot alone) beside
/// holds of every kind spread over the slots.
pub async fn hundreds_of_watchdog_holds_on_a_cluster(cluster: &TestCluster) {
    let client = Client::with_config(Config::cluster(cluster.urls()).with_watchdog_timeout(LEASE))
        .await
        .unwrap();
    let raw = redis::cluster::ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let held = hold_many(&client, "wdc", 60, 250).await;
    let lowest = lowest_ttls(&raw, &held.keys).await;
    assert_renewed(&held, &lowest, "cluster");
    drop(held);
}
