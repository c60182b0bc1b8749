//! Clock steps (reference plan T28, T29): processes whose wall clock is off, run under
//! libfaketime (`faketime` from the distribution; `scripts/ensure-redis` installs it). Without
//! libfaketime every test here says so on stderr and passes without running.
//!
//! * The fair lock stores **wall-clock** deadlines (epoch ms from each client, as Redisson does)
//!   in `redisson_lock_timeout:{name}`; every acquire and release first evicts queued waiters
//!   whose deadline is before *the caller's* now. A waiter whose clock is off by more than the
//!   fair-lock wait timeout therefore evicts the live waiters ahead of it (clock ahead) or is
//!   evicted by them (clock behind): fairness is lost, mutual exclusion is not (T29, fair).
//! * A queued waiter whose clock is ahead and that then dies leaves a deadline that far in the
//!   future: the queue behind it is stuck until then (pinned hazard; remedy shown).
//! * A server clock running 0.5 % fast expires keys early; the guard's drift allowance (1 % of
//!   the lease + 2 ms) reports the hold lost before the key is gone (T28). libfaketime cannot
//!   run the distribution's redis-server (it aborts on recursive `clock_gettime` calls from
//!   jemalloc), so this one plays the fast server clock by shortening the key's TTL.
//!
//! * T27 (pinned hazard): a RedLock node whose clock jumps forward by the lease expires its
//!   member at once; with the node the first holder could not reach, a second client forms
//!   another majority while the first holder's validity lasts. Played by expiring the member
//!   (libfaketime cannot run redis-server), like T26's empty restart.
//!
//! The holders' CLOCK_MONOTONIC (history timestamps, tokio's `Instant`) is not faked
//! (`FAKETIME_DONT_FAKE_MONOTONIC=1`), so the checker still compares holds across processes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::checker::{check_holders, history_path, holder_bin, Holder, HolderSpec};
use crate::support::proxy::{proxied, Mode};
use crate::support::{eventually, TestServer};
use redis::AsyncCommands;

const BOUND: Duration = Duration::from_secs(20);

