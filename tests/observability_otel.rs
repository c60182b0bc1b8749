//! docs/observability.md's OpenTelemetry pipeline, run: `tracing` spans exported through
//! tracing-opentelemetry to an in-memory span exporter, read back after real operations on a
//! real server. Its own test binary: the subscriber is process-wide.

#[path = "it/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use redis::AsyncCommands;
use support::*;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;

/// The value of attribute `key` of `span`, as text.
fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| match &kv.value {
            Value::String(s) => s.as_str().to_owned(),
            other => other.to_string(),
        })
}

/// The spans named `name` about the object `object`.
fn spans<'s>(all: &'s [SpanData], name: &str, object: &str) -> Vec<&'s SpanData> {
    all.iter()
        .filter(|s| s.name == name && attr(s, "db.redisson.name").as_deref() == Some(object))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_are_exported_as_client_spans_with_database_attributes() {
    // The pipeline of docs/observability.md, with an in-memory exporter for the stdout or OTLP
    // one, and the INFO level a production subscriber runs at.
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let tracer = provider.tracer("my-service");
    tracing_subscriber::registry()
        .with(LevelFilter::INFO)
        .with(tracing_opentelemetry::layer().with_tracer(tracer))
        .init();

    let server = TestServer::start();
    let port = server.port.to_string();
    let client = server.client().await;
    let mut raw = server.conn().await;

    // A lock taken and released; a semaphore that times out; a latch that is open; a lock
    // that is refused (the key is not a lock).
    let guard = client.get_lock("o:lock").lock().await.unwrap();
    guard.unlock().await.unwrap();
    let sem = client.get_semaphore("o:sem");
    assert!(!sem.try_acquire().await.unwrap());
    sem.release().await.unwrap();
    assert!(client
        .get_count_down_latch("o:latch")
        .wait_for(Duration::ZERO)
        .await
        .unwrap());
    let _: () = raw.set("o:string", "x").await.unwrap();
    assert!(client.get_lock("o:string").try_lock().await.is_err());

    provider.force_flush().unwrap();
    let all = exporter.get_finished_spans().unwrap();

    // One span per operation, each named after it; nothing for the internal steps.
    let names: Vec<&str> = all.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(all.len(), 6, "{names:?}");
    let acquire = spans(&all, "redisson_lock.acquire", "o:lock");
    assert_eq!(acquire.len(), 1, "{names:?}");
    let acquire = acquire[0];
    assert_eq!(acquire.span_kind, SpanKind::Client);
    for (key, value) in [
        ("db.system", "redis"),
        ("db.system.name", "redis"),
        ("db.operation.name", "acquire"),
        ("db.redisson.kind", "lock"),
        ("db.redisson.outcome", "acquired"),
        ("server.address", "127.0.0.1"),
        ("server.port", port.as_str()),
    ] {
        assert_eq!(attr(acquire, key).as_deref(), Some(value), "{key}");
    }
    assert_eq!(acquire.status, Status::Unset);
    let release = spans(&all, "redisson_lock.release", "o:lock");
    assert_eq!(release.len(), 1, "{names:?}");
    assert_eq!(
        attr(release[0], "db.redisson.outcome").as_deref(),
        Some("released")
    );

    let sem = spans(&all, "redisson_lock.acquire", "o:sem");
    assert_eq!(sem.len(), 1, "{names:?}");
    assert_eq!(
        attr(sem[0], "db.redisson.kind").as_deref(),
        Some("semaphore")
    );
    assert_eq!(
        attr(sem[0], "db.redisson.outcome").as_deref(),
        Some("timeout")
    );
    assert_eq!(spans(&all, "redisson_lock.release", "o:sem").len(), 1);
    let latch = spans(&all, "redisson_lock.await", "o:latch");
    assert_eq!(latch.len(), 1, "{names:?}");
    assert_eq!(
        attr(latch[0], "db.operation.name").as_deref(),
        Some("await")
    );

    let failed = spans(&all, "redisson_lock.acquire", "o:string");
    assert_eq!(failed.len(), 1, "{names:?}");
    assert!(
        matches!(failed[0].status, Status::Error { .. }),
        "{:?}",
        failed[0].status
    );
    assert_eq!(attr(failed[0], "error.type").as_deref(), Some("WrongType"));
    assert_eq!(
        attr(failed[0], "db.redisson.outcome").as_deref(),
        Some("error")
    );
}
