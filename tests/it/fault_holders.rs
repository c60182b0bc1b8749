//! Fault injection on lock *holders*: real holder processes (`tests/holder/src/main.rs`) killed with
//! SIGKILL or stopped with SIGSTOP, checked by the mutual-exclusion checker.
//! Scenarios T7, T8 and a fault-free baseline (T35) of docs/reliability.md.

use std::collections::HashMap;
use std::time::Duration;

use crate::support::checker::*;
use crate::support::numsub_on as numsub;
use crate::support::redisson::channel;
use crate::support::*;
use redisson_lock::Config;

/// Generous bound for anything event-driven on a loaded 2-core machine.
const BOUND: Duration = Duration::from_secs(30);

/// Runs `n` holder processes of `lock` (spec adjusted by `tweak`) to completion, fault-free;
/// the checker's report on their histories.
async fn contend(
    server: &TestServer,
    dir: &std::path::Path,
    lock: &str,
    n: usize,
    tweak: impl Fn(&mut HolderSpec),
) -> Report {
    let mut holders = spawn_holders(server, dir, lock, n, tweak);
    for h in &mut holders {
        assert!(h.wait(Duration::from_secs(90)).await, "holder failed");
    }
    check_holders(server, lock, &holders, &HashMap::new()).await
}

/// T8's pause, on a fresh server: a holder of kind `stale_kind` is SIGSTOPped between its read
/// and its write, past its 1.5 s watchdog lease; a holder of kind `fresh_kind` then runs once,
/// and the stopped one is resumed. Both must finish. Returns them (stale, fresh) with the
/// checker's report.
async fn paused_past_its_lease(
    lock: &str,
    stale_kind: &'static str,
    fresh_kind: &'static str,
) -> (Holder, Holder, Report) {
    let server = &TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut spec = HolderSpec::new(&server.url(), lock);
    spec.kind = stale_kind;
    spec.iterations = 1;
    spec.watchdog_ms = 1500;
    spec.rmw_ms = 1000;
    let mut stale = Holder::spawn(&spec, history_path(dir, 0));
    assert!(stale.wait_for("read", 1, BOUND).await);
    stale.pause();

    let mut spec = HolderSpec::new(&server.url(), lock);
    spec.kind = fresh_kind;
    spec.iterations = 1;
    let mut fresh = Holder::spawn(&spec, history_path(dir, 1));
    // The fresh holder gets the lock once the stopped holder's lease runs out.
    assert!(
        fresh.wait(BOUND).await,
        "the {fresh_kind} holder never got in"
    );
    stale.resume();
    assert!(
        stale.wait(BOUND).await,
        "the stale {stale_kind} holder failed"
    );
    let report = check_holders(server, lock, [&stale, &fresh], &HashMap::new()).await;
    assert_eq!(report.holds.len(), 2, "{report:?}");
    // The double grant is detected.
    assert_eq!(report.overlaps.len(), 1, "{report:?}");
    (stale, fresh, report)
}

/// Fault-free: four processes contend; the checker finds no overlap, no lost update, and every
/// fenced write accepted with tokens increasing in hold order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_free_holders_never_overlap() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let lock = "fault:free";
    let report = contend(&server, dir.path(), lock, 4, |spec| spec.iterations = 8).await;
    assert_eq!(report.holds.len(), 32, "{report:?}");
    report.assert_safe("fault-free");
    assert_eq!(report.fenced_rejected, 0);
    assert_eq!(report.lost_holds(), 0);
    // Holds ordered by time carry strictly increasing tokens.
    let tokens: Vec<i64> = report.holds.iter().map(|h| h.token).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(numsub(&server, &channel(lock)).await, 0);
}