/// libfaketime, if installed.
fn libfaketime() -> Option<PathBuf> {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ];
    let found = candidates.iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        eprintln!(
            "SKIPPED: libfaketime not found (install it with `apt-get install faketime`, or run \
             scripts/ensure-redis as root)"
        );
    }
    found
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Environment that runs a process with its wall clock at `offset` (libfaketime syntax, e.g.
/// `+2m`, `-2m`, `+1h`); CLOCK_MONOTONIC stays true.
fn fake_clock(cmd: &mut Command, lib: &Path, offset: &str) {
    cmd.env("LD_PRELOAD", lib)
        .env("FAKETIME", offset)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
}

/// `Holder::spawn` with the holder's wall clock at `offset` (the arguments are the same).
fn spawn_with_clock(spec: &HolderSpec, history: PathBuf, lib: &Path, offset: &str) -> Holder {
    let mut cmd = Command::new(holder_bin());
    for (k, v) in [
        ("url", spec.url.clone()),
        ("lock", spec.lock.clone()),
        ("history", history.display().to_string()),
        ("iterations", spec.iterations.to_string()),
        ("forever", u8::from(spec.forever).to_string()),
        ("hold-ms", spec.hold_ms.to_string()),
        ("rmw-ms", spec.rmw_ms.to_string()),
        ("gap-ms", spec.gap_ms.to_string()),
        ("lease-ms", spec.lease_ms.to_string()),
        ("watchdog-ms", spec.watchdog_ms.to_string()),
        ("response-ms", spec.response_ms.to_string()),
        ("max-secs", spec.max_secs.to_string()),
        ("kind", spec.kind.to_owned()),
        ("fair-wait-ms", spec.fair_wait_ms.to_string()),
    ] {
        cmd.arg(format!("--{k}")).arg(v);
    }
    fake_clock(&mut cmd, lib, offset);
    Holder::run(&mut cmd, history)
}

fn fair_spec(server: &TestServer, lock: &str, fair_wait_ms: u64) -> HolderSpec {
    let mut s = HolderSpec::new(&server.url(), lock);
    s.kind = "fair";
    s.fair_wait_ms = fair_wait_ms;
    s.watchdog_ms = 2000;
    s.iterations = 1;
    s
}

async fn fair_queue(server: &TestServer, lock: &str) -> Vec<String> {
    let mut c = server.conn().await;
    c.lrange(format!("redisson_lock_queue:{{{lock}}}"), 0, -1)
        .await
        .unwrap()
}

/// Deadlines in the fair lock's timeout set, as offsets from our (true) clock, in queue order.
async fn deadlines(server: &TestServer, lock: &str) -> Vec<(String, i64)> {
    let mut c = server.conn().await;
    let mut out = Vec::new();
    for m in fair_queue(server, lock).await {
        let s: Option<f64> = c
            .zscore(format!("redisson_lock_timeout:{{{lock}}}"), &m)
            .await
            .unwrap();
        out.push((m, s.map_or(i64::MIN, |s| s as i64 - now_ms())));
    }
    out
}

/// A holder keeps the fair lock; `first` queues, then `second`, each with its own clock
/// offset (`None`: the true clock); the holder dies. Returns (first's hold start, second's).
async fn queue_pair(lock: &str, first: Option<&str>, second: Option<&str>) -> Option<(u64, u64)> {
    let lib = libfaketime()?;
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    // Wait timeout 10 s: far shorter than the 2 min offsets, far longer than the test's steps.
    let spec = fair_spec(&server, lock, 10_000);
    let spawn = |i: usize, offset: Option<&str>| match offset {
        Some(o) => spawn_with_clock(&spec, history_path(dir.path(), i), &lib, o),
        None => Holder::spawn(&spec, history_path(dir.path(), i)),
    };
    let mut holder = {
        let mut s = spec.clone();
        s.forever = true;
        Holder::spawn(&s, history_path(dir.path(), 0))
    };
    assert!(holder.wait_for("acquired", 1, BOUND).await);
    let mut a = spawn(1, first);
    assert!(
        eventually(BOUND, || async {
            fair_queue(&server, lock).await.len() == 1
        })
        .await,
        "the first waiter never queued"
    );
    let queued_first = deadlines(&server, lock).await;
    let mut b = spawn(2, second);
    assert!(b.wait_for("started", 1, BOUND).await);
    // The second waiter's first attempt evicts the first, or is followed by the first's
    // eviction; either way the queue is the second waiter's alone for a moment, until the
    // first re-queues behind it.
    assert!(
        eventually(BOUND, || async {
            let q = fair_queue(&server, lock).await;
            !q.is_empty() && q[0] != queued_first[0].0
        })
        .await,
        "no eviction: queue {:?} (first queued as {queued_first:?})",
        deadlines(&server, lock).await
    );
    eprintln!(
        "first queued as {queued_first:?}; after the second arrived: {:?}",
        deadlines(&server, lock).await
    );
    let killed_at = holder.kill9();
    assert!(a.wait(BOUND).await, "the first waiter never got the lock");
    assert!(b.wait(BOUND).await, "the second waiter never got the lock");

    let mut open_ends = HashMap::new();
    open_ends.insert(holder.pid(), killed_at);
    let report = check_holders(&server, lock, [&holder, &a, &b], &open_ends).await;
    report.assert_safe("fair lock with a waiter's clock off");
    assert!(report.overlaps.is_empty(), "{report:?}");
    assert_eq!(report.holds.len(), 3, "{report:?}");
    assert!(
        eventually(BOUND, || async {
            fair_queue(&server, lock).await.is_empty()
        })
        .await,
        "queue left: {:?}",
        fair_queue(&server, lock).await
    );
    let start = |pid: u32| report.holds.iter().find(|h| h.pid == pid).unwrap().start;
    Some((start(a.pid()), start(b.pid())))
}

/// [`queue_pair`] (when libfaketime is installed), and the second waiter must have got the lock
/// first; `why` says what it means otherwise.
async fn second_goes_first(lock: &str, first: Option<&str>, second: Option<&str>, why: &str) {
    if let Some((first, second)) = queue_pair(lock, first, second).await {
        assert!(second < first, "{why}");
    }
}

/// T29, fair lock, clock ahead: a waiter whose clock is 2 min ahead (more than the 10 s wait
/// timeout) sees the live waiter ahead of it as expired, evicts it and goes first. Nobody
/// overlaps and both get the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiter_with_its_clock_ahead_jumps_the_queue_without_overlap() {
    second_goes_first(
        "clock:ahead",
        None,
        Some("+2m"),
        "the waiter with the clock ahead did not go first",
    )
    .await;
}

