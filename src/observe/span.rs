//! The spans: one internal span per operation, a child span for the wait for a release, and a
//! client span per Redis round trip (the module docs of `observe` list their attributes).
//!
//! Spans cost nothing beyond a callsite check when no subscriber wants them: `tracing`
//! evaluates a span's field values only once the span is enabled, so the server's address is
//! parsed and the script's name looked up only then.

use std::future::Future;
use std::time::Instant;

use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::acquire_wait;

/// One operation on one object, for its span and metrics.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op<'a> {
    /// `acquire`, `release`, `unlock`, `force_unlock`, `count_down`, `await`.
    pub(crate) op: &'static str,
    /// The metrics' `kind` label.
    pub(crate) kind: &'static str,
    /// The object's name.
    pub(crate) name: &'a str,
}

impl<'a> Op<'a> {
    pub(crate) fn new(op: &'static str, kind: &'static str, name: &'a str) -> Self {
        Op { op, kind, name }
    }

    fn span(&self) -> Span {
        // A span's name is static: one callsite per operation.
        macro_rules! span {
            ($name:literal) => {
                tracing::info_span!(
                    $name,
                    otel.kind = "internal",
                    redisson_lock.operation = self.op,
                    redisson_lock.kind = self.kind,
                    redisson_lock.name = self.name,
                    redisson_lock.outcome = Empty,
                    error.type = Empty,
                    otel.status_code = Empty,
                )
            };
        }
        match self.op {
            "acquire" => span!("redisson_lock.acquire"),
            "release" => span!("redisson_lock.release"),
            "unlock" => span!("redisson_lock.unlock"),
            "force_unlock" => span!("redisson_lock.force_unlock"),
            "count_down" => span!("redisson_lock.count_down"),
            "await" => span!("redisson_lock.await"),
            _ => span!("redisson_lock.operation"),
        }
    }
}

/// Runs `fut`, a wait for a release (a pub/sub wait loop or a spin lock's backoff), in the
/// child span `redisson_lock.wait` of the operation's span.
pub(crate) fn waiting<F: Future>(fut: F) -> tracing::instrument::Instrumented<F> {
    fut.instrument(tracing::info_span!(
        "redisson_lock.wait",
        otel.kind = "internal"
    ))
}

/// The client span of one script round trip (`EVALSHA`): `script` its file's name, `server`
/// the URL of the server it goes to, where one is known (standalone). Both are read only when
/// the span is enabled.
pub(crate) fn round_trip(script: impl Fn() -> &'static str, server: Option<&str>) -> Span {
    let server = || server.and_then(host_port);
    tracing::info_span!(
        "EVALSHA",
        otel.kind = "client",
        db.system.name = "redis",
        db.operation.name = "EVALSHA",
        redisson_lock.script = script(),
        server.address = server().map(|(h, _)| h),
        server.port = server().map(|(_, p)| p),
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// Records a round trip's failure in its span (`error.type`: redis-rs's error kind).
pub(crate) fn round_trip_failed(span: &Span, e: &redis::RedisError) {
    if !span.is_disabled() {
        span.record("error.type", error_type(&e.kind()));
        span.record("otel.status_code", "ERROR");
    }
}

/// Host and port of a `redis://[user:pass@]host[:port][/db]` URL (port 6379 by default).
fn host_port(url: &str) -> Option<(&str, u16)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let authority = rest.split(['/', '?']).next()?;
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => 6379,
    };
    Some((host, port))
}

/// How an acquire ended: taken, or the wait ran out.
pub(crate) trait Acquired {
    fn acquired(&self) -> bool;
}

impl Acquired for bool {
    fn acquired(&self) -> bool {
        *self
    }
}

impl<T> Acquired for Option<T> {
    fn acquired(&self) -> bool {
        self.is_some()
    }
}

/// The error's class for `error.type`: the variant's name from its debug form.
fn error_type(e: &impl std::fmt::Debug) -> String {
    let text = format!("{e:?}");
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    text[..end].to_owned()
}

/// An operation under way: its span, and what its drop records when the future is dropped
/// before the operation ended (`cancelled`).
struct Running {
    span: Span,
    kind: &'static str,
    acquire: bool,
    start: Instant,
    ended: bool,
}

impl Running {
    fn new(op: &Op<'_>, acquire: bool) -> Running {
        Running {
            span: op.span(),
            kind: op.kind,
            acquire,
            start: Instant::now(),
            ended: false,
        }
    }

