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
use redisson_lock::{observe, Client, LockError, RateType};
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
    let now = &now;

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
        // Every counter has its `kind`.
        let renewed = t.counter(observe::RENEWALS, &[("kind", "lock")]);
        assert!(renewed >= 1, "no renewal counted");
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
    let lost = [("kind", "lock"), ("by", "release")];
    assert_eq!(now().counter(observe::LEASES_LOST, &lost), 1);

    // A script error: the key is not a lock.
    let before = now().counter(observe::SCRIPT_ERRORS, &[("kind", "lock")]);
    let _: () = raw.set("m:string", "x").await.unwrap();
    assert!(client.get_lock("m:string").try_lock().await.is_err());
    {
        let t = now();
        assert!(t.counter(observe::SCRIPT_ERRORS, &[("kind", "lock")]) > before);
        assert_eq!(
            t.samples(observe::ACQUIRE_WAIT, &[("outcome", "error")])
                .len(),
            1
        );
        // The watchdog ran its ticks above: each left its lateness and each renewal its slack.
        assert!(!t.samples(observe::WATCHDOG_LAG, &[]).is_empty());
        let slack = t.samples(observe::RENEWAL_SLACK, &[]);
        assert!(!slack.is_empty(), "no renewal slack recorded");
        // At most the lease (600 ms): what was left of it, never more.
        assert!(
            slack.iter().all(|&s| s <= 0.6),
            "slack beyond the lease: {slack:?}"
        );
    }

    synchronizers(&server, &client, &other, now).await;
    cancelled(&server, &client, &other, now).await;
    subscriber_and_retries(&server, now).await;
    replica_sync(now).await;
    at_risk(now).await;
}

/// Whether a waiter comes to be subscribed to `channel` on `server`.
async fn parked_on(server: &TestServer, channel: &str) -> bool {
    eventually(Duration::from_secs(20), || async {
        numsub_on(server, channel).await == 1
    })
    .await
}

type Now<'a> = dyn Fn() -> std::sync::MutexGuard<'a, Totals> + 'a;

/// Semaphores, permit-expirable semaphores, latches and rate limiters record as the locks do.
async fn synchronizers(server: &TestServer, client: &Client, other: &Client, now: &Now<'_>) {
    let sem = client.get_semaphore("m:sem");
    assert!(sem.try_set_permits(3).await.unwrap());
    assert!(sem
        .try_acquire_many_for(2, Duration::from_secs(5))
        .await
        .unwrap());
    assert!(!sem.try_acquire_many(2).await.unwrap());
    sem.release_many(2).await.unwrap();
    let pes = client.get_permit_expirable_semaphore("m:pes");
    assert!(pes.try_set_permits(1).await.unwrap());
    let id = pes.acquire().await.unwrap();
    pes.release(&id).await.unwrap();
    assert!(!pes.try_release(&id).await.unwrap());
    pes.acquire_guarded()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let latch = client.get_count_down_latch("m:latch");
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    assert!(parked_on(server, "redisson_countdownlatch__channel__{m:latch}").await);
    other
        .get_count_down_latch("m:latch")
        .count_down()
        .await
        .unwrap();
    waiting.await.unwrap().unwrap();
    let limiter = client.get_rate_limiter("m:rate");
    limiter
        .try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            5,
            Duration::from_secs(3600),
        ))
        .await
        .unwrap();
    assert!(limiter.try_acquire_many(3).await.unwrap());
    assert!(!limiter.try_acquire_many(3).await.unwrap());

    let t = now();
    let waits = |kind, outcome| {
        t.samples(
            observe::ACQUIRE_WAIT,
            &[("kind", kind), ("outcome", outcome)],
        )
        .len()
    };
    assert_eq!(waits("semaphore", "acquired"), 1);
    assert_eq!(waits("semaphore", "timeout"), 1);
    assert_eq!(waits("permit_semaphore", "acquired"), 2);
    let guard_holds = t.samples(observe::HOLD_TIME, &[("kind", "permit_semaphore")]);
    assert_eq!(guard_holds.len(), 1);
    assert_eq!(waits("latch", "acquired"), 1);
    assert_eq!(waits("rate_limiter", "acquired"), 1);
    assert_eq!(waits("rate_limiter", "timeout"), 1);
    let permits = |kind, direction| {
        t.counter(
            observe::PERMITS,
            &[("kind", kind), ("direction", direction)],
        )
    };
    assert_eq!(permits("semaphore", "acquired"), 2);
    assert_eq!(permits("semaphore", "released"), 2);
    assert_eq!(permits("permit_semaphore", "acquired"), 2);
    assert_eq!(permits("permit_semaphore", "released"), 2);
    assert_eq!(permits("rate_limiter", "acquired"), 3);
    let releases =
        |kind, outcome| t.counter(observe::RELEASES, &[("kind", kind), ("outcome", outcome)]);
    assert_eq!(releases("semaphore", "released"), 1);
    assert_eq!(releases("permit_semaphore", "released"), 2);
    assert_eq!(releases("permit_semaphore", "not_held"), 1);
    assert_eq!(releases("latch", "released"), 1);
    // The locks' releases, counted the same way (the first step's unlocks).
    assert!(releases("lock", "released") >= 2);
    assert_eq!(releases("lock", "not_held"), 1);
}

