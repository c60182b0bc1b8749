//! docs/observability.md's Prometheus exporter, run: metrics-exporter-prometheus with
//! histogram buckets, rendered after real lock and semaphore operations on a real server. Its
//! own test binary: the recorder is process-wide.
#![cfg(feature = "metrics")]

#[path = "it/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
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
}
