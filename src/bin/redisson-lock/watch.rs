//! `watch NAME`: subscribe to the lock's channels and print every message with a timestamp,
//! plus the holders/TTL as polled once a second (Redisson publishes releases only: an acquire
//! shows up as a state change). A server lost while watching is reconnected to with backoff.

use std::time::Duration;

use redis::{PushInfo, PushKind, Value};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::inspect::{self, prefix_name, Holder, Inspection, Kind, LOCK_CHANNEL, RWLOCK_CHANNEL};
use crate::output::{self, now_ms};
use crate::server::Server;
use crate::target::{PushConn, Target};
use crate::{Failure, Result};

/// One line of `watch --json` (see docs/cli.md).
#[derive(Debug, Default, Serialize)]
struct Event {
    time: String,
    /// `watching`, `state`, `message`, `lost` or `regained`.
    event: &'static str,
    /// `lost`: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    meaning: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<Vec<String>>,
    /// `watching`: the server subscribed to (read again after each reconnect).
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<Server>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<Option<Kind>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<Option<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    holders: Option<Vec<Holder>>,
}

/// What a state line shows; a new line is printed when it changes.
#[derive(PartialEq, Eq)]
struct State {
    kind: Option<Kind>,
    mode: Option<String>,
    holders: Vec<Holder>,
}

/// The first pause before trying to reach a lost server again; it doubles up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a watch must have run before a loss starts the backoff over.
const STEADY: Duration = Duration::from_secs(10);

/// `watch NAME [--for SECONDS]`.
///
/// A server that cannot be reached at the start is an error (exit 1); one lost later is
/// reported (`lost`), tried again with a doubling pause, and reported again once the
/// subscriptions are back (`regained`): a restart or a failover does not end the watch.
pub async fn run(
    target: &Target,
    name: &str,
    duration: Option<Duration>,
    json: bool,
) -> Result<()> {
    let stop = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = watch_across_restarts(target, name, json) => r,
        _ = stop => Ok(()),
        r = tokio::signal::ctrl_c() => r.map_err(Failure::from),
    }
}

/// Subscribes and follows; after a loss, subscribes again with backoff, for ever.
async fn watch_across_restarts(target: &Target, name: &str, json: bool) -> Result<()> {
    let (mut conn, mut rx, sharded) = subscribe(target, name, json, true).await?;
    let mut pause = FIRST_BACKOFF;
    loop {
        let since = tokio::time::Instant::now();
        let lost = follow(target, name, &mut conn, &mut rx, sharded, json)
            .await
            .err()
            .map_or_else(|| "the subscriber connection ended".to_owned(), |e| e.0);
        if output::stdout_closed() {
            return Err(Failure(lost));
        }
        emit(
            json,
            Event {
                event: "lost",
                error: Some(lost.clone()),
                ..Event::default()
            },
            &format!("lost the server ({lost}); reconnecting"),
        )?;
        // A watch that ran a while starts over from the short pause; one lost again at once
        // (a server that accepts the subscription but fails every read) keeps backing off.
        if since.elapsed() >= STEADY {
            pause = FIRST_BACKOFF;
        }
        (conn, rx) = loop {
            tokio::time::sleep(pause).await;
            match subscribe(target, name, json, false).await {
                Ok((c, r, _)) => break (c, r),
                // A closed stdout ends the watch (no one reads it); anything else is retried.
                Err(e) if output::stdout_closed() => return Err(e),
                Err(e) => {
                    tracing::debug!(error = %e.0, "watch: the server is still unreachable");
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
            }
        };
        pause = (pause * 2).min(MAX_BACKOFF);
        emit(
            json,
            Event {
                event: "regained",
                ..Event::default()
            },
            "regained the server; watching again",
        )?;
    }
}

/// A subscriber connection on the lock's channels, announced by a `watching` line and the
/// server (`first`: as read at connect; after a reconnect, read again: a failover may have
/// moved the master).
async fn subscribe(
    target: &Target,
    name: &str,
    json: bool,
    first: bool,
) -> Result<(PushConn, mpsc::UnboundedReceiver<PushInfo>, bool)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut conn = target.push_conn(tx).await?;
    let sharded = target.client.is_sharded_pubsub();
    let mut channels = vec![
        prefix_name(LOCK_CHANNEL, name),
        prefix_name(RWLOCK_CHANNEL, name),
    ];
    for c in &channels {
        conn.subscribe(c, sharded).await?;
    }
    if !sharded {
        // Fair-lock waiters each wait on `<channel>:<owner>`.
        let pattern = format!("{}:*", glob_escape(&channels[0]));
        conn.psubscribe(&pattern).await?;
        channels.push(pattern);
    }
    let server = if first {
        target.server.clone()
    } else {
        target.read_server().await
    };
    let line = server.line();
    emit(
        json,
        Event {
            event: "watching",
            channels: Some(channels.clone()),
            server: Some(server),
            ..Event::default()
        },
        &format!("watching {name} on {}", channels.join(", ")),
    )?;
    if !json {
        emit(false, Event::default(), &line)?;
    }
    Ok((conn, rx, sharded))
}

