//! The workloads W0-W3w of `shared/reference/peer-bench.md`, plus the watchdog and many-waiters
//! workloads of issue 7. Each returns figures (name -> value) for one run; the caller takes
//! medians over runs and prints the table.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use tokio::io::AsyncReadExt;

use crate::libs::{self, Kind, Lib};
use crate::server::{self, Delta, Target};
use crate::util::{
    cpu_ns, live_heap_bytes, now_ns, percentile, rss_bytes, sleep_until_ns, Result, Rng,
};

/// One run's figures and notes.
#[derive(Default, Debug)]
pub struct Run {
    pub f: BTreeMap<String, f64>,
    pub notes: BTreeMap<String, String>,
}

impl Run {
    pub fn set(&mut self, key: impl Into<String>, v: f64) {
        self.f.insert(key.into(), v);
    }
    pub fn get(&self, key: &str) -> Option<f64> {
        self.f.get(key).copied()
    }
    pub fn note(&mut self, key: impl Into<String>, v: impl Into<String>) {
        self.notes.insert(key.into(), v.into());
    }
}

/// Sizes of one run (quick or full).
#[derive(Clone, Debug)]
pub struct Plan {
    pub w0_p16: u64,
    pub w0_p1: u64,
    pub w0_c1: u64,
    pub w0_cold: usize,
    pub w1_cycles: usize,
    pub w2_secs: f64,
    pub w2_tasks: Vec<usize>,
    pub w3_secs: f64,
    pub w3w_secs: f64,
    pub wd_locks: usize,
    pub wd_window: Duration,
    pub mw_waiters: usize,
    pub mw_names: usize,
    pub rl_cycles: usize,
}

impl Plan {
    pub fn quick() -> Plan {
        Plan {
            w0_p16: 300_000,
            w0_p1: 100_000,
            w0_c1: 10_000,
            w0_cold: 20,
            w1_cycles: 2_000,
            w2_secs: 2.0,
            w2_tasks: vec![1, 16, 64, 256],
            w3_secs: 5.0,
            w3w_secs: 5.0,
            wd_locks: 10_000,
            wd_window: Duration::from_millis(3_500),
            mw_waiters: 10_000,
            mw_names: 100,
            rl_cycles: 500,
        }
    }
    pub fn full() -> Plan {
        Plan {
            w0_p16: 500_000,
            w0_p1: 200_000,
            w0_c1: 20_000,
            w0_cold: 40,
            w1_cycles: 5_000,
            w2_secs: 5.0,
            w3w_secs: 12.0,
            wd_window: Duration::from_millis(6_500),
            rl_cycles: 2_000,
            ..Plan::quick()
        }
    }
}

// ------------------------------------------------------------------------------------------
// W0: the server's own ceiling for our acquire script, and the round trip.

struct BenchRow {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
}

async fn redis_benchmark(t: &Target, args: &[String]) -> Result<BenchRow> {
    let out = tokio::process::Command::new("redis-benchmark")
        .args(["-h", &t.host, "-p", &t.port.to_string(), "--csv"])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .map_err(|_| "redis-benchmark took over 120 s")??;
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    let row = text
        .lines()
        .find(|l| !l.starts_with("\"test\"") && l.starts_with('"'))
        .ok_or_else(|| format!("redis-benchmark printed no CSV row: {text}"))?;
    let cols: Vec<f64> = row
        .split("\",\"")
        .skip(1)
        .map(|c| c.trim_matches('"').parse::<f64>().unwrap_or(f64::NAN))
        .collect();
    if cols.len() < 6 {
        return Err(format!("unexpected redis-benchmark row: {row}").into());
    }
    Ok(BenchRow {
        rps: cols[0],
        p50_ms: cols[3],
        p99_ms: cols[5],
    })
}

