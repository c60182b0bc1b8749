//! RLock mixed contention: Java threads of both Redisson versions and Rust tasks take the same
//! two locks for tens of seconds, each hold a non-atomic counter update (GET, sleep, SET), every
//! hold's interval on CLOCK_MONOTONIC. Zero overlaps, zero lost increments, everyone served.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use redisson_lock::LockOwner;

use super::peers;
use crate::support::checker::mono_ns;
use crate::support::TestServer;

const NAMES: [&str; 2] = ["ic:{a}", "ic:{b}"];
const JAVA_OWNERS: usize = 3;
const RUST_TASKS: usize = 3;
const HOLD: Duration = Duration::from_millis(5);

/// `INTEROP_CONTENTION_SECS` (default 15).
fn duration() -> Duration {
    let secs = std::env::var("INTEROP_CONTENTION_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15u64);
    Duration::from_secs(secs)
}

fn counter(name: &str) -> String {
    format!("{name}:counter")
}

/// One participant's holds: who, which name, `(t0, t1)` in CLOCK_MONOTONIC nanoseconds.
struct Holds {
    who: String,
    name: &'static str,
    spans: Vec<(u64, u64)>,
}

fn parse_spans(who: &str, reply: &str) -> Vec<(u64, u64)> {
    let (count, spans) = reply
        .split_once(' ')
        .unwrap_or_else(|| panic!("{who}: bad contend reply {reply:?}"));
    let count: usize = count.parse().unwrap();
    if spans == "-" {
        assert_eq!(count, 0);
        return Vec::new();
    }
    let out: Vec<(u64, u64)> = spans
        .split(',')
        .map(|s| {
            let (a, b) = s.split_once(':').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    assert_eq!(out.len(), count, "{who}: count and spans disagree");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rlock_mixed_contention_has_no_overlap_and_no_lost_increment() {
    let server = TestServer::start();
    let peers = peers(&server.url(), None).await;
    let client = server.client().await;
    let run = duration();

    let mut java = Vec::new();
    let mut slot = 0usize;
    for peer in &peers {
        for j in 0..JAVA_OWNERS {
            let name = NAMES[slot % NAMES.len()];
            slot += 1;
            let owner = format!("j{j}");
            let cmd = format!(
                "contend lock {name} {} {} {}",
                counter(name),
                run.as_millis(),
                HOLD.as_millis()
            );
            let who = format!("java {} {owner}", peer.version());
            java.push((who, name, peer.send(&owner, &cmd)));
        }
    }
    let mut rust = Vec::new();
    for r in 0..RUST_TASKS {
        let name = NAMES[slot % NAMES.len()];
        slot += 1;
        let lock = client
            .get_lock(name)
            .with_owner(LockOwner::new(100 + r as u64));
        let mut raw = server.conn().await;
        let key = counter(name);
        rust.push(tokio::spawn(async move {
            let end = mono_ns() + run.as_nanos() as u64;
            let mut spans = Vec::new();
            while mono_ns() < end {
                let guard = lock.lock().await.unwrap();
                let t0 = mono_ns();
                let v: Option<i64> = raw.get(&key).await.unwrap();
                tokio::time::sleep(HOLD).await;
                let _: () = raw.set(&key, v.unwrap_or(0) + 1).await.unwrap();
                let t1 = mono_ns();
                guard.unlock().await.unwrap();
                spans.push((t0, t1));
            }
            (format!("rust task {r}"), name, spans)
        }));
    }

    let mut all = Vec::new();
    for (who, name, reply) in java {
        let reply = reply.await.unwrap_or_else(|e| panic!("{who}: {e:?}"));
        let spans = parse_spans(&who, &reply);
        all.push(Holds { who, name, spans });
    }
    for task in rust {
        let (who, name, spans) = task.await.unwrap();
        all.push(Holds { who, name, spans });
    }

    let mut raw = server.conn().await;
    let mut summary = Vec::new();
    for name in NAMES {
        let mine: Vec<&Holds> = all.iter().filter(|h| h.name == name).collect();
        for h in &mine {
            assert!(!h.spans.is_empty(), "{} was never served on {name}", h.who);
        }
        let mut spans: Vec<(u64, u64, &str)> = mine
            .iter()
            .flat_map(|h| h.spans.iter().map(|&(a, b)| (a, b, h.who.as_str())))
            .collect();
        spans.sort();
        let mut overlaps = Vec::new();
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                overlaps.push(format!("{:?} and {:?}", w[0], w[1]));
            }
        }
        assert!(
            overlaps.is_empty(),
            "{name}: overlapping holds: {overlaps:?}"
        );
        let total: i64 = raw.get(counter(name)).await.unwrap();
        assert_eq!(
            total as usize,
            spans.len(),
            "{name}: the counter lost increments"
        );
        let per: HashMap<&str, usize> = mine
            .iter()
            .map(|h| (h.who.as_str(), h.spans.len()))
            .collect();
        summary.push(format!("{name}: {} holds {per:?}", spans.len()));
    }
    eprintln!("mixed contention over {run:?}: {}", summary.join("; "));
}