/// Fault-free, holds longer than the lease: three processes hold for 2 s under a 1.5 s
/// watchdog lease, so every hold lives only by its renewals (with the watchdog off, each is
/// lost and the next holder overlaps it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_free_holds_longer_than_the_lease_are_renewed() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let lock = "fault:long";
    let report = contend(&server, dir.path(), lock, 3, |spec| {
        spec.iterations = 2;
        spec.watchdog_ms = 1_500;
        spec.hold_ms = 2_000;
    })
    .await;
    assert_eq!(report.holds.len(), 6, "{report:?}");
    assert_eq!(
        report.lost_holds(),
        0,
        "a renewed hold was lost: {report:?}"
    );
    report.assert_safe("fault-free, long holds");
}

/// T7: a holder is SIGKILLed while holding (watchdog lease 2 s). Its lease runs out, the waiting
/// processes and an in-process waiter acquire, nobody overlaps the dead holder, and no
/// subscription is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_frees_the_lock_after_its_lease() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let lock = "fault:kill9";
    let mut spec = HolderSpec::new(&server.url(), lock);
    spec.forever = true;
    spec.watchdog_ms = 2000;
    let mut victim = Holder::spawn(&spec, history_path(dir.path(), 0));
    assert!(victim.wait_for("acquired", 1, BOUND).await);

    let mut spec = HolderSpec::new(&server.url(), lock);
    spec.iterations = 2;
    let mut waiters: Vec<Holder> = (1..3)
        .map(|i| Holder::spawn(&spec, history_path(dir.path(), i)))
        .collect();
    let client = redisson_lock::Client::with_config(
        Config::new(server.url()).with_watchdog_timeout(Duration::from_millis(2000)),
    )
    .await
    .unwrap();
    let l = client.get_fenced_lock(lock);
    let local = tokio::spawn(async move { l.lock().await.map(|g| (g.token(), g)) });
    // Everyone is parked on the unlock channel (2 processes + this client).
    assert!(
        eventually(BOUND, || async {
            numsub(&server, &channel(lock)).await == 3
        })
        .await
    );
    for w in &waiters {
        assert!(w.events().iter().all(|e| e.kind != "acquired"));
    }

    let killed_at = victim.kill9();
    let (token, guard) = finished(local, BOUND, "in-process waiter never acquired").await;
    assert!(token > 1);
    guard.unlock().await.unwrap();
    for w in &mut waiters {
        assert!(w.wait(BOUND).await, "waiting holder failed");
    }

    let mut open_ends = HashMap::new();
    open_ends.insert(victim.pid(), killed_at);
    let holders = std::iter::once(&victim).chain(&waiters);
    let report = check_holders(&server, lock, holders, &open_ends).await;
    assert_eq!(report.holds.len(), 5, "{report:?}");
    report.assert_safe("kill -9");
    assert!(report
        .holds
        .iter()
        .filter(|h| h.pid != victim.pid())
        .all(|h| h.start > killed_at));
    // No leaked subscription: not in the client, not on the server.
    assert!(
        eventually(BOUND, || async {
            client.stats().subscribed_channels == 0 && client.stats().tracked_holds == 0
        })
        .await,
        "{:?}",
        client.stats()
    );
    assert!(subscribers_within(&server, &channel(lock), 0, BOUND).await);
}

/// T8 (Kleppmann's pause): a holder is SIGSTOPped between reading and writing the counter,
/// past its lease. Another holder takes the lock and writes. Without fencing this is a double
/// grant: the checker must report the overlap and the lost update; the fenced resource must
/// reject the resumed holder's stale write, and its release must report the lease lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_holder_past_its_lease_is_caught_and_fenced() {
    // The double grant is detected...
    let (stale, fresh, report) = paused_past_its_lease("fault:sigstop", "fenced", "fenced").await;
    let stale_hold = report.holds.iter().find(|h| h.pid == stale.pid()).unwrap();
    let fresh_hold = report.holds.iter().find(|h| h.pid == fresh.pid()).unwrap();
    assert!(stale_hold.token < fresh_hold.token);
    // ...the stale holder learns it lost the lock...
    assert!(
        stale_hold.lost,
        "the resumed holder was not told: {report:?}"
    );
    // ...by its guard, before it released (its validity ran out during the pause)...
    assert!(
        stale_hold.guard_lost,
        "is_lost() was false on resume: {report:?}"
    );
    assert!(!fresh_hold.lost);
    assert!(report.unexplained_overlaps().is_empty());
    // ...the unsafe counter lost an update...
    assert_eq!(report.increments, 2);
    assert_eq!(report.counter, 1, "expected the lost update: {report:?}");
    // ...and the fenced resource rejected the stale write.
    assert_eq!(stale_hold.fenced, Some(false));
    assert_eq!(fresh_hold.fenced, Some(true));
    assert_eq!(report.fenced_rejected, 1);
    assert!(report.fencing_errors.is_empty(), "{report:?}");
    assert_eq!(report.fenced_log, vec![(fresh_hold.token, fresh.pid())]);
}

