//! Failover awareness on a Redis Cluster (`Config::with_failover_awareness`): a light watch of
//! the slot map.
//!
//! redis-rs follows `MOVED` inside its cluster connection, so this crate never learns of a
//! failover from its own commands. Instead one task per cluster client sends `CLUSTER SLOTS`
//! (one small command to one node) every [`POLL`] and compares the master of each slot range
//! with the previous answer. When a master changed (a failover, a node taken over, a slot
//! moved), it first brings the cluster connection's own slot map up to date (a keyed `EXISTS`
//! into each changed range until no redirection comes back: a `MOVED` makes redis-rs rebuild
//! its map), then notifies `changed`: the watchdog re-verifies every hold out of turn, on the
//! new masters. A poll that fails (the node asked is down) is skipped; the next one asks
//! another node. The task is aborted when the last handle on the connection is dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo, Slot};
use redis::Value;
use tokio::sync::Notify;

use super::cluster_route::Router;
use crate::keys::slot_of;

/// How often the slot map is read: detection within about this, plus the re-verification.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// How long the connection's own map is given to follow a change before the watchdog is told
/// anyway.
const SETTLE: Duration = Duration::from_secs(3);

/// The slot ranges and the id (or address) of the master serving each, sorted.
type SlotMap = Vec<(u16, u16, String)>;

/// The watch task of one cluster connection; aborted on drop.
pub(crate) struct ClusterWatch {
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ClusterWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ClusterWatch {
    /// Starts watching the slot map through `conn`.
    pub(crate) fn start(router: Arc<Router>) -> ClusterWatch {
        let changed = Arc::new(Notify::new());
        let task = tokio::spawn(watch(router, changed.clone()));
        ClusterWatch { changed, task }
    }

    /// What the watchdog waits on for an out-of-turn pass.
    pub(crate) fn topology_changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }
}

async fn watch(router: Arc<Router>, changed: Arc<Notify>) {
    let mut conn = router.fallback();
    let mut known: Option<SlotMap> = None;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some((now, reply)) = slot_map(&mut conn).await else {
            continue;
        };
        // The lock scripts' own routing follows the same map.
        router.install(&reply);
        let moved = match &known {
            Some(before) => changed_ranges(before, &now),
            None => Vec::new(),
        };
        known = Some(now);
        if moved.is_empty() {
            continue;
        }
        tracing::info!(
            ranges = moved.len(),
            "cluster: a slot has a new master; re-verifying the holds"
        );
        follow(&mut conn, &moved).await;
        changed.notify_one();
    }
}

/// `CLUSTER SLOTS` from one node, read into a [`SlotMap`]; `None` on an error or an empty map
/// (a node that lost its view of the cluster).
async fn slot_map(conn: &mut ClusterConnection) -> Option<(SlotMap, Value)> {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SLOTS");
    let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let reply = tokio::time::timeout(POLL * 4, conn.route_command(cmd, route))
        .await
        .ok()?
        .ok()?;
    let map = parse_slots(&reply);
    (!map.is_empty()).then_some((map, reply))
}

/// The ranges of a `CLUSTER SLOTS` reply: `[start, end, [ip, port, id, ...], replicas...]`.
fn parse_slots(reply: &Value) -> SlotMap {
    let Value::Array(ranges) = reply else {
        return Vec::new();
    };
    let mut map: SlotMap = ranges
        .iter()
        .filter_map(|r| {
            let Value::Array(items) = r else { return None };
            let (Some(Value::Int(lo)), Some(Value::Int(hi)), Some(Value::Array(master))) =
                (items.first(), items.get(1), items.get(2))
            else {
                return None;
            };
            let text = |v: Option<&Value>| match v {
                Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                Some(Value::SimpleString(s)) => Some(s.clone()),
                Some(Value::Int(i)) => Some(i.to_string()),
                _ => None,
            };
            let who = text(master.get(2)).or_else(|| {
                Some(format!(
                    "{}:{}",
                    text(master.first())?,
                    text(master.get(1))?
                ))
            })?;
            Some((u16::try_from(*lo).ok()?, u16::try_from(*hi).ok()?, who))
        })
        .collect();
    map.sort();
    map
}

