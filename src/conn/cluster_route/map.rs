//! The router's slot map: which master serves each hash slot, read from `CLUSTER SLOTS` by
//! the crate's one parser of it ([`parse_slots`]), pointed slot by slot on `MOVED`. The
//! failover watch (`cluster_watch`) reads the same ranges through the router.

use std::sync::Arc;

use parking_lot::RwLock;
use redis::aio::ConnectionManager;
use redis::{Cmd, Value};
use tokio::sync::OnceCell;

use crate::keys::SLOTS;

/// A slot no known master serves (yet).
const NONE: u16 = u16::MAX;

/// One master: its address and its connection, opened at first use.
pub(super) struct Node {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) conn: OnceCell<ConnectionManager>,
}

/// Which master serves each slot.
#[derive(Default)]
struct Map {
    slots: Vec<u16>,
    nodes: Vec<Arc<Node>>,
}

impl Map {
    /// The index of the node at `host:port`, added (from `old`, connection kept, or new) when
    /// this map has none.
    fn index_of(&mut self, host: &str, port: u16, old: &Map) -> u16 {
        let at = |n: &Arc<Node>| n.host == host && n.port == port;
        if let Some(i) = self.nodes.iter().position(at) {
            return i as u16;
        }
        let node = old.nodes.iter().find(|n| at(n)).cloned();
        self.nodes
            .push(node.unwrap_or_else(|| Arc::new(Node::new(host.to_owned(), port))));
        (self.nodes.len() - 1) as u16
    }
}

/// `CLUSTER SLOTS`.
pub(super) fn slots_cmd() -> Cmd {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SLOTS");
    cmd
}

/// The slot map, replaced whole on each change (readers keep the one they took).
pub(super) struct SlotMap(RwLock<Arc<Map>>);

impl SlotMap {
    /// A map that knows no master yet.
    pub(super) fn new() -> SlotMap {
        SlotMap(RwLock::new(Arc::new(Map {
            slots: vec![NONE; usize::from(SLOTS)],
            nodes: Vec::new(),
        })))
    }

    /// Every known master.
    pub(super) fn nodes(&self) -> Vec<Arc<Node>> {
        self.0.read().nodes.clone()
    }

    /// Installs the masters of `ranges` (connections to known masters kept); `false` when
    /// none has a usable address.
    pub(super) fn install(&self, ranges: &[Range]) -> bool {
        let old = self.0.read().clone();
        let mut map = Map {
            slots: vec![NONE; usize::from(SLOTS)],
            nodes: Vec::new(),
        };
        for r in ranges.iter().filter(|r| r.lo <= r.hi && r.hi < SLOTS) {
            let Some((host, port)) = &r.addr else {
                continue;
            };
            let i = map.index_of(host, *port, &old);
            map.slots[usize::from(r.lo)..=usize::from(r.hi)].fill(i);
        }
        let installed = !map.nodes.is_empty();
        if installed {
            *self.0.write() = Arc::new(map);
        }
        installed
    }

    /// Points one slot at `host:port` (a `MOVED` reply), until the next map read.
    pub(super) fn point(&self, slot: u16, host: &str, port: u16) {
        let mut guard = self.0.write();
        let mut map = Map {
            slots: guard.slots.clone(),
            nodes: guard.nodes.clone(),
        };
        let i = map.index_of(host, port, &Map::default());
        if let Some(s) = map.slots.get_mut(usize::from(slot)) {
            *s = i;
        }
        *guard = Arc::new(map);
    }

    /// The master serving `slot`, if known.
    pub(super) fn node(&self, slot: u16) -> Option<Arc<Node>> {
        let map = self.0.read();
        let i = *map.slots.get(usize::from(slot))?;
        map.nodes.get(usize::from(i)).cloned()
    }

    /// The known node at `host:port`, or a new one.
    pub(super) fn node_at(&self, host: &str, port: u16) -> Arc<Node> {
        self.0
            .read()
            .nodes
            .iter()
            .find(|n| n.host == host && n.port == port)
            .cloned()
            .unwrap_or_else(|| Arc::new(Node::new(host.to_owned(), port)))
    }
}

impl Node {
    fn new(host: String, port: u16) -> Node {
        Node {
            host,
            port,
            conn: OnceCell::new(),
        }
    }
}

/// One slot range of a `CLUSTER SLOTS` reply, `[start, end, [host, port, id, ...], replicas...]`:
/// its master's id (or `host:port` where the reply names none) and address (`None` where it
/// has none usable, `?` or empty: its slots go to redis-rs).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Range {
    pub(crate) lo: u16,
    pub(crate) hi: u16,
    pub(crate) master: String,
    addr: Option<(String, u16)>,
}

/// The ranges of a `CLUSTER SLOTS` reply, sorted: the crate's one reader of it.
pub(crate) fn parse_slots(reply: &Value) -> Vec<Range> {
    let Value::Array(ranges) = reply else {
        return Vec::new();
    };
    let text = |v: Option<&Value>| match v {
        Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        Some(Value::SimpleString(s)) => Some(s.clone()),
        Some(Value::Int(i)) => Some(i.to_string()),
        _ => None,
    };
    let mut out: Vec<Range> = ranges
        .iter()
        .filter_map(|r| {
            let Value::Array(items) = r else { return None };
            let (Some(Value::Int(lo)), Some(Value::Int(hi)), Some(Value::Array(master))) =
                (items.first(), items.get(1), items.get(2))
            else {
                return None;
            };
            let host = match master.first() {
                Some(Value::BulkString(b)) => String::from_utf8(b.clone()).ok(),
                Some(Value::SimpleString(s)) => Some(s.clone()),
                _ => None,
            };
            let port = match master.get(1) {
                Some(Value::Int(p)) => u16::try_from(*p).ok(),
                _ => None,
            };
            let addr = host.filter(|h| !h.is_empty() && h != "?").zip(port);
            let master = text(master.get(2)).or_else(|| {
                Some(format!(
                    "{}:{}",
                    text(master.first())?,
                    text(master.get(1))?
                ))
            })?;
            let (lo, hi) = (u16::try_from(*lo).ok()?, u16::try_from(*hi).ok()?);
            Some(Range {
                lo,
                hi,
                master,
                addr,
            })
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_map_is_read_from_cluster_slots() {
        let range = |lo: i64, hi: i64, host: &str, port: i64| {
            Value::Array(vec![
                Value::Int(lo),
                Value::Int(hi),
                Value::Array(vec![
                    Value::BulkString(host.as_bytes().to_vec()),
                    Value::Int(port),
                    Value::BulkString(b"id".to_vec()),
                ]),
            ])
        };
        let reply = Value::Array(vec![
            range(5461, 16383, "127.0.0.1", 7001),
            range(0, 5460, "127.0.0.1", 7000),
            range(1, 2, "?", 7002),
            range(3, 99999, "h", 7003),
        ]);
        let ranges = parse_slots(&reply);
        let read: Vec<_> = ranges
            .iter()
            .map(|r| (r.lo, r.hi, r.addr.clone()))
            .collect();
        let addr = |port| Some(("127.0.0.1".to_owned(), port));
        assert_eq!(
            read,
            vec![
                (0, 5460, addr(7000)),
                (1, 2, None),
                (5461, 16383, addr(7001))
            ]
        );
        assert!(ranges.iter().all(|r| r.master == "id"));
        assert!(parse_slots(&Value::Nil).is_empty());
        assert!(parse_slots(&Value::Array(vec![Value::Int(1)])).is_empty());
    }
}
