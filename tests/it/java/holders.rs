//! Java holder processes (`io.redissonlock.peer.Holder`: real Redisson, the twin of
//! `tests/holder`) beside Rust ones on the same locks, read by the same checker
//! (`tests/it/support/checker.rs`): the clock they share, mixed fleets of every kind both sides
//! have, and the holder faults of `fault_holders` with a Java holder as the victim.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use redis::AsyncCommands;
use redisson_lock::{Client, Config, Lock, LockKind, RedLock};

use super::{java_command, peer_versions, HOLDER_MAIN, PINNED};
use crate::support::checker::*;
use crate::support::numsub_on as numsub;
use crate::support::redisson::{channel, tagged};
use crate::support::*;

/// Generous bound for anything event-driven on a loaded 2-core machine (JVM start-up included).
const BOUND: Duration = Duration::from_secs(60);

fn java(v: &str) -> Lang {
    Lang::Java(v.to_owned())
}

fn spec(url: &str, lock: &str, lang: Lang, kind: &'static str) -> HolderSpec {
    let mut s = HolderSpec::new(url, lock);
    s.lang = lang;
    s.kind = kind;
    s
}

/// Java's `System.nanoTime()` is our CLOCK_MONOTONIC: each value a Java holder prints falls
/// between our readings just before asking and just after the answer (a round trip of about a
/// millisecond, where another clock would be off by far more), and a Java holder's history
/// times fall within its process's life on our clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_nano_time_is_our_monotonic_clock() {
    peer_versions();
    for v in PINNED {
        let mut probe = java_command(v, Some(HOLDER_MAIN))
            .args(["--clock-probe", "1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the Java clock probe");
        let mut to = probe.stdin.take().unwrap();
        let mut from = BufReader::new(probe.stdout.take().unwrap());
        let mut last = 0;
        for round in 0..20 {
            let t0 = mono_ns();
            to.write_all(b"\n").unwrap();
            to.flush().unwrap();
            let mut line = String::new();
            from.read_line(&mut line).unwrap();
            let t1 = mono_ns();
            let j: u64 = line
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{v}: not a time: {line:?}"));
            assert!(
                t0 <= j && j <= t1,
                "{v} round {round}: Java's nanoTime {j} outside our [{t0}, {t1}] \
                 (off by {} ms)",
                (j as i128 - t0 as i128) / 1_000_000
            );
            assert!(j > last, "{v}: nanoTime went back");
            last = j;
        }
        drop(to);
        assert!(probe.wait().unwrap().success(), "{v}: probe failed");
    }

    // The history itself: every time in it lies within the process's life.
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    for (i, v) in PINNED.iter().enumerate() {
        let lock = format!("jh:clock:{v}");
        let mut s = spec(&server.url(), &lock, java(v), "fenced");
        s.iterations = 2;
        let t0 = mono_ns();
        let mut h = Holder::spawn(&s, history_path(dir.path(), i));
        assert!(h.wait(BOUND).await, "{v}: holder failed");
        let t1 = mono_ns();
        let report = check_holders(&server, &lock, [&h], &HashMap::new()).await;
        assert_eq!(report.holds.len(), 2, "{v}: {report:?}");
        for hold in &report.holds {
            let end = hold.end.unwrap();
            assert!(
                t0 <= hold.start && hold.start <= end && end <= t1,
                "{v}: hold {hold:?} outside the process's life [{t0}, {t1}]"
            );
        }
    }
}

/// The holder process runs the program of its language (a Java holder is a JVM on that
/// version's jar, not a Rust holder by mistake). Waits for the exec: `spawn` may return
/// before it.
async fn assert_program(h: &Holder, lang: &Lang) {
    let cmdline = || {
        let raw = std::fs::read(format!("/proc/{}/cmdline", h.pid())).unwrap_or_default();
        String::from_utf8_lossy(&raw).replace('\0', " ")
    };
    // Until the exec, the child is a copy of this test binary.
    let me = std::env::current_exe().unwrap();
    let exe = || std::fs::read_link(format!("/proc/{}/exe", h.pid())).ok();
    assert!(
        eventually(BOUND, || async {
            exe().is_some_and(|e| e != me) && !cmdline().is_empty()
        })
        .await,
        "the holder process never ran its program"
    );
    let cmdline = cmdline();
    match lang {
        Lang::Java(v) => assert!(
            cmdline.contains(HOLDER_MAIN) && cmdline.contains(&format!("redisson-peer-{v}.jar")),
            "not the Java {v} holder: {cmdline}"
        ),
        Lang::Rust => assert!(!cmdline.contains("java"), "not the Rust holder: {cmdline}"),
    }
}