/// An acquire whose future is dropped mid-wait is recorded as cancelled, for a lock and a
/// synchronizer alike.
async fn cancelled(server: &TestServer, client: &Client, other: &Client, now: &Now<'_>) {
    let held = other.get_lock("m:cancel").lock().await.unwrap();
    let lock = client.get_lock("m:cancel");
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) });
    let parked = eventually(Duration::from_secs(20), || async {
        now().gauge(observe::WAITERS, &[("kind", "lock")]) == 1.0
    });
    assert!(parked.await);
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    held.unlock().await.unwrap();

    let sem = client.get_semaphore("m:sem-cancel");
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire().await })
    };
    assert!(parked_on(server, "redisson_sc:{m:sem-cancel}").await);
    let gauge = || now().gauge(observe::WAITERS, &[("kind", "semaphore")]);
    let in_gauge = eventually(Duration::from_secs(20), || async { gauge() == 1.0 });
    assert!(
        in_gauge.await,
        "the parked semaphore waiter is not in the gauge"
    );
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert_eq!(gauge(), 0.0);

    let t = now();
    let cancelled = |kind| {
        t.samples(
            observe::ACQUIRE_WAIT,
            &[("kind", kind), ("outcome", "cancelled")],
        )
        .len()
    };
    assert_eq!(cancelled("lock"), 1);
    assert_eq!(cancelled("semaphore"), 1);
}

/// The subscriber's reconnects, and retries by operation.
async fn subscriber_and_retries(server: &TestServer, now: &Now<'_>) {
    let client = server
        .client_with(|c| {
            c.with_response_timeout(Duration::from_millis(300))
                .with_retry_attempts(200)
                .with_retry_delay(Duration::from_millis(50))
        })
        .await;
    let sem = client.get_semaphore("m:sub");
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire().await })
    };
    assert!(parked_on(server, "redisson_sc:{m:sub}").await);
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut server.conn().await)
        .await
        .unwrap();
    let reconnected = eventually(Duration::from_secs(20), || async {
        now().counter(observe::SUBSCRIBER_RECONNECTS, &[]) >= 1
    });
    assert!(reconnected.await, "no subscriber reconnect counted");
    sem.release().await.unwrap();
    waiter.await.unwrap().unwrap();

    // A stopped server: the acquire's script times out and is tried again until it answers.
    server.pause();
    let lock = client.get_lock("m:retry");
    let taking = tokio::spawn(async move { lock.try_lock().await.map(|g| g.map(|g| g.detach())) });
    let retried = eventually(Duration::from_secs(20), || async {
        now().counter(observe::RETRIES, &[("kind", "lock"), ("op", "acquire")]) >= 1
    })
    .await;
    server.resume();
    assert!(retried, "no acquire retry counted");
    assert!(taking.await.unwrap().unwrap().is_some());
}

/// A watchdog renewal that fails (blackholed, a short reply timeout) puts its hold at risk,
/// counted once as `failed`; the next confirmed renewal clears it.
async fn at_risk(now: &Now<'_>) {
    let (_server, proxy, client) = support::proxy::proxied(|c| {
        fail_fast(c, Duration::from_secs(3), Duration::from_millis(300))
    })
    .await;
    let guard = client.get_lock("m:at-risk").lock().await.unwrap();
    proxy.set(support::proxy::Mode::Blackhole);
    let failed = eventually(Duration::from_secs(20), || async {
        now().counter(
            observe::HOLDS_AT_RISK,
            &[("kind", "lock"), ("reason", "failed")],
        ) >= 1
    })
    .await;
    proxy.set(support::proxy::Mode::Pass);
    assert!(failed, "no failed renewal counted at risk");
    let cleared = eventually(Duration::from_secs(20), || async { !guard.is_at_risk() }).await;
    assert!(cleared, "a confirmed renewal did not clear the risk");
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}

/// A lock write no replica confirmed, and a `WAIT` the server refuses.
async fn replica_sync(now: &Now<'_>) {
    // No diskless-sync delay: the replica attaches at once instead of after 5 s.
    let master = TestServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let linked = eventually(Duration::from_secs(30), || async {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut master.conn().await)
            .await
            .unwrap();
        info.contains("connected_slaves:1") && info.contains("state=online")
    });
    assert!(linked.await, "the replica never attached");
    let client = master
        .client_with(|c| {
            c.with_replica_sync(Some(Duration::from_millis(200)))
                .with_retry_attempts(1)
        })
        .await;
    replica.pause();
    let r = client.get_lock("m:unsynced").try_lock().await;
    replica.resume();
    assert!(matches!(r, Err(LockError::ReplicaSync { .. })), "{r:?}");
    let failed = [("command", "WAIT"), ("reason", "unconfirmed")];
    assert!(now().counter(observe::REPLICA_SYNC_FAILURES, &failed) >= 1);

    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("nowait")
        .arg(&["on", ">pw", "~*", "&*", "+@all", "-wait"])
        .query_async(&mut master.conn().await)
        .await
        .unwrap();
    let url = format!("redis://nowait:pw@127.0.0.1:{port}/");
    let config = redisson_lock::Config::new(url)
        .with_replica_sync(Some(Duration::from_millis(200)))
        .with_replica_sync_policy(redisson_lock::ReplicaSync::BestEffort);
    let client = Client::with_config(config).await.unwrap();
    client
        .get_lock("m:refused")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let refused = [("command", "WAIT"), ("reason", "refused")];
    assert!(now().counter(observe::REPLICA_SYNC_FAILURES, &refused) >= 1);
}