/// T29, fair lock, clock behind: a waiter whose clock is 2 min behind queues with a deadline
/// already past for everybody else; the next live waiter evicts it and goes first. The evicted
/// waiter queues again and still gets the lock; nobody overlaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiter_with_its_clock_behind_is_evicted_but_gets_the_lock() {
    second_goes_first(
        "clock:behind",
        Some("-2m"),
        None,
        "the waiter with the clock behind was not overtaken",
    )
    .await;
}

/// Pinned hazard: a queued waiter whose clock is an hour ahead dies. Its deadline is an hour
/// away for everyone else, so the live waiter behind it does not get the lock after the holder
/// dies (it would after the 1.5 s wait timeout with a true clock, T19). The operator's remedy:
/// remove the dead entry and wake the new head on its channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_fair_waiter_with_its_clock_ahead_blocks_the_queue_until_removed() {
    let Some(lib) = libfaketime() else {
        return;
    };
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let lock = "clock:dead-ahead";
    let spec = fair_spec(&server, lock, 1500);
    let mut holder = {
        let mut s = spec.clone();
        s.forever = true;
        Holder::spawn(&s, history_path(dir.path(), 0))
    };
    assert!(holder.wait_for("acquired", 1, BOUND).await);
    let mut dead = spawn_with_clock(&spec, history_path(dir.path(), 1), &lib, "+1h");
    assert!(
        eventually(BOUND, || async {
            fair_queue(&server, lock).await.len() == 1
        })
        .await
    );
    let live = Holder::spawn(&spec, history_path(dir.path(), 2));
    assert!(
        eventually(BOUND, || async {
            fair_queue(&server, lock).await.len() == 2
        })
        .await
    );
    let d = deadlines(&server, lock).await;
    // libfaketime works with the tokio holder: its deadline is an hour ahead of ours.
    assert!(d[0].1 > 3_500_000 && d[0].1 < 3_700_000, "{d:?}");
    dead.kill9();
    holder.kill9();

    // Three times what the lease (2 s) plus the wait timeout (1.5 s) would take: still stuck.
    let stuck = Duration::from_millis(3 * 3_500);
    assert!(
        !live.wait_for("acquired", 1, stuck).await,
        "the live waiter got the lock although the dead one's deadline is an hour away"
    );
    let q = fair_queue(&server, lock).await;
    assert_eq!(q.len(), 2, "{q:?}");

    // Remedy: remove the dead waiter and wake the new head.
    let mut c = server.conn().await;
    let _: i64 = c
        .lrem(format!("redisson_lock_queue:{{{lock}}}"), 0, &q[0])
        .await
        .unwrap();
    let _: i64 = c
        .zrem(format!("redisson_lock_timeout:{{{lock}}}"), &q[0])
        .await
        .unwrap();
    let _: i64 = c
        .publish(format!("redisson_lock__channel:{{{lock}}}:{}", q[1]), "0")
        .await
        .unwrap();
    assert!(
        live.wait_for("acquired", 1, BOUND).await,
        "the live waiter did not get the lock after the dead entry was removed"
    );
}

