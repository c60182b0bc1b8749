//! docs/observability.md's Prometheus exporter, run: metrics-exporter-prometheus with
//! histogram buckets, rendered after real lock and semaphore operations on a real server. Its
//! own test binary: the recorder is process-wide.
#![cfg(feature = "metrics")]

#[path = "it/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_renders_the_families_with_their_buckets() {
    // The set-up of docs/observability.md: buckets for every `_seconds` histogram (without
    // them the exporter renders summaries), then the descriptions.
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".into()),
            &[0.005, 0.05, 0.5, 5.0, 30.0],
        )
        .unwrap()
        .install_recorder()
        .unwrap();
    redisson_lock::observe::describe();

    let server = TestServer::start();
    let client = server.client().await;
    let guard = client.get_lock("p:lock").lock().await.unwrap();
    guard.unlock().await.unwrap();
    let sem = client.get_semaphore("p:sem");
    assert!(sem.try_set_permits(2).await.unwrap());
    assert!(sem
        .try_acquire_many_for(2, Duration::from_secs(5))
        .await
        .unwrap());
    assert!(!sem.try_acquire().await.unwrap());
    sem.release_many(2).await.unwrap();

    let text = handle.render();
    let has = |line: &str| {
        assert!(
            text.lines().any(|l| l.starts_with(line)),
            "no line starting {line:?} in:\n{text}"
        )
    };
    // The families, typed and described.
    has("# TYPE redisson_lock_acquire_wait_seconds histogram");
    has("# HELP redisson_lock_acquire_wait_seconds Time from an acquire's call to its end");
    has("# TYPE redisson_lock_hold_seconds histogram");
    has("# TYPE redisson_lock_releases_total counter");
    has("# TYPE redisson_lock_permits_total counter");
    // The buckets, for a lock and a semaphore.
    for le in ["0.005", "0.05", "0.5", "5", "30", "+Inf"] {
        has(&format!(
            "redisson_lock_acquire_wait_seconds_bucket{{kind=\"lock\",outcome=\"acquired\",le=\"{le}\"}}"
        ));
    }
    has("redisson_lock_acquire_wait_seconds_bucket{kind=\"semaphore\",outcome=\"timeout\",le=\"+Inf\"} 1");
    has("redisson_lock_acquire_wait_seconds_count{kind=\"semaphore\",outcome=\"acquired\"} 1");
    has("redisson_lock_hold_seconds_count{kind=\"lock\"} 1");
    has("redisson_lock_releases_total{kind=\"lock\",outcome=\"released\"} 1");
    has("redisson_lock_permits_total{kind=\"semaphore\",direction=\"acquired\"} 2");
    has("redisson_lock_permits_total{kind=\"semaphore\",direction=\"released\"} 2");

    // The gauges are the process's: this client's part (it held `p:lock` above) would stay
    // until its next watchdog tick, 10 s away with the default lease; dropped, it leaves them.
    drop((sem, client));
    holds_while_held(&server, &handle).await;
}

/// The value of the series `series` (name and labels, as rendered) in `text`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A held lock shows in `Client::holds` and in the hold gauges while it is held, and leaves
/// both when it is released; a MultiLock records its acquire as kind `multi`, a RedLock as
/// `redlock`.
async fn holds_while_held(server: &TestServer, handle: &PrometheusHandle) {
    // A short watchdog lease: its tick (a third of it) reports the gauges.
    let client = server
        .client_with(|c| c.with_watchdog_timeout(Duration::from_millis(600)))
        .await;
    let guard = client.get_lock("p:held").lock().await.unwrap();
    let fixed = client
        .get_fair_lock("p:fixed")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();

    let holds = client.holds();
    assert_eq!(holds.len(), 2, "{holds:?}");
    let (lock, fair) = (&holds[0], &holds[1]);
    assert_eq!((lock.name.as_str(), lock.kind), ("p:held", "lock"));
    assert!(lock.owner.starts_with(client.id()), "{lock:?}");
    assert!(lock.watchdog && !lock.at_risk, "{lock:?}");
    assert!(lock.lease_left > Duration::ZERO && lock.lease_left <= Duration::from_millis(600));
    assert_eq!((fair.name.as_str(), fair.kind), ("p:fixed", "fair"));
    assert!(!fair.watchdog, "{fair:?}");
    assert!(fair.lease_left > Duration::from_secs(50), "{fair:?}");
    assert!(lock.since <= fair.since);

    let shown = |kind: &str, count: f64| {
        let text = handle.render();
        let held = value(&text, &format!("redisson_lock_holds{{kind=\"{kind}\"}}"));
        let age = value(
            &text,
            &format!("redisson_lock_oldest_hold_seconds{{kind=\"{kind}\"}}"),
        );
        match count {
            0.0 => held == Some(0.0) && age == Some(0.0),
            _ => held == Some(count) && age.is_some_and(|a| a > 0.0),
        }
    };
    let in_gauges = eventually(Duration::from_secs(20), || async {
        shown("lock", 1.0) && shown("fair", 1.0)
    });
    assert!(
        in_gauges.await,
        "held locks not in the gauges:\n{}",
        handle.render()
    );
    // The oldest hold's age grows while it is held (a stuck lock shows while it is stuck).
    let age = || {
        value(
            &handle.render(),
            "redisson_lock_oldest_hold_seconds{kind=\"lock\"}",
        )
    };
    let first = age().unwrap();
    let grows = eventually(Duration::from_secs(20), || async {
        age().is_some_and(|a| a > first)
    });
    assert!(grows.await, "the oldest hold's age does not grow");

    guard.unlock().await.unwrap();
    fixed.unlock().await.unwrap();
    assert!(client.holds().is_empty(), "{:?}", client.holds());
    let gone = eventually(Duration::from_secs(20), || async {
        shown("lock", 0.0) && shown("fair", 0.0)
    });
    assert!(
        gone.await,
        "released locks still in the gauges:\n{}",
        handle.render()
    );

    let multi: redisson_lock::MultiLock =
        redisson_lock::MultiLock::new([client.get_lock("p:m1"), client.get_lock("p:m2")]).unwrap();
    multi.lock().await.unwrap().unlock().await.unwrap();
    let text = handle.render();
    let multi_waits =
        "redisson_lock_acquire_wait_seconds_count{kind=\"multi\",outcome=\"acquired\"}";
    assert_eq!(value(&text, multi_waits), Some(1.0), "{text}");
    let multi_releases = "redisson_lock_releases_total{kind=\"multi\",outcome=\"released\"}";
    assert_eq!(value(&text, multi_releases), Some(1.0), "{text}");
    // A RedLock: the same, with kind `redlock`.
    let red =
        redisson_lock::RedLock::new([client.get_lock("p:r1"), client.get_lock("p:r2")]).unwrap();
    red.lock().await.unwrap().unlock().await.unwrap();
    let text = handle.render();
    let red_waits =
        "redisson_lock_acquire_wait_seconds_count{kind=\"redlock\",outcome=\"acquired\"}";
    assert_eq!(value(&text, red_waits), Some(1.0), "{text}");
    let red_holds = "redisson_lock_hold_seconds_count{kind=\"redlock\"}";
    assert_eq!(value(&text, red_holds), Some(1.0), "{text}");
}
