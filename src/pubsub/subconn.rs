//! The subscriber connection itself: a RESP3 connection (standalone, the Sentinel's current
//! master; RESP2 pub/sub where the server refuses RESP3) or a RESP3 cluster connection, whose
//! pushes carry the messages, behind one subscribe / unsubscribe / next-event interface. The
//! RESP3 connections are named as the command connection is (`conn/naming.rs`), before they
//! subscribe (a RESP2 subscriber could not send `CLIENT SETNAME`). Each call is bounded by a
//! timeout (`with_timeout`); `subscribe_checked` tells an ACL refusal from a broken connection.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::conn::{Naming, SentinelConn};
use crate::endpoints::Endpoints;
use crate::error::{is_auth_error, is_connection_error, LockError, Result};

/// Where the subscriber connects; `name`: its connections' name.
pub(crate) enum Source {
    /// One server.
    Fixed {
        client: Box<redis::Client>,
        name: String,
    },
    /// The master the sentinels name at each (re)connect.
    Sentinel {
        sentinel: Arc<SentinelConn>,
        name: String,
    },
    /// A cluster; `sharded`: SSUBSCRIBE instead of SUBSCRIBE.
    Cluster {
        endpoints: Arc<Endpoints>,
        sharded: bool,
        name: String,
    },
}

/// What the subscriber connection delivered.
pub(super) enum Event {
    Message(String, Vec<u8>),
    /// The server dropped a subscription (a sharded channel's slot moved away).
    Dropped(String),
    /// A node's connection was cut (cluster): the subscriber is replaced (see `deliver`).
    NodeLost,
    Ignore,
    Closed,
}

pub(super) enum SubConn {
    Resp3 {
        conn: redis::aio::MultiplexedConnection,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
    },
    Resp2 {
        sink: redis::aio::PubSubSink,
        stream: redis::aio::PubSubStream,
    },
    Cluster {
        conn: redis::cluster_async::ClusterConnection,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
        sharded: bool,
    },
}

impl SubConn {
    pub(super) async fn open(source: &Source, config: &Config) -> Result<SubConn> {
        let within = config.connection_timeout();
        match source {
            Source::Fixed { client, name } => open_single(client, name, within).await,
            Source::Sentinel { sentinel, name } => {
                let client = sentinel.master_client().await?;
                open_single(&client, name, within).await
            }
            Source::Cluster {
                endpoints,
                sharded,
                name,
            } => {
                let (tx, pushes) = mpsc::unbounded_channel();
                let mut conn = crate::conn::cluster_connection(endpoints, config, Some(tx)).await?;
                // A node connection opened later (a failover) makes the subscriber open
                // again (`Event::NodeLost`), named again here.
                Naming::new(name.clone()).send(&mut conn).await;
                Ok(SubConn::Cluster {
                    conn,
                    pushes,
                    sharded: *sharded,
                })
            }
        }
    }

    pub(super) async fn next(&mut self) -> Event {
        match self {
            SubConn::Resp2 { stream, .. } => match stream.next().await {
                Some(msg) => Event::Message(
                    msg.get_channel_name().to_owned(),
                    msg.get_payload_bytes().to_vec(),
                ),
                None => Event::Closed,
            },
            SubConn::Resp3 { pushes, .. } => match pushes.recv().await {
                // The one connection is gone: open another.
                Some(push) => push_event(push, Event::Closed),
                None => Event::Closed,
            },
            SubConn::Cluster { pushes, .. } => match pushes.recv().await {
                Some(push) => push_event(push, Event::NodeLost),
                None => Event::Closed,
            },
        }
    }

    pub(super) async fn subscribe(&mut self, names: &[String]) -> redis::RedisResult<()> {
        match self {
            SubConn::Resp3 { conn, .. } => conn.subscribe(names).await,
            SubConn::Resp2 { sink, .. } => sink.subscribe(names).await,
            SubConn::Cluster { conn, sharded, .. } => {
                if *sharded {
                    // One channel per command: sharded channels of one command must share a slot.
                    for n in names {
                        ssubscribe_following(conn, n).await?;
                    }
                    Ok(())
                } else {
                    conn.subscribe(names).await
                }
            }
        }
    }

    pub(super) async fn unsubscribe(&mut self, names: &[String]) -> redis::RedisResult<()> {
        match self {
            SubConn::Resp3 { conn, .. } => conn.unsubscribe(names).await,
            SubConn::Resp2 { sink, .. } => sink.unsubscribe(names).await,
            SubConn::Cluster { conn, sharded, .. } => {
                if *sharded {
                    for n in names {
                        conn.sunsubscribe(n).await?;
                    }
                    Ok(())
                } else {
                    conn.unsubscribe(names).await
                }
            }
        }
    }
}

/// `MOVED` replies to one channel's `SSUBSCRIBE` that [`ssubscribe_following`] follows.
const SUBSCRIBE_REDIRECTS: usize = 3;