/// Polls a watchdog hold whose renewals never arrive until the server expires it: the guard
/// must say lost no later than the key is gone (the key is seen gone first, then the guard is asked). The server's clock
/// runs `fast` (0.005 = 0.5 %) fast: libfaketime cannot run the distribution's redis-server
/// (jemalloc's `clock_gettime` recursion aborts it), so the test plays the fast clock itself:
/// right after the acquire it sets the key's expiry to `lease × (1 − fast)` after the moment
/// the acquire was *sent* (earlier than any fast server would expire it). Returns how long
/// before the expiry the guard turned lost, in ms.
async fn guard_vs_fast_server_clock(fast: f64) -> i64 {
    let lease = Duration::from_secs(3);
    // Our client's renewals go through a proxy that is blackholed right after the acquire: the
    // hold then lives exactly one lease on the server's (fast) clock.
    let (server, proxy, client) = proxied(|c| c.with_watchdog_timeout(lease)).await;
    let mut raw = server.conn().await;
    let sent = Instant::now();
    let guard = client.get_lock("clock:rate").lock().await.unwrap();
    proxy.set(Mode::Blackhole);
    let early = lease.mul_f64(1.0 - fast).saturating_sub(sent.elapsed());
    let _: bool = raw
        .pexpire("clock:rate", early.as_millis() as i64)
        .await
        .unwrap();
    let mut lost_at = None;
    let deadline = Instant::now() + lease * 2;
    loop {
        assert!(Instant::now() < deadline, "the key never expired");
        let exists: bool = raw.exists("clock:rate").await.unwrap();
        let now = Instant::now();
        if guard.is_lost() && lost_at.is_none() {
            lost_at = Some(now);
        }
        if !exists {
            let lost_at = lost_at.unwrap_or_else(|| {
                panic!(
                    "server clock {fast} fast: the key expired {:?} after the acquire was sent, \
                     while the guard said held",
                    now.duration_since(sent)
                )
            });
            return now.duration_since(lost_at).as_millis() as i64;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// T28: a server clock 0.5 % fast (inside the 1 % drift allowance) expires a 3 s watchdog
/// lease about 15 ms early, with no renewal arriving; the guard has already said lost by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_clock_half_a_percent_fast_is_covered_by_the_drift_allowance() {
    let margin = guard_vs_fast_server_clock(0.005).await;
    eprintln!("guard lost {margin} ms before the key expired");
}

/// T27 without libfaketime: A holds a RedLock on nodes 0 and 1 (node 2 was busy for A, as if
/// partitioned from it). Node 0's clock jumps forward by the lease: its member expires at once
/// (played with `PEXPIRE 1`). B takes nodes 0 and 2 while A's validity lasts: both believe they
/// hold the lock. Outside the model (docs/reliability.md, clock jumps); pinned so the docs keep
/// saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_node_clock_jump_allows_a_second_majority() {
    use crate::multi_support::nodes;
    use redisson_lock::RedLock;
    let a_nodes = nodes(3).await;
    let name = "clock:redlock-jump";
    let lease = Duration::from_secs(20);
    a_nodes.hold_foreign(2, name, Duration::from_secs(60)).await;
    let a = RedLock::new(a_nodes.locks(name))
        .unwrap()
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap()
        .expect("A should get nodes 0 and 1");
    assert_eq!(a.held_nodes(), vec![0, 1]);
    // Node 2 becomes free for others (A never held it); node 0's clock jumps by the lease.
    a_nodes.delete(2, name).await;
    let mut c = a_nodes.servers[0].conn().await;
    let _: bool = c.pexpire(name, 1).await.unwrap();
    assert!(eventually(BOUND, || async { a_nodes.fields(0, name).await.is_empty() }).await);

    let mut b_clients = Vec::new();
    for s in &a_nodes.servers {
        b_clients.push(s.client().await);
    }
    let b = RedLock::new(b_clients.iter().map(|c| c.get_lock(name)))
        .unwrap()
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap()
        .expect("with node 0's member expired early, B finds a second majority");
    crate::multi_support::assert_double_grant(a, b).await;
}