async fn fair_queue(server: &TestServer, lock: &str) -> Vec<String> {
    let mut c = server.conn().await;
    redis::cmd("LRANGE")
        .arg(format!("redisson_lock_queue:{{{lock}}}"))
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap()
}

/// T19: fair lock, a queued waiter *process* is SIGKILLed at the head of the queue, then the
/// holder process too. The dead waiter is evicted once its queue deadline passes (fair-lock wait
/// timeout 1.5 s) and the next live waiter gets the lock; nobody overlaps and the queue ends
/// empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_fair_waiter_is_evicted_and_the_queue_moves_on() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let lock = "fault:fair-kill9";
    let spec = |i: u64| {
        let mut s = HolderSpec::new(&server.url(), lock);
        s.kind = "fair";
        s.fair_wait_ms = 1500;
        s.watchdog_ms = 2000;
        s.iterations = i;
        s
    };
    let mut holder = {
        let mut s = spec(1);
        s.forever = true;
        Holder::spawn(&s, history_path(dir.path(), 0))
    };
    assert!(holder.wait_for("acquired", 1, BOUND).await);
    let mut dead = Holder::spawn(&spec(1), history_path(dir.path(), 1));
    assert!(
        eventually(BOUND, || async {
            fair_queue(&server, lock).await.len() == 1
        })
        .await
    );
    let mut next = Holder::spawn(&spec(1), history_path(dir.path(), 2));
    assert!(
        eventually(BOUND, || async {
            fair_queue(&server, lock).await.len() == 2
        })
        .await
    );

    let dead_at = dead.kill9();
    let holder_killed_at = holder.kill9();
    assert!(next.wait(BOUND).await, "the live waiter never got the lock");

    let mut open_ends = HashMap::new();
    open_ends.insert(holder.pid(), holder_killed_at);
    open_ends.insert(dead.pid(), dead_at);
    let report = check_holders(&server, lock, [&holder, &dead, &next], &open_ends).await;
    report.assert_safe("fair kill -9");
    assert_eq!(report.holds.len(), 2, "{report:?}");
    let next_hold = report.holds.iter().find(|h| h.pid == next.pid()).unwrap();
    assert!(next_hold.start > holder_killed_at);
    assert!(report.holds.iter().all(|h| h.pid != dead.pid()));
    assert!(
        eventually(BOUND, || async {
            fair_queue(&server, lock).await.is_empty()
        })
        .await
    );
}

/// T8 for a read-write lock: a reader process is SIGSTOPped between its two reads, past its
/// lease. A writer process takes the write lock and writes. The checker reports the overlap and
/// the reader's unstable read; the resumed reader's guard says it lost its hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_reader_past_its_lease_lets_a_writer_in_and_is_told() {
    let (_reader, _writer, report) =
        paused_past_its_lease("fault:rw-sigstop", "read", "write").await;
    let r = report.holds.iter().find(|h| h.read).unwrap();
    assert!(
        r.unstable,
        "the stale read did not see the write: {report:?}"
    );
    assert!(r.guard_lost, "is_lost() was false on resume: {report:?}");
    assert!(report.unexplained_overlaps().is_empty());
    assert_eq!((report.increments, report.counter), (1, 1));
}
