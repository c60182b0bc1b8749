//! Failover awareness on a Redis Cluster (`Config::with_failover_awareness`): a light watch of
//! the slot map.
//!
//! The lock scripts' router (`cluster_route`) follows `MOVED` by itself and reads the map again
//! when it sees one, but a hold that nothing sends to would go unchecked until its renewal. So
//! one task per cluster client has the router read `CLUSTER SLOTS` (one small command to one
//! node, parsed and installed by the router: [`Router::read_slots`]) every [`POLL`] and
//! compares the master of each slot range with the previous answer. When a master changed (a
//! failover, a node taken over, a slot moved), it notifies `changed` at once: the watchdog
//! re-verifies every hold out of turn, on the new masters (its renewals go by the router's map,
//! just installed). Then it brings redis-rs's cluster connection's own slot map up to date, for
//! the commands that go that way (a keyed `EXISTS` into each changed range until no
//! redirection comes back: a `MOVED` makes redis-rs rebuild its map). A poll that fails (the node asked is down) is skipped; the next one asks
//! another node. The task is aborted when the last handle on the connection is dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::Value;
use tokio::sync::Notify;

use super::cluster_route::{Range, Router};
use crate::keys::slot_of;

/// How often the slot map is read: detection within about this, plus the re-verification.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// How long the connection's own map is given to follow a change (the next poll waits).
const SETTLE: Duration = Duration::from_secs(3);

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
    /// Starts watching the slot map through `router`.
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
    let mut known: Option<Vec<Range>> = None;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Installed for the lock scripts' own routing too.
        let Some(now) = router.read_slots(POLL * 4).await else {
            continue;
        };
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
        changed.notify_one();
        follow(&mut conn, &moved).await;
    }
}

/// The ranges of `now` with a slot whose master differs from the one `before` named for it
/// (or that `before` did not serve).
fn changed_ranges(before: &[Range], now: &[Range]) -> Vec<(u16, u16)> {
    now.iter()
        .filter(|r| {
            let mut covered = 0u32;
            for b in before.iter().filter(|b| b.lo <= r.hi && b.hi >= r.lo) {
                if b.master != r.master {
                    return true;
                }
                covered += u32::from(r.hi.min(b.hi) - r.lo.max(b.lo)) + 1;
            }
            covered != u32::from(r.hi - r.lo) + 1
        })
        .map(|r| (r.lo, r.hi))
        .collect()
}

/// A key in hash slot `slot`.
fn key_in(slot: u16) -> Option<String> {
    (0u32..1_000_000)
        .take_while(|_| slot < crate::keys::SLOTS)
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
    use super::super::cluster_route::parse_slots;
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
        assert_eq!((before[0].lo, before[0].hi), (0, 5460));
        assert_eq!(before[0].master, "a");
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
    fn every_range_has_a_key() {
        for slot in [0, 100, 12182, 16383] {
            let key = key_in(slot).expect("a key");
            assert_eq!(slot_of(key.as_bytes()), slot);
        }
        assert!(key_in(16384).is_none());
    }
}
