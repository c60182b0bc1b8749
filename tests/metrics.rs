//! The `metrics` feature: what a lock's life records, read back from a process-wide debugging
//! recorder (its own test binary, so no other test's locks are counted).
#![cfg(feature = "metrics")]

#[path = "it/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::sync::Mutex;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redis::AsyncCommands;
use redisson_lock::{observe, LockError};
use support::*;

/// Totals of everything recorded so far. The debugging recorder hands out deltas (each
/// snapshot resets counters and gauges and drains histograms), so they are summed here.
#[derive(Default)]
struct Totals {
    series: Vec<Series>,
}

struct Series {
    name: String,
    labels: Vec<(String, String)>,
    counter: u64,
    gauge: f64,
    samples: Vec<f64>,
}

impl Totals {
    fn add(&mut self, snap: &Snapshotter) {
        for (k, _, _, v) in snap.snapshot().into_vec() {
            let key = k.key();
            let labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            let i = match self
                .series
                .iter()
                .position(|s| s.name == key.name() && s.labels == labels)
            {
                Some(i) => i,
                None => {
                    self.series.push(Series {
                        name: key.name().to_owned(),
                        labels,
                        counter: 0,
                        gauge: 0.0,
                        samples: Vec::new(),
                    });
                    self.series.len() - 1
                }
            };
            let s = &mut self.series[i];
            match v {
                DebugValue::Counter(n) => s.counter += n,
                DebugValue::Gauge(g) => s.gauge += g.into_inner(),
                DebugValue::Histogram(h) => s.samples.extend(h.into_iter().map(|x| x.into_inner())),
            }
        }
    }

    /// The series of metric `name` whose labels include every pair of `labels`.
    fn of<'s>(
        &'s self,
        name: &'s str,
        labels: &'s [(&str, &str)],
    ) -> impl Iterator<Item = &'s Series> {
        self.series.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(l, v)| s.labels.iter().any(|(a, b)| a == l && b == v))
        })
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.of(name, labels).map(|s| s.counter).sum()
    }

    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.of(name, labels).map(|s| s.gauge).sum()
    }

    fn samples(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.of(name, labels)
            .flat_map(|s| s.samples.clone())
            .collect()
    }
}

/// One test: the recorder is global, and each step checks a delta of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locks_life_is_recorded() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this binary");
    let totals = Mutex::new(Totals::default());
    // The totals up to now.
    let now = || {
        let mut t = totals.lock().unwrap();
        t.add(&snap);
        t
    };

    let server = TestServer::start();
    let client = server
        .client_with(|c| c.with_watchdog_timeout(Duration::from_millis(600)))
        .await;
    let other = server.client().await;
    let mut raw = server.conn().await;

    // An uncontended acquisition, its renewals and its hold time.
    let g = client.get_lock("m:life").lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await; // past two renewal periods
    g.unlock().await.unwrap();
    {
        let t = now();
        let acquired = [("kind", "lock"), ("outcome", "acquired")];
        let waits = t.samples(observe::ACQUIRE_WAIT, &acquired);
        assert_eq!(waits.len(), 1, "{waits:?}");
        let holds = t.samples(observe::HOLD_TIME, &[("kind", "lock")]);
        assert_eq!(holds.len(), 1);
        assert!(holds[0] >= 1.4, "hold time {holds:?}");
        assert!(t.counter(observe::RENEWALS, &[]) >= 1, "no renewal counted");
    }

    // A waiter is parked while it waits, and a wait that ends without the lock is a timeout.
    let held = other.get_lock("m:wait").lock().await.unwrap();
    let lock = client.get_lock("m:wait");
    let waiter = tokio::spawn(async move {
        lock.try_lock_for(Duration::from_secs(60))
            .await
            .map(|g| g.map(|g| g.detach()))
    });
    let parked = eventually(Duration::from_secs(20), || async {
        now().gauge(observe::WAITERS, &[("kind", "lock")]) == 1.0
    });
    assert!(parked.await, "the parked waiter is not in the gauge");
    held.unlock().await.unwrap();
    assert!(waiter.await.unwrap().unwrap().is_some());
    assert_eq!(now().gauge(observe::WAITERS, &[("kind", "lock")]), 0.0);
    let held = other.get_fair_lock("m:timeout").lock().await.unwrap();
    let r = client
        .get_fair_lock("m:timeout")
        .try_lock_for(Duration::from_millis(200))
        .await;
    assert!(r.unwrap().is_none());
    let timeout = [("kind", "fair"), ("outcome", "timeout")];
    let timeouts = now().samples(observe::ACQUIRE_WAIT, &timeout);
    assert_eq!(timeouts.len(), 1);
    assert!(timeouts[0] >= 0.2, "{timeouts:?}");
    held.unlock().await.unwrap();

    // A guard whose hold was deleted behind its back: a lost lease, by the release.
    let g = client
        .get_lock("m:lost")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let _: () = raw.del("m:lost").await.unwrap();
    assert!(matches!(g.unlock().await, Err(LockError::LeaseLost { .. })));
    assert_eq!(now().counter(observe::LEASES_LOST, &[("by", "release")]), 1);

    // A script error: the key is not a lock.
    let before = now().counter(observe::SCRIPT_ERRORS, &[]);
    let _: () = raw.set("m:string", "x").await.unwrap();
    assert!(client.get_lock("m:string").try_lock().await.is_err());
    let t = now();
    assert!(t.counter(observe::SCRIPT_ERRORS, &[]) > before);
    assert_eq!(
        t.samples(observe::ACQUIRE_WAIT, &[("outcome", "error")])
            .len(),
        1
    );
}