/// Holders of one fleet: (language, kind).
type Fleet = Vec<(Lang, &'static str)>;

/// Whether every holder of `lock` is parked behind the gate: subscribed to the lock's channel
/// (one subscription per process), or queued (fair lock).
async fn parked(server: &TestServer, lock: &str, kind: &str, n: usize) -> bool {
    match kind {
        "fair" => {
            let mut c = server.conn().await;
            let q: Vec<String> = c
                .lrange(format!("redisson_lock_queue:{}", tagged(lock)), 0, -1)
                .await
                .unwrap();
            q.len() == n
        }
        "rw" => numsub(server, &format!("redisson_rwlock:{}", tagged(lock))).await == n as i64,
        _ => numsub(server, &channel(lock)).await == n as i64,
    }
}

/// A lock the test holds (any kind) until [`open`](Gate::open).
struct Gate {
    open: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Gate {
    async fn hold<K: LockKind>(lock: Lock<K>) -> Gate {
        let guard = lock.lock().await.unwrap();
        let (open, opened) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = opened.await;
            guard.unlock().await.unwrap();
        });
        Gate { open, task }
    }

    async fn open(self) {
        self.open.send(()).unwrap();
        self.task.await.unwrap();
    }
}

/// A fault-free mixed fleet on one lock: the test holds the lock (the gate) until every holder
/// waits behind it, so both languages contend from the first hold; then each holder takes
/// `iterations` holds. The checker must find no overlap and an exact counter; every hold
/// accounted for. Returns the report and, in hold order, whether each hold was Java's.
async fn mixed_fleet(
    lock: &str,
    gate_kind: &str,
    fleet: Fleet,
    iterations: u64,
) -> (Report, Vec<bool>) {
    // Built (when it must be) before any holder starts: Java holders spawned first gave up
    // (0 holds each, their time out) while the Rust holder's binary compiled.
    holder_bin();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let client = server.client().await;
    let gate = match gate_kind {
        "fenced" => Gate::hold(client.get_fenced_lock(lock)).await,
        "fair" => Gate::hold(client.get_fair_lock(lock)).await,
        "rw" => Gate::hold(client.get_read_write_lock(lock).write_lock()).await,
        _ => Gate::hold(client.get_lock(lock)).await,
    };
    let mut holders = Vec::new();
    let mut java_pids = Vec::new();
    for (i, (lang, kind)) in fleet.iter().enumerate() {
        let mut s = spec(&server.url(), lock, lang.clone(), kind);
        s.iterations = iterations;
        s.gap_ms = 10;
        let h = Holder::spawn(&s, history_path(dir.path(), i));
        assert_program(&h, lang).await;
        if *lang != Lang::Rust {
            java_pids.push(h.pid());
        }
        holders.push(h);
    }
    if !eventually(BOUND, || parked(&server, lock, gate_kind, fleet.len())).await {
        let seen: Vec<_> = holders.iter().map(|h| (h.pid(), h.events())).collect();
        panic!("not every holder waited behind the gate: {seen:?}");
    }
    gate.open().await;
    for (h, (lang, kind)) in holders.iter_mut().zip(&fleet) {
        assert!(h.wait(BOUND).await, "{lang:?} {kind} holder failed");
    }
    let report = check_holders(&server, lock, &holders, &HashMap::new()).await;
    report.assert_safe(lock);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.lost_holds(), 0, "{report:?}");
    for h in &holders {
        let n = report.holds.iter().filter(|x| x.pid == h.pid()).count() as u64;
        assert_eq!(n, iterations, "holder {} took {n} holds", h.pid());
    }
    // Which holds were Java's, in hold order.
    let langs = report
        .holds
        .iter()
        .map(|h| java_pids.contains(&h.pid))
        .collect();
    (report, langs)
}