/// Prints messages as they come and the state once a second, until the connection ends.
async fn follow(
    target: &Target,
    name: &str,
    conn: &mut PushConn,
    rx: &mut mpsc::UnboundedReceiver<PushInfo>,
    sharded: bool,
    json: bool,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last: Option<(State, Option<i64>)> = None;
    let mut per_waiter: Vec<String> = Vec::new();
    loop {
        tokio::select! {
            push = rx.recv() => {
                let Some(push) = push else {
                    return Err(Failure("the subscriber connection closed".into()));
                };
                if push.kind == PushKind::Disconnection {
                    return Err(Failure("the subscriber connection was lost".into()));
                }
                if let Some((channel, payload)) = message(&push) {
                    print_message(channel, payload, json)?;
                }
            }
            _ = tick.tick() => {
                let found = inspect::read(target, name, false).await?;
                if sharded {
                    subscribe_queue(conn, &found, &mut per_waiter).await?;
                }
                print_state(found, &mut last, json)?;
            }
        }
    }
}

/// On sharded pub/sub (no patterns), subscribes to each newly queued fair waiter's channel.
async fn subscribe_queue(
    conn: &mut PushConn,
    found: &Inspection,
    known: &mut Vec<String>,
) -> Result<()> {
    for channel in inspect::channels(found).into_iter().skip(1) {
        if found.kind == Some(Kind::Fair) && !known.contains(&channel) {
            conn.subscribe(&channel, true).await?;
            known.push(channel);
        }
    }
    Ok(())
}

/// `(channel, payload)` of a message push (plain, pattern or sharded).
fn message(push: &PushInfo) -> Option<(String, String)> {
    let text = |v: Option<&Value>| match v {
        Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        Some(Value::SimpleString(s)) => Some(s.clone()),
        _ => None,
    };
    let d = &push.data;
    match push.kind {
        PushKind::Message | PushKind::SMessage => Some((text(d.first())?, text(d.get(1))?)),
        PushKind::PMessage => Some((text(d.get(1))?, text(d.get(2))?)),
        _ => None,
    }
}

fn print_message(channel: String, payload: String, json: bool) -> Result<()> {
    let meaning = match payload.as_str() {
        "0" => "unlock: wakes a waiter",
        "1" => "read-write unlock: wakes every waiter",
        _ => "unknown message",
    };
    let line = format!("message {channel} {payload} ({meaning})");
    emit(
        json,
        Event {
            event: "message",
            channel: Some(channel),
            payload: Some(payload),
            meaning: Some(meaning),
            ..Event::default()
        },
        &line,
    )
}

/// Prints the state when the holders changed, or when the TTL went up (renewal, re-entry).
fn print_state(
    found: Inspection,
    last: &mut Option<(State, Option<i64>)>,
    json: bool,
) -> Result<()> {
    let state = State {
        kind: found.kind,
        mode: found.mode.clone(),
        holders: found.holders.clone(),
    };
    let unchanged = last.as_ref().is_some_and(|(s, _)| *s == state);
    let before = last.as_ref().and_then(|(_, ttl)| *ttl);
    let renewed = unchanged
        && matches!((before, found.ttl_ms), (Some(b), Some(now)) if b >= 0 && now > b + 500);
    if unchanged && !renewed {
        if let Some(l) = last.as_mut() {
            l.1 = found.ttl_ms;
        }
        return Ok(());
    }
    let line = match found.kind {
        None => "state not locked".to_owned(),
        Some(kind) => {
            let holders: Vec<String> = found
                .holders
                .iter()
                .map(|h| format!("{} {} x{}", h.owner, h.role, h.count))
                .collect();
            format!(
                "state {} ttl {} holders [{}]{}",
                kind.as_str(),
                output::opt_ttl(found.ttl_ms),
                holders.join(", "),
                if renewed { " (ttl extended)" } else { "" }
            )
        }
    };
    emit(
        json,
        Event {
            event: "state",
            kind: Some(found.kind),
            ttl_ms: Some(found.ttl_ms),
            holders: Some(found.holders),
            ..Event::default()
        },
        &line,
    )?;
    *last = Some((state, found.ttl_ms));
    Ok(())
}

fn emit(json: bool, mut event: Event, line: &str) -> Result<()> {
    let time = output::timestamp(now_ms());
    if json {
        event.time = time;
        output::print_json(&event)
    } else {
        output::line(&format!("{time}  {line}"))
    }
}

/// `s` with glob metacharacters escaped, for `PSUBSCRIBE`.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
