//! Who waits: the subscriber counts of channels (`PUBSUB NUMSUB`, and `SHARDNUMSUB` on a
//! cluster), summed over every node, since a subscriber is counted only on the node it is
//! connected to. `inspect` counts a lock's waiters with it, and tells a semaphore from a latch by
//! whose channel has subscribers; `list --all` does the same for a whole `SCAN` page at once.

use std::collections::HashMap;

use crate::target::Target;
use crate::Result;

/// Subscribers of `channels`, summed over every node of a cluster (pub/sub counts are local to
/// the node a subscriber is connected to), sharded subscriptions included.
pub async fn total(target: &Target, channels: &[String]) -> Result<i64> {
    if channels.is_empty() {
        return Ok(0);
    }
    let nodes = target.node_conns(false).await?;
    if nodes.is_empty() {
        return numsub(&mut target.conn(), "NUMSUB", channels).await;
    }
    let mut total = 0;
    for mut node in nodes {
        total += numsub(&mut node, "NUMSUB", channels).await?;
        // Redis 7+ only; older servers have no sharded subscribers to count.
        total += numsub(&mut node, "SHARDNUMSUB", channels)
            .await
            .unwrap_or(0);
    }
    Ok(total)
}

/// Subscribers of each of `channels` (summed over `nodes`, every node of a cluster, sharded
/// included; an empty `nodes` outside a cluster).
pub async fn each(
    target: &Target,
    nodes: &[redis::aio::MultiplexedConnection],
    channels: &[String],
) -> Result<HashMap<String, i64>> {
    let mut counts: HashMap<String, i64> = HashMap::new();
    if channels.is_empty() {
        return Ok(counts);
    }
    let mut add = |reply: Vec<(String, i64)>| {
        for (c, n) in reply {
            *counts.entry(c).or_default() += n;
        }
    };
    if nodes.is_empty() {
        add(numsub_each(&mut target.conn(), "NUMSUB", channels).await?);
    }
    for node in nodes {
        let mut node = node.clone();
        add(numsub_each(&mut node, "NUMSUB", channels).await?);
        add(numsub_each(&mut node, "SHARDNUMSUB", channels)
            .await
            .unwrap_or_default());
    }
    Ok(counts)
}

async fn numsub_each<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    sub: &str,
    channels: &[String],
) -> Result<Vec<(String, i64)>> {
    Ok(redis::cmd("PUBSUB")
        .arg(sub)
        .arg(channels)
        .query_async(conn)
        .await?)
}

async fn numsub<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    sub: &str,
    channels: &[String],
) -> Result<i64> {
    let reply: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg(sub)
        .arg(channels)
        .query_async(conn)
        .await?;
    Ok(reply.iter().map(|(_, n)| n).sum())
}