fn both_javas_and_rust(kind: &'static str) -> Fleet {
    vec![
        (java(PINNED[0]), kind),
        (java(PINNED[1]), kind),
        (Lang::Rust, kind),
        (Lang::Rust, kind),
    ]
}

/// Fenced: Java (both Redisson versions) and Rust holders on one fenced lock; every fenced
/// write accepted, tokens strictly increasing in hold order across both languages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_fenced_tokens_increase_in_hold_order() {
    peer_versions();
    let (report, _) = mixed_fleet(
        "jh:fleet:fenced",
        "fenced",
        both_javas_and_rust("fenced"),
        4,
    )
    .await;
    assert_eq!(report.fenced_rejected, 0, "{report:?}");
    assert_eq!(report.fenced_log.len(), 16, "{report:?}");
    assert!(report.holds.iter().all(|h| h.fenced == Some(true)));
    let tokens: Vec<i64> = report.holds.iter().map(|h| h.token).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_rlock_excludes() {
    peer_versions();
    mixed_fleet("jh:fleet:rlock", "rlock", both_javas_and_rust("rlock"), 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_fair_excludes() {
    peer_versions();
    let (_, langs) = mixed_fleet("jh:fleet:fair", "fair", both_javas_and_rust("fair"), 4).await;
    // First come, first served: every holder queues behind the others before its next hold,
    // so the languages alternate (all of one, then all of the other, would switch once).
    let switches = langs.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches >= 2, "the languages did not interleave: {langs:?}");
}

/// Read-write: writers and readers of both languages (each Java version on each side); no
/// write overlaps anything, and no read saw the counter change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_read_write_excludes_writers() {
    peer_versions();
    let fleet = vec![
        (java(PINNED[0]), "write"),
        (java(PINNED[1]), "read"),
        (Lang::Rust, "write"),
        (Lang::Rust, "read"),
        (java(PINNED[1]), "write"),
        (java(PINNED[0]), "read"),
    ];
    let (report, _) = mixed_fleet("jh:fleet:rw", "rw", fleet, 3).await;
    assert_eq!(report.holds.iter().filter(|h| h.read).count(), 9);
    assert_eq!(report.increments, 9);
}

/// RedLock over three servers: Redisson's RedLock and MultiLock (over the same member names,
/// one per server) and ours exclude each other (`fenced_multi.rs` shows it for single calls);
/// here as holder processes. No gate: the Java holders start first and the Rust ones join once
/// the Java ones are connected; every hold is long enough for them to meet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fleet_redlock_and_multilock_exclude() {
    peer_versions();
    let servers = servers(3);
    let urls: Vec<String> = servers.iter().map(TestServer::url).collect();
    let dir = tempfile::tempdir().unwrap();
    let lock = "jh:fleet:redlock";
    // The gate: our RedLock holds every member until the fleet waits.
    let mut clients = Vec::new();
    for u in &urls {
        clients.push(Client::with_config(Config::new(u.clone())).await.unwrap());
    }
    let red = RedLock::new(clients.iter().map(|c| c.get_lock(lock))).unwrap();
    let gate = red.lock().await.unwrap();
    let fleet: Fleet = vec![
        (java(PINNED[0]), "redlock"),
        (java(PINNED[1]), "multilock"),
        (Lang::Rust, "redlock"),
        (Lang::Rust, "redlock"),
    ];
    let mut holders = Vec::new();
    for (i, (lang, kind)) in fleet.iter().enumerate() {
        let mut s = spec(&urls[0], lock, lang.clone(), kind);
        s.urls = urls.clone();
        s.iterations = 3;
        s.hold_ms = 30;
        s.gap_ms = 10;
        holders.push(Holder::spawn(&s, history_path(dir.path(), i)));
    }
    for h in &holders {
        assert!(h.wait_for("started", 1, BOUND).await);
    }
    gate.unlock().await.unwrap();
    for (h, (lang, kind)) in holders.iter_mut().zip(&fleet) {
        assert!(h.wait(BOUND).await, "{lang:?} {kind} holder failed");
    }
    let report = check_holders(&servers[0], lock, &holders, &HashMap::new()).await;
    report.assert_safe("redlock fleet");
    assert_eq!(report.holds.len(), 12, "{report:?}");
    assert_eq!(report.lost_holds(), 0, "{report:?}");
}