/// The ranges of `now` with a slot whose master differs from the one `before` named for it
/// (or that `before` did not serve).
fn changed_ranges(before: &SlotMap, now: &SlotMap) -> Vec<(u16, u16)> {
    now.iter()
        .filter(|(lo, hi, who)| {
            let mut covered = 0u32;
            for (blo, bhi, bwho) in before.iter().filter(|(blo, bhi, _)| blo <= hi && bhi >= lo) {
                if bwho != who {
                    return true;
                }
                covered += u32::from((*hi).min(*bhi) - (*lo).max(*blo)) + 1;
            }
            covered != u32::from(hi - lo) + 1
        })
        .map(|(lo, hi, _)| (*lo, *hi))
        .collect()
}

/// A key in hash slot `slot`.
fn key_in(slot: u16) -> Option<String> {
    let slot = Slot::new(slot)?;
    (0u32..1_000_000)
        .map(|n| n.to_string())
        .find(|k| slot_of(k.as_bytes()) == slot)
}

/// Sends `EXISTS` into each changed range until it is answered without a redirection or a
/// connection error (each `MOVED` makes redis-rs rebuild its slot map), for at most [`SETTLE`].
async fn follow(conn: &mut ClusterConnection, moved: &[(u16, u16)]) {
    let deadline = Instant::now() + SETTLE;
    for key in moved.iter().filter_map(|&(lo, _)| key_in(lo)) {
        while Instant::now() < deadline {
            let mut cmd = redis::cmd("EXISTS");
            cmd.arg(&key);
            let reply = tokio::time::timeout(POLL, cmd.query_async::<Value>(conn)).await;
            if matches!(reply, Ok(Ok(_))) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(lo: i64, hi: i64, port: i64, id: &str) -> Value {
        Value::Array(vec![
            Value::Int(lo),
            Value::Int(hi),
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(id.as_bytes().to_vec()),
            ]),
        ])
    }

    #[test]
    fn a_new_master_of_a_range_is_a_change_and_the_same_map_is_none() {
        let before = parse_slots(&Value::Array(vec![
            range(5461, 10922, 7001, "b"),
            range(0, 5460, 7000, "a"),
        ]));
        assert_eq!(before[0], (0, 5460, "a".to_owned()));
        assert!(changed_ranges(&before, &before).is_empty());
        let now = parse_slots(&Value::Array(vec![
            range(0, 5460, 7003, "d"),
            range(5461, 10922, 7001, "b"),
        ]));
        assert_eq!(changed_ranges(&before, &now), vec![(0, 5460)]);
        // A slot moved to another master splits a range: only that slot is a change.
        let split = parse_slots(&Value::Array(vec![
            range(0, 99, 7000, "a"),
            range(100, 100, 7001, "b"),
            range(101, 5460, 7000, "a"),
            range(5461, 10922, 7001, "b"),
        ]));
        assert_eq!(changed_ranges(&before, &split), vec![(100, 100)]);
        // Slots nobody served before are a change too.
        let more = parse_slots(&Value::Array(vec![
            range(0, 5460, 7000, "a"),
            range(5461, 10922, 7001, "b"),
            range(10923, 16383, 7002, "c"),
        ]));
        assert_eq!(changed_ranges(&before, &more), vec![(10923, 16383)]);
    }

    #[test]
    fn a_reply_that_is_no_slot_map_reads_as_empty() {
        assert!(parse_slots(&Value::Nil).is_empty());
        assert!(parse_slots(&Value::Array(vec![Value::Int(1)])).is_empty());
    }

    #[test]
    fn every_range_has_a_key() {
        for slot in [0, 100, 12182, 16383] {
            let key = key_in(slot).expect("a key");
            assert_eq!(Some(slot_of(key.as_bytes())), Slot::new(slot));
        }
        assert!(key_in(16384).is_none());
    }
}
