//! The subscriber connection itself: a RESP2 pub/sub connection (standalone, the Sentinel's
//! current master) or a RESP3 cluster connection whose pushes carry the messages, behind one
//! subscribe / unsubscribe / next-event interface.

use std::sync::Arc;

use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::conn::{Naming, SentinelConn};
use crate::endpoints::Endpoints;
use crate::error::{LockError, Result};

/// Where the subscriber connects.
pub(crate) enum Source {
    /// One server.
    Fixed(Box<redis::Client>),
    /// The master the sentinels name at each (re)connect.
    Sentinel(Arc<SentinelConn>),
    /// A cluster; `sharded`: SSUBSCRIBE instead of SUBSCRIBE; `name`: the connections' name
    /// (each node's connection is named when the subscriber opens).
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
        let timed = |e| LockError::Timeout {
            what: e,
            waited: within,
        };
        match source {
            Source::Fixed(client) => {
                let conn = tokio::time::timeout(within, client.get_async_pubsub())
                    .await
                    .map_err(|_| timed("connecting the subscriber"))??;
                let (sink, stream) = conn.split();
                Ok(SubConn::Resp2 { sink, stream })
            }
            Source::Sentinel(sentinel) => {
                let client = sentinel.master_client().await?;
                let conn = tokio::time::timeout(within, client.get_async_pubsub())
                    .await
                    .map_err(|_| timed("connecting the subscriber"))??;
                let (sink, stream) = conn.split();
                Ok(SubConn::Resp2 { sink, stream })
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
            SubConn::Cluster { pushes, .. } => {
                let Some(push) = pushes.recv().await else {
                    return Event::Closed;
                };
                let text = |v: Option<&redis::Value>| match v {
                    Some(redis::Value::BulkString(b)) => Some(b.clone()),
                    Some(redis::Value::SimpleString(s)) => Some(s.clone().into_bytes()),
                    _ => None,
                };
                match push.kind {
                    redis::PushKind::Message | redis::PushKind::SMessage => {
                        match (text(push.data.first()), text(push.data.get(1))) {
                            (Some(channel), Some(payload)) => Event::Message(
                                String::from_utf8_lossy(&channel).into_owned(),
                                payload,
                            ),
                            _ => Event::Ignore,
                        }
                    }
                    redis::PushKind::SUnsubscribe => match text(push.data.first()) {
                        Some(channel) => {
                            Event::Dropped(String::from_utf8_lossy(&channel).into_owned())
                        }
                        None => Event::Ignore,
                    },
                    redis::PushKind::Disconnection => Event::NodeLost,
                    _ => Event::Ignore,
                }
            }
        }
    }

    pub(super) async fn subscribe(&mut self, names: &[String]) -> redis::RedisResult<()> {
        match self {
            SubConn::Resp2 { sink, .. } => sink.subscribe(names).await,
            SubConn::Cluster { conn, sharded, .. } => {
                if *sharded {
                    // One channel per command: sharded channels of one command must share a slot.
                    for n in names {
                        conn.ssubscribe(n).await?;
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