/// `SSUBSCRIBE channel`, following a slot that moved. redis-rs (1.8) sends a subscription to
/// the node its slot map names and hands a `MOVED` back as the error, without reading its map
/// again: the resubscription of a channel whose slot moved away (`Event::Dropped`) would fail
/// and the whole subscriber connection be replaced (every channel resubscribed, every waiter
/// woken). So a `MOVED` has the connection send `EXISTS channel` (a read of the channel's slot,
/// whose `MOVED` redis-rs follows and answers by reading its slot map again) before the
/// subscription goes again; after [`SUBSCRIBE_REDIRECTS`] the error is the caller's.
async fn ssubscribe_following(
    conn: &mut redis::cluster_async::ClusterConnection,
    channel: &str,
) -> redis::RedisResult<()> {
    use redis::aio::ConnectionLike;
    let mut redirects = 0;
    loop {
        match conn.ssubscribe(channel).await {
            Err(e) if e.redirect_node().is_some() && redirects < SUBSCRIBE_REDIRECTS => {
                redirects += 1;
                let read = redis::cmd("EXISTS").arg(channel).to_owned();
                // Its own outcome does not matter: the next `SSUBSCRIBE` tells.
                let _ = conn.req_packed_command(&read).await;
            }
            other => return other,
        }
    }
}

/// What a push says; `lost`: what a `Disconnection` push means for this connection.
fn push_event(push: redis::PushInfo, lost: Event) -> Event {
    let text = |v: Option<&redis::Value>| match v {
        Some(redis::Value::BulkString(b)) => Some(b.clone()),
        Some(redis::Value::SimpleString(s)) => Some(s.clone().into_bytes()),
        _ => None,
    };
    match push.kind {
        redis::PushKind::Message | redis::PushKind::SMessage => {
            match (text(push.data.first()), text(push.data.get(1))) {
                (Some(channel), Some(payload)) => {
                    Event::Message(String::from_utf8_lossy(&channel).into_owned(), payload)
                }
                _ => Event::Ignore,
            }
        }
        redis::PushKind::SUnsubscribe => match text(push.data.first()) {
            Some(channel) => Event::Dropped(String::from_utf8_lossy(&channel).into_owned()),
            None => Event::Ignore,
        },
        redis::PushKind::Disconnection => lost,
        _ => Event::Ignore,
    }
}

/// A RESP3 connection to one server (its TLS settings kept), named, whose pushes go to the
/// subscriber; RESP2 pub/sub, unnamed, when the server refuses RESP3 (`HELLO`).
async fn open_single(client: &redis::Client, name: &str, within: Duration) -> Result<SubConn> {
    let timed = || LockError::Timeout {
        what: "connecting the subscriber",
        waited: within,
    };
    let info = client.get_connection_info().clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    let resp3 = redis::Client::open(info.set_redis_settings(settings))?;
    let (tx, pushes) = mpsc::unbounded_channel();
    // No reply timeout of redis-rs' own (500 ms by default): the subscriber bounds its calls
    // with the configured timeouts (`with_timeout`).
    let config = redis::AsyncConnectionConfig::new()
        .set_push_sender(tx)
        .set_connection_timeout(Some(within))
        .set_response_timeout(None);
    let opened = tokio::time::timeout(
        within,
        resp3.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .map_err(|_| timed())?;
    match opened {
        Ok(mut conn) => {
            Naming::new(name.to_owned()).send(&mut conn).await;
            Ok(SubConn::Resp3 { conn, pushes })
        }
        Err(e) if !is_connection_error(&e) && !is_auth_error(&e) => {
            tracing::debug!(error = %e, "no RESP3 for the subscriber: RESP2, unnamed");
            let conn = tokio::time::timeout(within, client.get_async_pubsub())
                .await
                .map_err(|_| timed())??;
            let (sink, stream) = conn.split();
            Ok(SubConn::Resp2 { sink, stream })
        }
        Err(e) => Err(e.into()),
    }
}

/// Subscribes to `names` and returns those the server's ACL refused (`NOPERM`), with its error.
/// The server refuses a whole command for one forbidden channel, so a refused batch is tried
/// again one channel at a time to tell which. Any other error is the connection's.
pub(super) async fn subscribe_checked(
    conn: &mut SubConn,
    names: &[String],
    timeout: Duration,
) -> redis::RedisResult<Vec<(String, redis::RedisError)>> {
    let refusal = |e: &redis::RedisError| e.code() == Some("NOPERM");
    match with_timeout(timeout, conn.subscribe(names)).await {
        Ok(()) => return Ok(Vec::new()),
        Err(e) if !refusal(&e) => return Err(e),
        Err(e) if names.len() == 1 => return Ok(vec![(names[0].clone(), e)]),
        Err(_) => {}
    }
    let mut refused = Vec::new();
    for name in names {
        match with_timeout(timeout, conn.subscribe(std::slice::from_ref(name))).await {
            Ok(()) => {}
            Err(e) if refusal(&e) => refused.push((name.clone(), e)),
            Err(e) => return Err(e),
        }
    }
    Ok(refused)
}

pub(super) async fn with_timeout<T>(
    timeout: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or_else(|_| {
            let e = std::io::Error::new(std::io::ErrorKind::TimedOut, "pub/sub command timed out");
            Err(e.into())
        })
}
