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
        .filter(|s| s.name == name && attr(s, "redisson_lock.name").as_deref() == Some(object))
        .collect()
}

/// The children of `parent`.
fn children<'s>(all: &'s [SpanData], parent: &SpanData) -> Vec<&'s SpanData> {
    all.iter()
        .filter(|s| s.parent_span_id == parent.span_context.span_id())
        .collect()
}

/// `span` and its descendants as an indented tree, with their kinds, attributes and times
/// relative to the root's start (what docs/observability.md shows).
fn tree(
    all: &[SpanData],
    span: &SpanData,
    root: std::time::SystemTime,
    depth: usize,
    out: &mut String,
) {
    let at =
        |t: std::time::SystemTime| t.duration_since(root).unwrap_or_default().as_secs_f64() * 1e3;
    let mut attrs: Vec<String> = span
        .attributes
        .iter()
        .filter(|kv| {
            !kv.key.as_str().starts_with("code.")
                && !kv.key.as_str().starts_with("thread.")
                && kv.key.as_str() != "target"
                && !kv.key.as_str().starts_with("busy_ns")
                && !kv.key.as_str().starts_with("idle_ns")
        })
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    attrs.sort();
    out.push_str(&format!(
        "{:indent$}{} [{:?}] {:.1}..{:.1} ms  {}\n",
        "",
        span.name,
        span.span_kind,
        at(span.start_time),
        at(span.end_time),
        attrs.join(" "),
        indent = depth * 2
    ));
    let mut kids = children(all, span);
    kids.sort_by_key(|s| s.start_time);
    for kid in kids {
        tree(all, kid, root, depth + 1, out);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_are_internal_spans_with_a_wait_and_client_round_trips() {
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
    let other = server.client().await;
    let mut raw = server.conn().await;

    // A contended acquire: another client holds the lock; this one waits for its release.
    let held = other.get_lock("o:lock").lock().await.unwrap();
    let waiter = {
        let lock = client.get_lock("o:lock");
        tokio::spawn(async move { lock.lock().await })
    };
    let parked = eventually(Duration::from_secs(20), || async {
        numsub_on(&server, "redisson_lock__channel:{o:lock}").await == 1
    });
    assert!(parked.await, "the waiter never subscribed");
    held.unlock().await.unwrap();
    waiter.await.unwrap().unwrap().unlock().await.unwrap();

    // A semaphore that times out; a latch that is open; a lock that is refused (the key is
    // not a lock); a MultiLock taken and released.
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
    let multi: redisson_lock::MultiLock =
        redisson_lock::MultiLock::new([client.get_lock("o:m1"), client.get_lock("o:m2")]).unwrap();
    multi.lock().await.unwrap().unlock().await.unwrap();

    provider.force_flush().unwrap();
    let all = exporter.get_finished_spans().unwrap();
    let names: Vec<&str> = all.iter().map(|s| s.name.as_ref()).collect();

    // The contended acquire: one internal span with the crate's attributes, none under `db.`.
    let acquire: Vec<&SpanData> = spans(&all, "redisson_lock.acquire", "o:lock")
        .into_iter()
        .filter(|s| s.parent_span_id == opentelemetry::trace::SpanId::INVALID)
        .collect();
    assert_eq!(acquire.len(), 2, "{names:?}"); // the holder's and the waiter's
    let acquire = *acquire
        .iter()
        .find(|s| {
            children(&all, s)
                .iter()
                .any(|c| c.name == "redisson_lock.wait")
        })
        .expect("an acquire with a wait span");
    assert_eq!(acquire.span_kind, SpanKind::Internal);
    for (key, value) in [
        ("redisson_lock.operation", "acquire"),
        ("redisson_lock.kind", "lock"),
        ("redisson_lock.outcome", "acquired"),
    ] {
        assert_eq!(attr(acquire, key).as_deref(), Some(value), "{key}");
    }
    assert_eq!(acquire.status, Status::Unset);
    for span in &all {
        for kv in &span.attributes {
            assert!(
                !kv.key.as_str().starts_with("db.redisson"),
                "{}: {}",
                span.name,
                kv.key
            );
        }
    }
    // Its wait, a child span; the round trips, client spans under the acquire or the wait.
    let kids = children(&all, acquire);
    let wait = kids
        .iter()
        .find(|s| s.name == "redisson_lock.wait")
        .expect("a wait span");
    assert_eq!(wait.span_kind, SpanKind::Internal);
    let first = kids
        .iter()
        .filter(|s| s.name == "EVALSHA")
        .collect::<Vec<_>>();
    assert_eq!(first.len(), 1, "the first try: {kids:?}");
    let tries = children(&all, wait);
    assert!(
        tries.iter().any(|s| s.name == "EVALSHA"),
        "no round trip in the wait: {tries:?}"
    );
    for rt in first.into_iter().copied().chain(tries) {
        assert_eq!(rt.span_kind, SpanKind::Client);
        for (key, value) in [
            ("db.system.name", "redis"),
            ("db.operation.name", "EVALSHA"),
            ("redisson_lock.script", "lock"),
            ("server.address", "127.0.0.1"),
            ("server.port", port.as_str()),
        ] {
            assert_eq!(attr(rt, key).as_deref(), Some(value), "{key}");
        }
    }
    let mut text = String::new();
    tree(&all, acquire, acquire.start_time, 0, &mut text);
    eprintln!("the contended acquire:\n{text}");

    let release = spans(&all, "redisson_lock.release", "o:lock");
    assert_eq!(release.len(), 2, "{names:?}");
    assert_eq!(
        attr(release[0], "redisson_lock.outcome").as_deref(),
        Some("released")
    );
    assert!(children(&all, release[0]).iter().any(
        |s| s.name == "EVALSHA" && attr(s, "redisson_lock.script").as_deref() == Some("unlock")
    ));

    let sem = spans(&all, "redisson_lock.acquire", "o:sem");
    assert_eq!(sem.len(), 1, "{names:?}");
    assert_eq!(
        attr(sem[0], "redisson_lock.kind").as_deref(),
        Some("semaphore")
    );
    assert_eq!(
        attr(sem[0], "redisson_lock.outcome").as_deref(),
        Some("timeout")
    );
    assert_eq!(spans(&all, "redisson_lock.release", "o:sem").len(), 1);
    let latch = spans(&all, "redisson_lock.await", "o:latch");
    assert_eq!(latch.len(), 1, "{names:?}");
    assert_eq!(
        attr(latch[0], "redisson_lock.operation").as_deref(),
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
        attr(failed[0], "redisson_lock.outcome").as_deref(),
        Some("error")
    );
    // The failed round trip is marked in its client span.
    let rt = children(&all, failed[0]);
    assert!(
        rt.iter()
            .any(|s| s.name == "EVALSHA" && matches!(s.status, Status::Error { .. })),
        "{rt:?}"
    );

    // The MultiLock: its own span, kind `multi`, over its members' acquires.
    let multi = spans(&all, "redisson_lock.acquire", "o:m1,o:m2");
    assert_eq!(multi.len(), 1, "{names:?}");
    assert_eq!(multi[0].span_kind, SpanKind::Internal);
    assert_eq!(
        attr(multi[0], "redisson_lock.kind").as_deref(),
        Some("multi")
    );
    assert_eq!(
        attr(multi[0], "redisson_lock.outcome").as_deref(),
        Some("acquired")
    );
    let members = children(&all, multi[0]);
    assert_eq!(
        members
            .iter()
            .filter(|s| s.name == "redisson_lock.acquire")
            .count(),
        2,
        "{members:?}"
    );
    let released = spans(&all, "redisson_lock.release", "o:m1,o:m2");
    assert_eq!(released.len(), 1, "{names:?}");
    assert_eq!(
        attr(released[0], "redisson_lock.kind").as_deref(),
        Some("multi")
    );
}
