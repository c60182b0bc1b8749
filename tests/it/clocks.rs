//! Clock faults (T29), with libfaketime from the distribution (`apt-get install faketime`;
//! `scripts/ensure-redis` installs it; without it these tests say so and check nothing).
//!
//! T27/T28 (server clocks jumping or running fast) are not here: Debian's redis-server cannot
//! run under libfaketime (its allocator calls `clock_gettime` during libfaketime's own start-up,
//! which aborts with "unexpected recursive calls to clock_gettime()"; checked with faketime
//! 0.9.10 and redis-server 7.0.15). See docs/reliability.md.
//!
//! * T29: a client's wall clock is an hour off (realtime only; `Instant` is untouched). Locks
//!   count time with `Instant` and the server's expiry, so exclusion and progress hold; the fair
//!   lock stores waiter deadlines from client clocks (as Redisson), so a skewed waiter can be
//!   skipped or jump the queue: order is not guaranteed across skewed clocks, exclusion is.
use std::collections::HashMap;
use std::time::Duration;

use crate::support::checker::*;
use crate::support::*;

fn faked(spec: &str) -> Option<Vec<(String, String)>> {
    let lib = faketime_lib()?;
    Some(vec![
        ("LD_PRELOAD".into(), lib),
        ("FAKETIME".into(), spec.into()),
        // Only the wall clock: CLOCK_MONOTONIC stays true (histories and timers use it).
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
        ("FAKETIME_NO_CACHE".into(), "1".into()),
    ])
}

async fn skewed_holders(kind: &'static str, lock: &str) {
    let (Some(ahead), Some(behind)) = (faked("+1h"), faked("-1h")) else {
        eprintln!("note: libfaketime missing (apt-get install faketime): T29 not run");
        return;
    };
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut holders: Vec<Holder> = [Vec::new(), ahead, behind]
        .into_iter()
        .enumerate()
        .map(|(i, env)| {
            let mut spec = HolderSpec::new(&server.url(), lock);
            spec.kind = kind;
            spec.iterations = 4;
            spec.hold_ms = 30;
            spec.watchdog_ms = 2_000;
            spec.env = env;
            Holder::spawn(&spec, history_path(dir.path(), i))
        })
        .collect();
    for h in &mut holders {
        assert!(
            h.wait(Duration::from_secs(60)).await,
            "{kind}: a holder did not finish"
        );
    }
    let paths: Vec<_> = holders.iter().map(|h| h.history.clone()).collect();
    let mut store = server.conn().await;
    let report = check(&mut store, lock, &paths, &HashMap::new()).await;
    assert_eq!(report.holds.len(), 12, "{kind}: {report:?}");
    report.assert_safe(&format!("{kind}, wall clocks an hour apart"));
    assert_eq!(report.lost_holds(), 0, "{kind}: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t29_client_wall_clocks_an_hour_off_change_nothing_for_rlock() {
    skewed_holders("fenced", "t29:fenced").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t29_client_wall_clocks_an_hour_off_keep_the_fair_lock_exclusive() {
    skewed_holders("fair", "t29:fair").await;
}