/// A Java holder (watchdog lease 2 s) holds; Java and Rust holders wait. The hold outlives
/// its first lease (Redisson's watchdog renews it: nobody gets in), then the Java holder is
/// SIGKILLed; the waiters of both languages acquire only after it died, and nobody overlaps.
/// With `victim_lease_ms` set, the Java holder does not renew (a fixed lease): the waiters get
/// in while it still holds, and the checker must say so.
async fn killed_java_holder(lock: &str, victim_lease_ms: u64) -> (Report, u64, Vec<u32>) {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(&server.url(), lock, java(PINNED[1]), "fenced");
    s.forever = true;
    s.watchdog_ms = 2000;
    s.lease_ms = victim_lease_ms;
    let mut victim = Holder::spawn(&s, history_path(dir.path(), 0));
    assert!(victim.wait_for("acquired", 1, BOUND).await);
    let start = victim
        .events()
        .iter()
        .find(|e| e.kind == "acquired")
        .and_then(|e| e.num("start"))
        .unwrap();

    let mut waiters = Vec::new();
    for (i, lang) in [java(PINNED[0]), Lang::Rust].into_iter().enumerate() {
        let mut s = spec(&server.url(), lock, lang, "fenced");
        s.iterations = 2;
        waiters.push(Holder::spawn(&s, history_path(dir.path(), i + 1)));
    }
    let killed_at = if victim_lease_ms == 0 {
        // Both wait (or one already got in: the check below says what that means).
        let got_in = || {
            waiters
                .iter()
                .any(|w| w.events().iter().any(|e| e.kind == "acquired"))
        };
        assert!(
            eventually(BOUND, || async {
                got_in() || numsub(&server, &channel(lock)).await == 2
            })
            .await,
            "the waiters never waited"
        );
        // Past the first lease (2 s) and a renewal or two: still the victim's, nobody in.
        let past = start + 3_000_000_000;
        while mono_ns() < past {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut raw = server.conn().await;
        assert_eq!(
            fields(&mut raw, lock).await.len(),
            1,
            "the hold was not renewed"
        );
        for w in &waiters {
            assert!(
                w.events().iter().all(|e| e.kind != "acquired"),
                "a waiter got in while the Java holder lived: its watchdog did not renew"
            );
        }
        victim.kill9()
    } else {
        // Not renewing: the lease runs out under the living holder and the waiters finish.
        for w in &mut waiters {
            assert!(w.wait(BOUND).await, "waiter failed");
        }
        victim.kill9()
    };
    for w in &mut waiters {
        assert!(w.wait(BOUND).await, "waiter failed");
    }
    let mut open_ends = HashMap::new();
    open_ends.insert(victim.pid(), killed_at);
    let holders = std::iter::once(&victim).chain(&waiters);
    let report = check_holders(&server, lock, holders, &open_ends).await;
    assert_eq!(report.holds.len(), 5, "{report:?}");
    let waiter_pids = waiters.iter().map(Holder::pid).collect();
    (report, killed_at, waiter_pids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_java_holder_frees_the_lock_after_its_lease() {
    peer_versions();
    let (report, killed_at, waiters) = killed_java_holder("jh:kill9", 0).await;
    report.assert_safe("kill -9 of a Java holder");
    assert!(report
        .holds
        .iter()
        .filter(|h| waiters.contains(&h.pid))
        .all(|h| h.start > killed_at));
    let tokens: Vec<i64> = report.holds.iter().map(|h| h.token).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

/// The break check of the test above, kept as a test: a Java holder that does not renew (a
/// fixed 1 s lease instead of the watchdog) is overtaken while it still holds, and the checker
/// reports every waiter's hold as an overlap that no lost hold explains: the campaign's red.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_holder_not_renewing_is_caught_by_the_checker() {
    peer_versions();
    let (report, killed_at, waiters) = killed_java_holder("jh:norenew", 1000).await;
    assert!(report
        .holds
        .iter()
        .filter(|h| waiters.contains(&h.pid))
        .all(|h| h.start < killed_at));
    assert_eq!(report.unexplained_overlaps().len(), 4, "{report:?}");
    // Fencing still holds: the victim never wrote (it held "forever").
    assert!(report.fencing_errors.is_empty(), "{report:?}");
}

/// Kleppmann's pause with a Java victim: a Java fenced holder is SIGSTOPped between its read
/// and its write, past its 1.5 s watchdog lease; a `fresh` holder takes the lock, writes and
/// leaves; the Java holder resumes. The checker reports the overlap, explained by the Java
/// holder's `lost=1` (`isHeldByCurrentThread()` false before its release) and its
/// `unlock=lost`; the counter lost an update; the fenced resource rejected the stale write.
async fn paused_java_holder(server: &TestServer, stale_version: &str, fresh: Lang) {
    let lock = format!("jh:sigstop:{stale_version}");
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(&server.url(), &lock, java(stale_version), "fenced");
    s.iterations = 1;
    s.watchdog_ms = 1500;
    s.rmw_ms = 1000;
    let mut stale = Holder::spawn(&s, history_path(dir.path(), 0));
    assert!(stale.wait_for("read", 1, BOUND).await);
    stale.pause();

    let mut s = spec(&server.url(), &lock, fresh.clone(), "fenced");
    s.iterations = 1;
    let mut fresh_h = Holder::spawn(&s, history_path(dir.path(), 1));
    assert!(
        fresh_h.wait(BOUND).await,
        "the {fresh:?} holder never got in"
    );
    stale.resume();
    assert!(stale.wait(BOUND).await, "the stale Java holder failed");

    let report = check_holders(server, &lock, [&stale, &fresh_h], &HashMap::new()).await;
    let ctx = format!("Java {stale_version} paused, {fresh:?} fresh: {report:?}");
    assert_eq!(report.holds.len(), 2, "{ctx}");
    assert_eq!(report.overlaps.len(), 1, "{ctx}");
    let stale_hold = report.holds.iter().find(|h| h.pid == stale.pid()).unwrap();
    let fresh_hold = report
        .holds
        .iter()
        .find(|h| h.pid == fresh_h.pid())
        .unwrap();
    assert!(stale_hold.token < fresh_hold.token, "{ctx}");
    assert!(
        stale_hold.guard_lost,
        "the Java holder wrote no lost=1: {ctx}"
    );
    let released = stale.events().into_iter().find(|e| e.kind == "released");
    assert_eq!(
        released.as_ref().and_then(|e| e.get("unlock")),
        Some("lost"),
        "{ctx}"
    );
    assert!(!fresh_hold.lost, "{ctx}");
    assert!(report.unexplained_overlaps().is_empty(), "{ctx}");
    assert_eq!((report.increments, report.counter), (2, 1), "{ctx}");
    assert_eq!(stale_hold.fenced, Some(false), "{ctx}");
    assert_eq!(fresh_hold.fenced, Some(true), "{ctx}");
    assert_eq!(report.fenced_rejected, 1, "{ctx}");
    assert!(report.fencing_errors.is_empty(), "{ctx}");
    assert_eq!(
        report.fenced_log,
        vec![(fresh_hold.token, fresh_h.pid())],
        "{ctx}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_java_holder_past_its_lease_is_caught_and_fenced() {
    peer_versions();
    let server = TestServer::start();
    // Redisson 3.52 overtaken by a Rust holder, 4.7 by a Java 3.52 one, at the same time.
    tokio::join!(
        paused_java_holder(&server, PINNED[1], Lang::Rust),
        paused_java_holder(&server, PINNED[0], java(PINNED[1])),
    );
}

/// The fenced resource of both holders rejects a token equal to the highest it accepted (a
/// token handed out again after the token counter was lost, e.g. by a restart without
/// persistence): the store says it accepted token 5 from an earlier writer, and the lock's
/// token counter is back at 4, so the next holder gets 5 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_resource_rejects_a_token_handed_out_again() {
    peer_versions();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut raw = server.conn().await;
    let langs = [java(PINNED[0]), java(PINNED[1]), Lang::Rust];
    for (i, lang) in langs.into_iter().enumerate() {
        let lock = format!("jh:equal:{i}");
        let () = raw
            .set(format!("redisson_lock_token:{}", tagged(&lock)), 4)
            .await
            .unwrap();
        let () = raw.set(format!("{lock}:fenced:max"), 5).await.unwrap();
        let () = raw
            .rpush(format!("{lock}:fenced:log"), "5:1")
            .await
            .unwrap();
        let mut s = spec(&server.url(), &lock, lang.clone(), "fenced");
        s.iterations = 1;
        let mut h = Holder::spawn(&s, history_path(dir.path(), i));
        assert!(h.wait(BOUND).await, "{lang:?} holder failed");
        let report = check_holders(&server, &lock, [&h], &HashMap::new()).await;
        assert_eq!(report.holds.len(), 1, "{lang:?}: {report:?}");
        assert_eq!(report.holds[0].token, 5, "{lang:?}: {report:?}");
        assert_eq!(report.holds[0].fenced, Some(false), "{lang:?}: {report:?}");
        assert!(report.fencing_errors.is_empty(), "{lang:?}: {report:?}");
        assert_eq!(report.fenced_log, vec![(5, 1)], "{lang:?}: {report:?}");
    }
}

/// Java holders (Redisson 4.7.0 and 3.52.0, through Sentinel and through a Cluster) beside Rust
/// ones on one lock, through the failover rounds of `failovers.rs`: Redisson follows each
/// switch with its connections; a hold the new master lacks (wiped from the replica before the
/// switch, outside the model) is told by its unlock at the latest, nothing overlaps unexplained,
/// and with Redisson's own replica sync on (`checkLockSyncedSlaves`, its default) every hold
/// survives every switch. The group with failover awareness is Rust (Redisson has none): the
/// same switches, told at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_holders_through_sentinel_and_cluster_failovers() {
    use crate::failovers::{
        assert_round, cluster_round, plan, seed, sentinel_round, GroupSpec, CLUSTER_FAULTS,
        SENTINEL_FAULTS,
    };
    peer_versions();
    let seed = seed();
    let groups = [
        GroupSpec::new("jfo-aware", 2, true, false, "rust"),
        GroupSpec::new("jfo-blind", 2, false, false, "rust").with_langs(&["java-4.7.0", "rust"]),
        GroupSpec::new("jfo-synced", 2, false, true, "rust")
            .with_langs(&["java-3.52.0", "java-4.7.0"]),
    ];
    let out = sentinel_round(seed, &groups, &plan(seed, &SENTINEL_FAULTS)).await;
    assert_round("java sentinel", &out);
    let java_holds = |out: &crate::failovers::FailoverOutcome| -> usize {
        out.groups
            .iter()
            .flat_map(|g| g.report.holds.iter().map(move |h| (g, h)))
            .filter(|(g, h)| g.langs.get(&h.pid).is_some_and(|l| l.starts_with("java-")))
            .count()
    };
    assert!(
        java_holds(&out) >= 2,
        "the Java holders took holds through the switches"
    );
    let groups = [
        GroupSpec::new("{jfo}aware", 2, true, false, "rust"),
        GroupSpec::new("{jfo}blind", 2, false, false, "rust")
            .with_langs(&["java-3.52.0", "java-4.7.0"]),
    ];
    let out = cluster_round(seed, &groups, &plan(seed, &CLUSTER_FAULTS)[..2]).await;
    assert_round("java cluster", &out);
    assert!(
        java_holds(&out) >= 2,
        "the Java holders took holds through the switches"
    );
}