    /// The operation ended: `outcome` in its span (and the error, if any).
    fn end<T, E: std::fmt::Debug>(&mut self, r: &Result<T, E>, outcome: &'static str) {
        self.ended = true;
        if self.span.is_disabled() {
            return;
        }
        self.span.record("redisson_lock.outcome", outcome);
        if let Err(e) = r {
            self.span.record("error.type", error_type(e));
            self.span.record("otel.status_code", "ERROR");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.span.record("redisson_lock.outcome", "cancelled");
        if self.acquire {
            acquire_wait(self.kind, "cancelled", self.start.elapsed());
        }
    }
}

/// Runs an acquisition of `permits` (0 where permits mean nothing, as for a lock) in its span,
/// and records its wait and outcome: `acquired`, `timeout`, `error` or, when the future is
/// dropped first, `cancelled`.
pub(crate) async fn acquire<T: Acquired, E: std::fmt::Debug>(
    op: Op<'_>,
    permits: u64,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let mut running = Running::new(&op, true);
    let r = fut.instrument(running.span.clone()).await;
    let outcome = match &r {
        Ok(v) if v.acquired() => "acquired",
        Ok(_) => "timeout",
        Err(_) => "error",
    };
    running.end(&r, outcome);
    acquire_wait(op.kind, outcome, running.start.elapsed());
    if outcome == "acquired" {
        super::permits_moved(op.kind, "acquired", permits);
    }
    r
}

/// Runs a release of `permits` (0 for a lock) in its span and counts it by `outcome`
/// (`released`, `still_held`, `not_held`; `error` for a failure).
pub(crate) async fn release<T, E: std::fmt::Debug>(
    op: Op<'_>,
    permits: u64,
    fut: impl Future<Output = Result<T, E>>,
    outcome: impl FnOnce(&T) -> &'static str,
) -> Result<T, E> {
    let (r, outcome) = in_span(&op, fut, outcome).await;
    #[cfg(feature = "metrics")]
    metrics::counter!(super::RELEASES, "kind" => op.kind, "outcome" => outcome).increment(1);
    if outcome == "released" {
        super::permits_moved(op.kind, "released", permits);
    }
    r
}

/// Runs any other operation in its span, with its `outcome`.
pub(crate) async fn traced<T, E: std::fmt::Debug>(
    op: Op<'_>,
    fut: impl Future<Output = Result<T, E>>,
    outcome: impl FnOnce(&T) -> &'static str,
) -> Result<T, E> {
    in_span(&op, fut, outcome).await.0
}

/// Runs `fut` in `op`'s span and ends the span with its outcome (`error` for a failure).
async fn in_span<T, E: std::fmt::Debug>(
    op: &Op<'_>,
    fut: impl Future<Output = Result<T, E>>,
    outcome: impl FnOnce(&T) -> &'static str,
) -> (Result<T, E>, &'static str) {
    let mut running = Running::new(op, false);
    let r = fut.instrument(running.span.clone()).await;
    let outcome = match &r {
        Ok(v) => outcome(v),
        Err(_) => "error",
    };
    running.end(&r, outcome);
    (r, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_of_urls() {
        assert_eq!(host_port("redis://127.0.0.1/"), Some(("127.0.0.1", 6379)));
        assert_eq!(
            host_port("rediss://u:p@cache.local:6380/2"),
            Some(("cache.local", 6380))
        );
        assert_eq!(host_port("redis://:p@a@h:1"), Some(("h", 1)));
        assert_eq!(host_port("redis://[::1]:7000"), Some(("::1", 7000)));
        assert_eq!(host_port("redis://[::1]"), Some(("::1", 6379)));
        assert_eq!(host_port("redis:///"), None);
        assert_eq!(host_port("redis://h:notaport"), None);
        assert_eq!(host_port("valkey://h?protocol=resp3"), Some(("h", 6379)));
    }

    #[test]
    fn error_types_are_variant_names() {
        #[derive(Debug)]
        #[allow(dead_code)]
        enum E {
            Timeout { waited: u32 },
            Redis(String),
            Closed,
        }
        assert_eq!(error_type(&E::Timeout { waited: 1 }), "Timeout");
        assert_eq!(error_type(&E::Redis("x".into())), "Redis");
        assert_eq!(error_type(&E::Closed), "Closed");
    }
}