pub async fn w0(
    t: &Target,
    plan: &Plan,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
) -> Result<()> {
    let (sha, src) = libs::lock_script();
    let loaded: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(src)
        .query_async(admin)
        .await?;
    assert_eq!(loaded, sha, "lua/lock.lua hash");
    let cmd = |c: u64, p: u64, n: u64| -> Vec<String> {
        let mut v: Vec<String> = vec![
            "-c".into(),
            c.to_string(),
            "-P".into(),
            p.to_string(),
            "-n".into(),
            n.to_string(),
            "-r".into(),
            "100000".into(),
        ];
        v.extend(
            [
                "EVALSHA",
                &sha,
                "1",
                "w0:__rand_int__",
                "30000",
                "w0-owner:1",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        v
    };
    server::flushall(admin).await?;
    let s0 = server::snapshot(admin).await?;
    let p16 = redis_benchmark(t, &cmd(50, 16, plan.w0_p16)).await?;
    let s1 = server::snapshot(admin).await?;
    let d = Delta::between(&s0, &s1);
    let scripts = d.calls("evalsha").max(1) as f64;
    run.set("w0.p16_rps", p16.rps);
    run.set("w0.ceiling", p16.rps / 2.0);
    run.set("w0.server_us_per_script", d.cpu_s * 1e6 / scripts);
    run.set(
        "w0.evalsha_usec_per_call",
        d.usec.get("evalsha").copied().unwrap_or(0) as f64 / scripts,
    );
    server::flushall(admin).await?;
    let p1 = redis_benchmark(t, &cmd(50, 1, plan.w0_p1)).await?;
    run.set("w0.p1_rps", p1.rps);
    server::flushall(admin).await?;
    let c1 = redis_benchmark(t, &cmd(1, 1, plan.w0_c1)).await?;
    run.set("w0.c1_rps", c1.rps);
    run.set("w0.rtt_us", c1.p50_ms * 1000.0);
    run.set("w0.c1_p99_us", c1.p99_ms * 1000.0);
    server::flushall(admin).await?;

    // The same sequential round trip through redis-rs (the client every Rust library here uses).
    let mut conn = server::connect(t).await?;
    let script = redis::Script::new(src);
    let mut lat = Vec::with_capacity(plan.w0_c1 as usize);
    for i in 0..plan.w0_c1 + 200 {
        let t0 = now_ns();
        let _: redis::Value = script
            .key(format!("w0rs:{}", i % 1000))
            .arg(30_000)
            .arg("w0-owner:1")
            .invoke_async(&mut conn)
            .await?;
        if i >= 200 {
            lat.push(now_ns() - t0);
        }
    }
    lat.sort_unstable();
    run.set("w0.rs_rtt_us", percentile(&lat, 50.0) as f64 / 1000.0);
    // The same round trip after 100 ms idle, as a waiter or a releaser of W3w sees it: the
    // threads (and vCPUs) are asleep and must be woken on both sides.
    let mut cold = Vec::new();
    for _ in 0..plan.w0_cold {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t0 = now_ns();
        let _: redis::Value = script
            .key("w0rs:cold")
            .arg(30_000)
            .arg("w0-owner:1")
            .invoke_async(&mut conn)
            .await?;
        cold.push(now_ns() - t0);
    }
    cold.sort_unstable();
    run.set("w0.cold_rtt_us", percentile(&cold, 50.0) as f64 / 1000.0);
    server::flushall(admin).await?;
    Ok(())
}

// ------------------------------------------------------------------------------------------
// W1: single-task lock+unlock latency.

pub async fn w1(lib: Arc<Lib>, kind: Kind, cycles: usize, run: &mut Run) -> Result<()> {
    let lat = tokio::spawn(async move {
        let h = lib.handle(&format!("w1:{}", kind.key()));
        let mut lat = Vec::with_capacity(cycles);
        for i in 0..cycles + 50 {
            let t0 = now_ns();
            let held = h.lock().await?;
            h.unlock(held).await?;
            if i >= 50 {
                lat.push(now_ns() - t0);
            }
        }
        Ok::<_, crate::util::Error>(lat)
    })
    .await??;
    let mut lat = lat;
    lat.sort_unstable();
    let k = kind.key();
    let p50 = percentile(&lat, 50.0) as f64 / 1000.0;
    run.set(format!("w1.{k}.p50_us"), p50);
    run.set(
        format!("w1.{k}.p99_us"),
        percentile(&lat, 99.0) as f64 / 1000.0,
    );
    if let Some(rtt) = run.get("w0.rtt_us") {
        run.set(format!("w1.{k}.x2rtt"), p50 / (2.0 * rtt));
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// W2: uncontended throughput, N tasks on distinct names.

/// W2's tasks (W2 and WC): `tasks` tasks, each on its own name `<prefix>:<i>`, 5 warm-up
/// cycles each, then lock+unlock cycles for `secs` from the moment [`Cycles::go`] starts them.
pub struct Cycles {
    joins: Vec<tokio::task::JoinHandle<Result<()>>>,
    barrier: Arc<tokio::sync::Barrier>,
    total: Arc<AtomicU64>,
    start_at: Arc<AtomicU64>,
}

impl Cycles {
    pub fn spawn(lib: &Arc<Lib>, prefix: &str, tasks: usize, secs: f64) -> Cycles {
        let barrier = Arc::new(tokio::sync::Barrier::new(tasks + 1));
        let total = Arc::new(AtomicU64::new(0));
        let start_at = Arc::new(AtomicU64::new(0));
        let mut joins = Vec::with_capacity(tasks);
        for i in 0..tasks {
            let (lib, barrier, total, start_at) = (
                lib.clone(),
                barrier.clone(),
                total.clone(),
                start_at.clone(),
            );
            let name = format!("{prefix}:{i}");
            joins.push(tokio::spawn(async move {
                let h = lib.handle(&name);
                for _ in 0..5 {
                    let held = h.lock().await?;
                    h.unlock(held).await?;
                }
                barrier.wait().await;
                let deadline = start_at.load(Ordering::Acquire) + (secs * 1e9) as u64;
                let mut n = 0u64;
                while now_ns() < deadline {
                    let held = h.lock().await?;
                    h.unlock(held).await?;
                    n += 1;
                }
                total.fetch_add(n, Ordering::Relaxed);
                Ok::<_, crate::util::Error>(())
            }));
        }
        Cycles {
            joins,
            barrier,
            total,
            start_at,
        }
    }

    /// Starts the window now and waits for every task: (the start in ns, the cycles done, the
    /// first task's error if any).
    pub async fn go(self) -> (u64, f64, Option<crate::util::Error>) {
        let t0 = now_ns();
        self.start_at.store(t0, Ordering::Release);
        self.barrier.wait().await;
        let mut err = None;
        for j in self.joins {
            if let Err(e) = j.await.map_err(crate::util::Error::from).and_then(|r| r) {
                err.get_or_insert(e);
            }
        }
        (t0, self.total.load(Ordering::Relaxed) as f64, err)
    }
}

pub async fn w2(
    lib: Arc<Lib>,
    kind: Kind,
    tasks: usize,
    secs: f64,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
) -> Result<()> {
    let cy = Cycles::spawn(&lib, &format!("w2:{}:{tasks}", kind.key()), tasks, secs);
    let s0 = server::snapshot(admin).await?;
    let c0 = cpu_ns();
    let a0 = crate::util::allocations();
    let (t0, cycles, err) = cy.go().await;
    let wall = (now_ns() - t0) as f64 / 1e9;
    let c1 = cpu_ns();
    let a1 = crate::util::allocations();
    let s1 = server::snapshot(admin).await?;
    if let Some(e) = err {
        return Err(e);
    }
    let k = kind.key();
    let cps = cycles / wall;
    run.set(format!("w2.{k}.{tasks}.allocs"), (a1 - a0) as f64 / cycles);
    run.set(format!("w2.{k}.{tasks}.cps"), cps);
    if let Some(ceiling) = run.get("w0.ceiling") {
        run.set(format!("w2.{k}.{tasks}.xceil"), cps / ceiling);
    }
    let d = Delta::between(&s0, &s1);
    run.set(format!("w2.{k}.{tasks}.server_us"), d.cpu_s * 1e6 / cycles);
    run.set(format!("w2.{k}.{tasks}.server_util"), d.cpu_s / wall);
    run.set(
        format!("w2.{k}.{tasks}.client_us"),
        (c1 - c0) as f64 / 1e3 / cycles,
    );
    run.set(
        format!("w2.{k}.{tasks}.cmds"),
        d.total.saturating_sub(2) as f64 / cycles,
    );
    run.set(
        format!("w2.{k}.{tasks}.script_usec"),
        d.usec.get("evalsha").copied().unwrap_or(0) as f64 / cycles,
    );
    run.note(format!("w2.{k}.{tasks}.per_cycle"), d.per(cycles));
    Ok(())
}

// ------------------------------------------------------------------------------------------
// W3 and W3w: two processes. The parent spawns this binary twice with `--child`.

/// One hold, as a child reports it (CLOCK_MONOTONIC ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hold {
    pub proc: u32,
    pub task: u32,
    pub name: u32,
    pub req: u64,
    pub acq: u64,
    pub rel_s: u64,
    pub rel_e: u64,
}

/// Arguments of a child process.
#[derive(Clone, Debug)]
pub struct ChildArgs {
    pub wake: bool,
    pub kind: Kind,
    pub url: String,
    pub start_ns: u64,
    pub secs: f64,
    pub proc: u32,
    pub tasks: u32,
    /// Run the child on tokio's current-thread runtime instead of the multi-thread one.
    pub current_thread: bool,
    /// Which lock W3 takes (W3f, W3rw: see contend.rs).
    pub lock: crate::libs::LockKind,
}

/// Child side: run the tasks, print `H proc task name req acq rel_s rel_e` per hold.
pub async fn child(a: ChildArgs) -> Result<()> {
    let lib = Arc::new(Lib::connect(a.kind, &a.url, 10).await?);
    // W3w: a plain redis-rs subscriber on the unlock channels times when each release message
    // reaches this process, splitting the wake gap into delivery and wake-up + acquire.
    let probe = if a.wake && a.kind == Kind::Ours {
        Some(
            probe(
                &a.url,
                a.kind,
                a.tasks,
                a.start_ns + (a.secs * 1e9) as u64 + 2_000_000_000,
            )
            .await?,
        )
    } else {
        None
    };
    println!("READY {}", now_ns());
    sleep_until_ns(a.start_ns).await;
    let deadline = a.start_ns + (a.secs * 1e9) as u64;
    let counter = Arc::new(AtomicU64::new(0));
    let mut joins = Vec::new();
    for task in 0..a.tasks {
        let (lib, counter, a) = (lib.clone(), counter.clone(), a.clone());
        joins.push(tokio::spawn(async move {
            let (name_idx, name) = if a.wake {
                (task, format!("w3w:{}:{task}", a.kind.key()))
            } else {
                (0, format!("{}:{}", a.lock.key(), a.kind.key()))
            };
            let h = crate::libs::w3_handle(&lib, a.lock, &name)?;
            let mut rng = Rng::new((u64::from(a.proc) << 32 | u64::from(task)) ^ a.start_ns);
            let mut holds = Vec::new();
            while now_ns() < deadline {
                let req = now_ns();
                let held = h.lock().await?;
                let acq = now_ns();
                counter.fetch_add(1, Ordering::Relaxed);
                if a.wake {
                    tokio::time::sleep(
                        rng.between(Duration::from_millis(450), Duration::from_millis(650)),
                    )
                    .await;
                }
                let rel_s = now_ns();
                h.unlock(held).await?;
                let rel_e = now_ns();
                holds.push(Hold {
                    proc: a.proc,
                    task,
                    name: name_idx,
                    req,
                    acq,
                    rel_s,
                    rel_e,
                });
                if a.wake {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                }
            }
            Ok::<_, crate::util::Error>(holds)
        }));
    }
    let mut out = String::new();
    for j in joins {
        for h in j.await?? {
            out.push_str(&format!(
                "H {} {} {} {} {} {} {}\n",
                h.proc, h.task, h.name, h.req, h.acq, h.rel_s, h.rel_e
            ));
        }
    }
    if let Some(p) = probe {
        for (name, at) in p.await? {
            out.push_str(&format!("M {} {name} {at}\n", a.proc));
        }
    }
    print!("{out}");
    Ok(())
}

/// Subscribes to the W3w unlock channels; returns (name index, arrival ns) per message.
async fn probe(
    url: &str,
    kind: Kind,
    names: u32,
    until_ns: u64,
) -> Result<tokio::task::JoinHandle<Vec<(u32, u64)>>> {
    use futures_util::StreamExt;
    let mut ps = redis::Client::open(url)?.get_async_pubsub().await?;
    let channels: Vec<String> = (0..names)
        .map(|i| format!("redisson_lock__channel:{{w3w:{}:{i}}}", kind.key()))
        .collect();
    for c in &channels {
        ps.subscribe(c).await?;
    }
    Ok(tokio::spawn(async move {
        let mut seen = Vec::new();
        let mut stream = ps.on_message();
        loop {
            let left = until_ns.saturating_sub(now_ns());
            if left == 0 {
                break;
            }
            match tokio::time::timeout(Duration::from_nanos(left), stream.next()).await {
                Ok(Some(msg)) => {
                    let at = now_ns();
                    if let Some(i) = channels.iter().position(|c| c == msg.get_channel_name()) {
                        seen.push((i as u32, at));
                    }
                }
                _ => break,
            }
        }
        seen
    }))
}

/// Parent side: start both children with a common start time, collect their holds.
/// A release message seen by a child's probe subscriber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub proc: u32,
    pub name: u32,
    pub at: u64,
}

pub(crate) struct TwoProcs {
    pub(crate) holds: Vec<Hold>,
    msgs: Vec<Msg>,
    pub(crate) start_ns: u64,
    pub(crate) late: u64,
}

pub(crate) async fn two_processes(
    t: &Target,
    kind: Kind,
    wake: bool,
    secs: f64,
    current_thread: bool,
    lock: crate::libs::LockKind,
) -> Result<TwoProcs> {
    let exe = std::env::current_exe()?;
    let start_ns = now_ns() + 2_500_000_000;
    let mut children = Vec::new();
    for proc in 0..2u32 {
        let mut c = tokio::process::Command::new(&exe);
        c.args(["--child", if wake { "w3w" } else { "w3" }])
            .args(["--lib", kind.key(), "--url", &t.url])
            .args([
                "--start-ns",
                &start_ns.to_string(),
                "--secs",
                &secs.to_string(),
            ])
            .args(["--proc", &proc.to_string(), "--tasks", "4"])
            .args(["--lock", lock.arg()])
            .args(if current_thread {
                &["--rt", "current"][..]
            } else {
                &[][..]
            })
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        children.push(c.spawn()?);
    }
    let limit = Duration::from_secs_f64(secs + 60.0);
    let mut holds = Vec::new();
    let mut msgs = Vec::new();
    let mut late = 0u64;
    for mut c in children {
        let mut stdout = c.stdout.take().ok_or("no child stdout")?;
        let mut stderr = c.stderr.take().ok_or("no child stderr")?;
        let (mut out, mut err) = (String::new(), String::new());
        let done = async {
            stdout.read_to_string(&mut out).await?;
            stderr.read_to_string(&mut err).await?;
            c.wait().await
        };
        let status = tokio::time::timeout(limit, done)
            .await
            .map_err(|_| format!("{} child did not finish within {limit:?}", kind.key()))??;
        if !status.success() {
            return Err(format!("{} child failed ({status}): {}", kind.key(), err.trim()).into());
        }
        for line in out.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.first() {
                Some(&"READY") => {
                    let ready: u64 = f[1].parse()?;
                    late = late.max(ready.saturating_sub(start_ns));
                }
                Some(&"H") if f.len() == 8 => {
                    let n = |i: usize| f[i].parse::<u64>();
                    holds.push(Hold {
                        proc: n(1)? as u32,
                        task: n(2)? as u32,
                        name: n(3)? as u32,
                        req: n(4)?,
                        acq: n(5)?,
                        rel_s: n(6)?,
                        rel_e: n(7)?,
                    });
                }
                Some(&"M") if f.len() == 4 => {
                    msgs.push(Msg {
                        proc: f[1].parse()?,
                        name: f[2].parse()?,
                        at: f[3].parse()?,
                    });
                }
                _ => {}
            }
        }
    }
    if let Ok(dir) = std::env::var("LOCKS_DUMP") {
        let mut text = String::new();
        for h in &holds {
            text.push_str(&format!(
                "H {} {} {} {} {} {} {}\n",
                h.proc, h.task, h.name, h.req, h.acq, h.rel_s, h.rel_e
            ));
        }
        for m in &msgs {
            text.push_str(&format!("M {} {} {}\n", m.proc, m.name, m.at));
        }
        let file = format!(
            "{dir}/{}-{}-{start_ns}.txt",
            if wake { "w3w" } else { lock.key() },
            kind.key()
        );
        std::fs::write(file, text)?;
    }
    Ok(TwoProcs {
        holds,
        msgs,
        start_ns,
        late,
    })
}

/// W3 figures from the merged holds of one name.
#[derive(Debug, PartialEq)]
pub struct W3Stats {
    pub in_window: usize,
    pub gaps: Vec<u64>,
    pub self_reacquire: usize,
    pub handoffs: usize,
    pub max_wait: u64,
    pub waits: Vec<u64>,
    pub overlaps: usize,
    pub holders: usize,
}

pub fn analyze_w3(mut holds: Vec<Hold>, start: u64, end: u64) -> W3Stats {
    holds.sort_by_key(|h| h.acq);
    let overlaps = count_overlaps(&holds);
    let mut waits: Vec<u64> = holds.iter().map(|h| h.acq - h.req).collect();
    waits.sort_unstable();
    let max_wait = waits.last().copied().unwrap_or(0);
    let win: Vec<&Hold> = holds
        .iter()
        .filter(|h| h.acq >= start && h.acq < end)
        .collect();
    let mut gaps = Vec::new();
    let mut self_reacquire = 0;
    for w in win.windows(2) {
        gaps.push(w[1].acq.saturating_sub(w[0].rel_s));
        if (w[0].proc, w[0].task) == (w[1].proc, w[1].task) {
            self_reacquire += 1;
        }
    }
    gaps.sort_unstable();
    let mut holders: Vec<(u32, u32)> = win.iter().map(|h| (h.proc, h.task)).collect();
    holders.sort_unstable();
    holders.dedup();
    W3Stats {
        in_window: win.len(),
        handoffs: win.len().saturating_sub(1),
        gaps,
        self_reacquire,
        max_wait,
        waits,
        overlaps,
        holders: holders.len(),
    }
}

/// Holds (sorted by acquire) whose acquire came before an earlier hold's release started.
fn count_overlaps(sorted: &[Hold]) -> usize {
    let mut latest_release = 0u64;
    let mut overlaps = 0;
    for h in sorted {
        if h.acq < latest_release {
            overlaps += 1;
        }
        latest_release = latest_release.max(h.rel_s);
    }
    overlaps
}

/// W3w: per name, the gap from a release start to the acquire of a waiter of the other process
/// that was already waiting when the release started (the wake-up latency). Also overlaps.
pub fn analyze_w3w(holds: &[Hold], msgs: &[Msg]) -> W3wStats {
    let mut gaps = Vec::new();
    let mut delivery = Vec::new();
    let mut wake = Vec::new();
    let mut overlaps = 0;
    let mut names: Vec<u32> = holds.iter().map(|h| h.name).collect();
    names.sort_unstable();
    names.dedup();
    for n in names {
        let mut hs: Vec<Hold> = holds.iter().filter(|h| h.name == n).copied().collect();
        hs.sort_by_key(|h| h.acq);
        overlaps += count_overlaps(&hs);
        for w in hs.windows(2) {
            let (prev, next) = (w[0], w[1]);
            if next.proc != prev.proc && next.req < prev.rel_s {
                gaps.push(next.acq.saturating_sub(prev.rel_s));
                // The first message on this name in the waiter's process after the release began.
                let m = msgs
                    .iter()
                    .filter(|m| m.proc == next.proc && m.name == n && m.at >= prev.rel_s)
                    .map(|m| m.at)
                    .min();
                if let Some(m) = m.filter(|&m| m <= next.acq) {
                    delivery.push(m - prev.rel_s);
                    wake.push(next.acq - m);
                }
            }
        }
    }
    gaps.sort_unstable();
    delivery.sort_unstable();
    wake.sort_unstable();
    let mut unlock: Vec<u64> = holds.iter().map(|h| h.rel_e - h.rel_s).collect();
    unlock.sort_unstable();
    W3wStats {
        gaps,
        delivery,
        wake,
        unlock,
        overlaps,
    }
}

/// W3w figures: wake gaps and, where a probe saw the release message, their two halves.
#[derive(Debug, PartialEq)]
pub struct W3wStats {
    pub gaps: Vec<u64>,
    /// Release start -> message reaches the waiter's process.
    pub delivery: Vec<u64>,
    /// Message reached the process -> the waiter holds the lock.
    pub wake: Vec<u64>,
    /// Duration of the releaser's unlock call.
    pub unlock: Vec<u64>,
    pub overlaps: usize,
}

pub async fn w3(t: &Target, kind: Kind, secs: f64, run: &mut Run) -> Result<()> {
    w3_as(t, kind, crate::libs::LockKind::Plain, secs, run).await
}

/// `current_thread`: children on tokio's current-thread runtime; figures go under `<kind>-ct`.
pub async fn w3w(
    t: &Target,
    kind: Kind,
    secs: f64,
    current_thread: bool,
    run: &mut Run,
) -> Result<()> {
    let p = two_processes(
        t,
        kind,
        true,
        secs,
        current_thread,
        crate::libs::LockKind::Plain,
    )
    .await?;
    let late = p.late;
    let st = analyze_w3w(&p.holds, &p.msgs);
    let (gaps, overlaps) = (&st.gaps, st.overlaps);
    if gaps.is_empty() {
        return Err(format!("{}: no wake-up gaps recorded", kind.key()).into());
    }
    let k = if current_thread {
        format!("{}-ct", kind.key())
    } else {
        kind.key().to_owned()
    };
    let p50 = percentile(gaps, 50.0) as f64 / 1e6;
    run.set(format!("w3w.{k}.p50_ms"), p50);
    run.set(
        format!("w3w.{k}.p90_ms"),
        percentile(gaps, 90.0) as f64 / 1e6,
    );
    run.set(
        format!("w3w.{k}.max_ms"),
        percentile(gaps, 100.0) as f64 / 1e6,
    );
    run.set(
        format!("w3w.{k}.unlock_p50_us"),
        percentile(&st.unlock, 50.0) as f64 / 1e3,
    );
    if !st.delivery.is_empty() {
        run.set(
            format!("w3w.{k}.delivery_p50_us"),
            percentile(&st.delivery, 50.0) as f64 / 1e3,
        );
        run.set(
            format!("w3w.{k}.wake_p50_us"),
            percentile(&st.wake, 50.0) as f64 / 1e3,
        );
        run.set(format!("w3w.{k}.probed"), st.delivery.len() as f64);
    }
    run.set(format!("w3w.{k}.n"), gaps.len() as f64);
    run.set(format!("w3w.{k}.overlaps"), overlaps as f64);
    run.set(format!("w3w.{k}.late_ms"), late as f64 / 1e6);
    if let Some(rtt) = run.get("w0.rtt_us") {
        run.set(format!("w3w.{k}.xrtt"), p50 * 1e3 / rtt);
    }
    if let Some(cold) = run.get("w0.cold_rtt_us") {
        run.set(format!("w3w.{k}.xcold"), p50 * 1e3 / cold);
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Watchdog cost: many locks held under the watchdog.

pub async fn watchdog(
    t: &Target,
    plan: &Plan,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
) -> Result<()> {
    use redisson_lock::{Client, Config};
    let lease = Duration::from_secs(3);
    let client =
        Client::with_config(Config::new(t.url.as_str()).with_watchdog_timeout(lease)).await?;
    let locks: Vec<_> = (0..plan.wd_locks)
        .map(|i| client.get_lock(format!("wd:{i}")))
        .collect();
    let t0 = Instant::now();
    let mut guards = Vec::with_capacity(locks.len());
    for chunk in locks.chunks(500) {
        for g in join_all(chunk.iter().map(|l| l.lock())).await {
            guards.push(g?);
        }
    }
    run.set("wd.acquire_s", t0.elapsed().as_secs_f64());
    // One renewal pass first: the first pass after a script-cache flush pays NOSCRIPT + SCRIPT
    // LOAD per batch, which is not the steady state being measured.
    client.renew_now().await;
    let s0 = server::snapshot(admin).await?;
    let c0 = cpu_ns();
    tokio::time::sleep(plan.wd_window).await;
    let c1 = cpu_ns();
    let s1 = server::snapshot(admin).await?;
    let d = Delta::between(&s0, &s1);
    let n = guards.len() as f64;
    // Every renewal checks each lock with one HEXISTS: that counts the ticks.
    let ticks = (d.calls("hexists") as f64 / n).round();
    if ticks < 1.0 {
        return Err("watchdog: no renewal tick in the window".into());
    }
    let watched = client.stats().watched_holds;
    let ttl: i64 = redis::cmd("PTTL").arg("wd:0").query_async(admin).await?;
    run.set("wd.locks", n);
    run.set("wd.watched", watched as f64);
    run.set("wd.ticks", ticks);
    run.set("wd.tick_s", lease.as_secs_f64() / 3.0);
    run.set(
        "wd.scripts_per_lock_tick",
        d.calls("evalsha") as f64 / (n * ticks),
    );
    run.set("wd.cmds_per_lock_tick", d.all_calls() as f64 / (n * ticks));
    run.set(
        "wd.toplevel_per_lock_tick",
        d.total.saturating_sub(1) as f64 / (n * ticks),
    );
    run.set("wd.client_cpu_ms_per_tick", (c1 - c0) as f64 / 1e6 / ticks);
    run.set("wd.server_cpu_ms_per_tick", d.cpu_s * 1e3 / ticks);
    run.set("wd.pttl_after_ms", ttl as f64);
    run.note("wd.per_lock_tick", d.per(n * ticks));
    let mut guards = guards;
    while !guards.is_empty() {
        let rest = guards.split_off(guards.len().saturating_sub(500));
        for r in join_all(rest.into_iter().map(|g| g.unlock())).await {
            r?;
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Many waiters: waiters over a few names, all parked at once, then released.

pub async fn many_waiters(
    t: &Target,
    plan: &Plan,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
) -> Result<()> {
    use redisson_lock::Client;
    let client = Client::connect(&t.url).await?;
    let names: Arc<Vec<String>> = Arc::new((0..plan.mw_names).map(|j| format!("mw:{j}")).collect());
    // Holders: one task takes every name, then releases all on a signal.
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let (client, names) = (client.clone(), names.clone());
        tokio::spawn(async move {
            let locks: Vec<_> = names.iter().map(|n| client.get_lock(n.as_str())).collect();
            let mut guards = Vec::new();
            for g in join_all(locks.iter().map(|l| l.lock())).await {
                guards.push(g?);
            }
            let _ = ready_tx.send(());
            let _ = go_rx.await;
            for r in join_all(guards.into_iter().map(|g| g.unlock())).await {
                r?;
            }
            Ok::<_, crate::util::Error>(())
        })
    };
    ready_rx.await.map_err(|_| "holders failed")?;
    let rss0 = rss_bytes();
    let heap0 = live_heap_bytes();
    let base = server::snapshot(admin).await?;
    let mut joins = Vec::with_capacity(plan.mw_waiters);
    for i in 0..plan.mw_waiters {
        let (client, names) = (client.clone(), names.clone());
        joins.push(tokio::spawn(async move {
            let lock = client.get_lock(names[i % names.len()].as_str());
            let g = lock.lock().await?;
            let at = now_ns();
            g.unlock().await?;
            Ok::<_, crate::util::Error>(at)
        }));
    }
    // Parked = every waiter ran its attempts and the script count stopped moving.
    let t_park = Instant::now();
    let mut last = 0;
    let mut stable = 0;
    while t_park.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let s = server::snapshot(admin).await?;
        let n = Delta::between(&base, &s).calls("evalsha");
        if n >= plan.mw_waiters as u64 && n == last {
            stable += 1;
            if stable >= 3 {
                break;
            }
        } else {
            stable = 0;
        }
        last = n;
    }
    let park_s = t_park.elapsed().as_secs_f64();
    let rss1 = rss_bytes();
    let heap1 = live_heap_bytes();
    let stats = client.stats();
    let sub_conns = server::subscriber_connections(admin).await?;
    let s0 = server::snapshot(admin).await?;
    let c0 = cpu_ns();
    let released = now_ns();
    let _ = go_tx.send(());
    let mut last_acq = 0u64;
    let all = tokio::time::timeout(Duration::from_secs(120), join_all(joins))
        .await
        .map_err(|_| "many waiters: not all acquired within 120 s")?;
    for r in all {
        last_acq = last_acq.max(r??);
    }
    let all_ms = last_acq.saturating_sub(released) as f64 / 1e6;
    let c1 = cpu_ns();
    let s1 = server::snapshot(admin).await?;
    holder.await??;
    let d = Delta::between(&s0, &s1);
    let w = plan.mw_waiters as f64;
    run.set("mw.waiters", w);
    run.set("mw.names", plan.mw_names as f64);
    run.set("mw.park_s", park_s);
    run.set("mw.sub_conns", sub_conns as f64);
    run.set("mw.client_sub_conns", stats.subscriber_connections as f64);
    run.set("mw.channels", stats.subscribed_channels as f64);
    run.set("mw.rss_per_waiter", rss1.saturating_sub(rss0) as f64 / w);
    // What the parked waiters hold (their tasks, futures, and the client's per-waiter state),
    // including the bench's own `JoinHandle` per waiter (a pointer) and its task wrapper.
    run.set("mw.heap_per_waiter", heap1.saturating_sub(heap0) as f64 / w);
    run.set("mw.rss_mb", rss1 as f64 / 1048576.0);
    run.set("mw.all_ms", all_ms);
    run.set("mw.rate", w / (all_ms / 1e3));
    run.set("mw.scripts_per_acq", d.calls("evalsha") as f64 / w);
    run.set("mw.client_cpu_us_per_acq", (c1 - c0) as f64 / 1e3 / w);
    run.note("mw.per_acq", d.per(w));
    Ok(())
}

// ------------------------------------------------------------------------------------------
// RedLock over 3 and 5 local servers: our RedLock (members tried at once) against taking the
// same member RLocks one after another (Redisson's order), lock+unlock, one task.

pub async fn redlock(plan: &Plan, run: &mut Run) -> Result<()> {
    use redisson_lock::{Client, RedLock};
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..5 {
        let (s, t) = server::start()?;
        clients.push(Client::connect(&t.url).await?);
        servers.push(s);
    }
    let cycles = plan.rl_cycles;
    let lease = Duration::from_secs(10);
    for n in [3usize, 5] {
        let locks: Vec<_> = clients[..n]
            .iter()
            .map(|c| c.get_lock("rl:bench"))
            .collect();
        let (conc, seq) = tokio::spawn(async move {
            let red = RedLock::new(locks.clone())?;
            let mut conc = Vec::with_capacity(cycles);
            for i in 0..cycles + 50 {
                let t0 = now_ns();
                red.lock_with_lease(lease).await?.unlock().await?;
                if i >= 50 {
                    conc.push(now_ns() - t0);
                }
            }
            let mut seq = Vec::with_capacity(cycles);
            for i in 0..cycles + 50 {
                let t0 = now_ns();
                let mut guards = Vec::with_capacity(n);
                for l in &locks {
                    guards.push(l.lock_with_lease(lease).await?);
                }
                for g in guards {
                    g.unlock().await?;
                }
                if i >= 50 {
                    seq.push(now_ns() - t0);
                }
            }
            Ok::<_, crate::util::Error>((conc, seq))
        })
        .await??;
        for (label, mut lat) in [("conc", conc), ("seq", seq)] {
            lat.sort_unstable();
            let p50 = percentile(&lat, 50.0) as f64 / 1e3;
            run.set(format!("rl.{n}.{label}.p50_us"), p50);
            run.set(
                format!("rl.{n}.{label}.p99_us"),
                percentile(&lat, 99.0) as f64 / 1e3,
            );
            if let Some(rtt) = run.get("w0.rtt_us") {
                run.set(format!("rl.{n}.{label}.x2rtt"), p50 / (2.0 * rtt));
            }
        }
    }
    drop(clients);
    drop(servers);
    Ok(())
}

/// W3 (`lock` = Plain), W3f or W3rw for one library: figures under `<lock key>.<lib>.*`.
pub async fn w3_as(
    t: &Target,
    kind: Kind,
    lock: crate::libs::LockKind,
    secs: f64,
    run: &mut Run,
) -> Result<()> {
    let mut admin = server::connect(t).await?;
    let s0 = server::snapshot(&mut admin).await?;
    let p = two_processes(t, kind, false, secs, false, lock).await?;
    let s1 = server::snapshot(&mut admin).await?;
    let (start, late) = (p.start_ns, p.late);
    let end = start + (secs * 1e9) as u64;
    let holds_total = p.holds.len() as f64;
    let s = analyze_w3(p.holds, start, end);
    let (w, k) = (lock.key(), kind.key());
    run.set(format!("{w}.{k}.hps"), s.in_window as f64 / secs);
    run.set(
        format!("{w}.{k}.gap_p50_us"),
        percentile(&s.gaps, 50.0) as f64 / 1e3,
    );
    run.set(
        format!("{w}.{k}.gap_p99_us"),
        percentile(&s.gaps, 99.0) as f64 / 1e3,
    );
    if let Some(rtt) = run.get("w0.rtt_us") {
        run.set(
            format!("{w}.{k}.gap_xrtt"),
            percentile(&s.gaps, 50.0) as f64 / 1e3 / rtt,
        );
    }
    run.set(
        format!("{w}.{k}.self_pct"),
        100.0 * s.self_reacquire as f64 / s.handoffs.max(1) as f64,
    );
    run.set(format!("{w}.{k}.maxwait_ms"), s.max_wait as f64 / 1e6);
    run.set(
        format!("{w}.{k}.wait_p99_ms"),
        percentile(&s.waits, 99.0) as f64 / 1e6,
    );
    run.set(format!("{w}.{k}.overlaps"), s.overlaps as f64);
    run.set(format!("{w}.{k}.holders"), s.holders as f64);
    run.set(format!("{w}.{k}.late_ms"), late as f64 / 1e6);
    // The server's side of every hold (the children's connection set-up is included: a few
    // commands against thousands of holds).
    let d = Delta::between(&s0, &s1);
    if holds_total > 0.0 {
        for (cmd, key) in [
            ("evalsha", "evalsha"),
            ("subscribe", "subscribe"),
            ("unsubscribe", "unsubscribe"),
            ("publish", "publish"),
        ] {
            run.set(
                format!("{w}.{k}.{key}_per_hold"),
                d.calls(cmd) as f64 / holds_total,
            );
        }
        run.note(format!("{w}.{k}.per_hold"), d.per(holds_total));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(proc: u32, task: u32, req: u64, acq: u64, rel_s: u64) -> Hold {
        Hold {
            proc,
            task,
            name: 0,
            req,
            acq,
            rel_s,
            rel_e: rel_s + 1,
        }
    }

    #[test]
    fn w3_gaps_self_and_overlaps() {
        let holds = vec![
            h(0, 0, 0, 10, 20),
            h(0, 0, 21, 25, 30),
            h(1, 2, 5, 40, 50),
            h(1, 3, 6, 45, 60), // acquired before the previous release started: overlap
        ];
        let s = analyze_w3(holds, 0, 100);
        assert_eq!(s.in_window, 4);
        assert_eq!(s.gaps, vec![0, 5, 10]);
        assert_eq!(s.self_reacquire, 1);
        assert_eq!(s.overlaps, 1);
        assert_eq!(s.max_wait, 39);
        assert_eq!(s.holders, 3);
    }

    #[test]
    fn w3w_counts_only_parked_waiters_of_the_other_process() {
        let holds = vec![
            h(0, 0, 0, 1, 500),
            h(1, 0, 100, 502, 1000),   // parked before 500: gap 2
            h(0, 0, 1400, 1401, 1900), // asked after 1000: not a wake-up
        ];
        let msgs = [Msg {
            proc: 1,
            name: 0,
            at: 501,
        }];
        let s = analyze_w3w(&holds, &msgs);
        assert_eq!(s.gaps, vec![2]);
        assert_eq!(s.delivery, vec![1]);
        assert_eq!(s.wake, vec![1]);
        assert_eq!(s.overlaps, 0);
    }
}
