//! Cost as the work grows (issue 30 item 3): four curves, each from one run, opt-in
//! (`--only scale`, or any of `sw,sp,sn,st`):
//!
//! * `sw`, watchdog: 1k, 10k and 100k holds on one client (`workloads::watchdog_n`): renewal
//!   scripts per tick, client CPU per tick, one pass's time and the longest renewal lag.
//!   Cause: one script per 100 holds, so everything linear in holds; the lag stays far under the
//!   lease.
//! * `sp`, parked waiters: 1k, 10k and 100k waiters over 100 names on one client
//!   (`workloads::many_waiters_n`): memory per waiter (RSS and heap delta, server `used_memory`
//!   delta), subscriber connections, the wake-up of the last one. Cause: per-waiter memory flat,
//!   one subscriber connection, the last wake-up linear in waiters (they take 100 locks in turn).
//! * `sn`, names: W2 (64 tasks) walking over 1k, 100k and 1M distinct names, after touching each
//!   once: keys on the server, server and client memory per idle name, cycles/s. Cause: nothing
//!   per idle name.
//! * `st`, tasks: W2 at 1, 16, 64, 256, 1024 and 4096 tasks. Cause: cycles/s rises to the
//!   server's ceiling and stays there; client CPU per cycle flat or falling.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::libs::{Kind, Lib};
use crate::report::Report;
use crate::server::{self, Delta, Target};
use crate::util::{cpu_ns, live_heap_bytes, now_ns, rss_bytes, Result};
use crate::workloads::{self, Run};

pub const HOLDS: [usize; 3] = [1_000, 10_000, 100_000];
pub const WAITERS: [usize; 3] = [1_000, 10_000, 100_000];
/// Names the parked waiters share.
pub const WAITER_NAMES: usize = 100;
pub const NAMES: [usize; 3] = [1_000, 100_000, 1_000_000];
pub const TASKS: [usize; 6] = [1, 16, 64, 256, 1024, 4096];
/// Tasks of the names curve.
pub const NAME_TASKS: usize = 64;
/// Seconds of each W2 window (names and tasks curves).
pub const SECS: f64 = 3.0;
/// The watchdog curve's lease: 6 s, renewed every 2 s (a pass over 100k holds on the loaded
/// 2-core host takes 2-4 s, more than the 3 s lease of `wd`).
pub const WD_LEASE: Duration = Duration::from_secs(6);
/// The watchdog window: two ticks.
pub const WD_WINDOW: Duration = Duration::from_millis(4_500);

/// The curves asked for: `scale` means all four.
pub fn wanted(only: &[String]) -> [bool; 4] {
    let all = only.iter().any(|o| o == "scale");
    ["sw", "sp", "sn", "st"].map(|c| all || only.iter().any(|o| o == c))
}

pub async fn run_all(
    t: &Target,
    only: &[String],
    admin: &mut MultiplexedConnection,
    run: &mut Run,
    say: &dyn Fn(String),
) -> Result<()> {
    let [sw, sp, sn, st] = wanted(only);
    let timed = |run: &mut Run, curve: &str, t0: Instant| {
        run.set(format!("{curve}.curve_s"), t0.elapsed().as_secs_f64());
    };
    if sw {
        let t0 = Instant::now();
        for n in HOLDS {
            server::flushall(admin).await?;
            say(format!("  SW: watchdog, {n} holds"));
            let r =
                workloads::watchdog_n(t, n, WD_LEASE, WD_WINDOW, &format!("sw.{n}"), admin, run)
                    .await;
            failed(run, &format!("sw.{n}"), r, say);
        }
        timed(run, "sw", t0);
    }
    if sp {
        let t0 = Instant::now();
        for n in WAITERS {
            server::flushall(admin).await?;
            say(format!(
                "  SP: {n} parked waiters over {WAITER_NAMES} names"
            ));
            let r =
                workloads::many_waiters_n(t, n, WAITER_NAMES, &format!("sp.{n}"), admin, run).await;
            failed(run, &format!("sp.{n}"), r, say);
        }
        timed(run, "sp", t0);
    }
    if sn {
        let t0 = Instant::now();
        for n in NAMES {
            server::flushall(admin).await?;
            say(format!("  SN: W2 x{NAME_TASKS} over {n} names"));
            let r = names(t, n, admin, run).await;
            failed(run, &format!("sn.{n}"), r, say);
        }
        timed(run, "sn", t0);
    }
    if st {
        let t0 = Instant::now();
        let lib = Arc::new(Lib::connect(Kind::Ours, &t.url, 10).await?);
        for n in TASKS {
            server::flushall(admin).await?;
            say(format!("  ST: W2 x{n}"));
            let mut one = Run::default();
            let r = workloads::w2(lib.clone(), Kind::Ours, n, SECS, admin, &mut one).await;
            failed(run, &format!("st.{n}"), r, say);
            let prefix = format!("w2.ours.{n}.");
            for (k, v) in one.f {
                if let Some(rest) = k.strip_prefix(&prefix) {
                    run.set(format!("st.{n}.{rest}"), v);
                }
            }
            for (k, v) in one.notes {
                if let Some(rest) = k.strip_prefix(&prefix) {
                    run.note(format!("st.{n}.{rest}"), v);
                }
            }
        }
        timed(run, "st", t0);
    }
    Ok(())
}

/// A point that failed: said, noted (`fail.<point>`), and the curve goes on.
fn failed(run: &mut Run, point: &str, r: Result<()>, say: &dyn Fn(String)) {
    if let Err(e) = r {
        say(format!("  {point} failed: {e}"));
        run.note(format!("fail.{point}"), e.to_string());
    }
}

/// The names curve at `n` names: every name taken and released once (256 tasks), then W2 with
/// [`NAME_TASKS`] tasks walking over all of them (task `i` takes `i`, `i + 64`, ...).
async fn names(
    t: &Target,
    n: usize,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
) -> Result<()> {
    let client = redisson_lock::Client::connect(&t.url).await?;
    let f = |s: &str| format!("sn.{n}.{s}");
    let name = |i: usize| format!("sn:{i}");
    let (rss0, heap0) = (rss_bytes(), live_heap_bytes());
    let mem0 = workloads::used_memory(admin).await?;
    let t0 = Instant::now();
    let touch = (0..256)
        .map(|w| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in (w..n).step_by(256) {
                    let g = client.get_lock(name(i)).lock().await?;
                    g.unlock().await?;
                }
                Ok::<_, crate::util::Error>(())
            })
        })
        .collect::<Vec<_>>();
    for j in touch {
        j.await??;
    }
    run.set(f("touch_s"), t0.elapsed().as_secs_f64());
    let (rss1, heap1) = (rss_bytes(), live_heap_bytes());
    let mem1 = workloads::used_memory(admin).await?;
    run.set(f("keys_idle"), workloads::dbsize(admin).await?);
    run.set(f("tracked_idle"), client.stats().tracked_holds as f64);
    let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / n as f64;
    run.set(f("rss_per_name"), per(rss0, rss1));
    run.set(f("heap_per_name"), per(heap0, heap1));
    run.set(f("server_mem_per_name"), (mem1 - mem0).max(0.0) / n as f64);
    run.set(f("server_mem_mb"), mem1 / 1048576.0);

    // W2 over the names.
    let total = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(NAME_TASKS + 1));
    let start_at = Arc::new(AtomicU64::new(0));
    let joins = (0..NAME_TASKS)
        .map(|w| {
            let (client, total, barrier, start_at) = (
                client.clone(),
                total.clone(),
                barrier.clone(),
                start_at.clone(),
            );
            tokio::spawn(async move {
                barrier.wait().await;
                let deadline = start_at.load(Ordering::Acquire) + (SECS * 1e9) as u64;
                let (mut i, mut done) = (w, 0u64);
                while now_ns() < deadline {
                    let g = client.get_lock(name(i)).lock().await?;
                    g.unlock().await?;
                    done += 1;
                    i += NAME_TASKS;
                    if i >= n {
                        i = w;
                    }
                }
                total.fetch_add(done, Ordering::Relaxed);
                Ok::<_, crate::util::Error>(())
            })
        })
        .collect::<Vec<_>>();
    let s0 = server::snapshot(admin).await?;
    let c0 = cpu_ns();
    let w0 = now_ns();
    start_at.store(w0, Ordering::Release);
    barrier.wait().await;
    for j in joins {
        j.await??;
    }
    let wall = (now_ns() - w0) as f64 / 1e9;
    let c1 = cpu_ns();
    let s1 = server::snapshot(admin).await?;
    let cycles = total.load(Ordering::Relaxed) as f64;
    let d = Delta::between(&s0, &s1);
    run.set(f("cps"), cycles / wall);
    run.set(f("client_us"), (c1 - c0) as f64 / 1e3 / cycles);
    run.set(f("server_us"), d.cpu_s * 1e6 / cycles);
    run.set(f("keys_after"), workloads::dbsize(admin).await?);
    run.set(f("rss_mb"), rss_bytes() as f64 / 1048576.0);
    run.note(f("per_cycle"), d.per(cycles));
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Tables: one per curve, each figure with its ratio to the curve's first point.

/// `v (×r)`, r = v / first; `fmt` prints the value.
fn cell(v: Option<f64>, first: Option<f64>, fmt: &dyn Fn(f64) -> String) -> String {
    match (v, first) {
        (Some(v), Some(b)) if b.abs() > f64::EPSILON => format!("{} (×{:.2})", fmt(v), v / b),
        (Some(v), _) => fmt(v),
        _ => "?".into(),
    }
}

type Col<'a> = (&'a str, &'a str, &'a dyn Fn(f64) -> String);

fn curve(r: &Report, title: &str, prefix: &str, points: &[usize], cols: &[Col<'_>]) -> String {
    let mut out = format!("\n{title}\n\n| {} |", prefix_label(prefix));
    for (_, head, _) in cols {
        let _ = write!(out, " {head} |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(cols.len()));
    out.push('\n');
    for &n in points {
        let _ = write!(out, "| {} |", crate::report::int(n as f64));
        for (key, _, fmt) in cols {
            let v = r.med(&format!("{prefix}.{n}.{key}"));
            let first = r.med(&format!("{prefix}.{}.{key}", points[0]));
            let _ = write!(out, " {} |", cell(v, first, fmt));
        }
        out.push('\n');
    }
    if let Some(s) = r.med(&format!("{prefix}.curve_s")) {
        let _ = writeln!(out, "\n(curve run time {s:.0} s)");
    }
    out
}

fn prefix_label(prefix: &str) -> &'static str {
    match prefix {
        "sw" => "holds",
        "sp" => "waiters",
        "sn" => "names",
        _ => "tasks",
    }
}

/// The four curves' tables (those present in the run), or `None`.
pub fn table(r: &Report) -> Option<String> {
    let f0 = |v: f64| format!("{v:.0}");
    let f1 = |v: f64| format!("{v:.1}");
    let f2 = |v: f64| format!("{v:.2}");
    let f3 = |v: f64| format!("{v:.3}");
    let int = |v: f64| crate::report::int(v);
    let mut out = String::new();
    let has = |p: &str, pts: &[usize], k: &str| {
        pts.iter().any(|n| r.med(&format!("{p}.{n}.{k}")).is_some())
    };
    if has("sw", &HOLDS, "ticks") {
        out += &curve(
            r,
            "SW: watchdog holds on one client (6 s leases, renewed every 2 s; ×: ratio to the first row)",
            "sw",
            &HOLDS,
            &[
                ("scripts_per_tick", "renewal scripts per tick", &f0),
                ("cmds_per_lock_tick", "server calls per hold and tick", &f2),
                ("client_cpu_ms_per_tick", "client CPU ms per tick", &f2),
                ("server_cpu_ms_per_tick", "server CPU ms per tick", &f1),
                ("pass_ms", "one pass, ms", &f1),
                ("lag_ms", "longest renewal lag, ms (sampled)", &f0),
            ],
        );
    }
    if has("sp", &WAITERS, "waiters") {
        out += &curve(
            r,
            "SP: parked waiters on one client, over 100 names (×: ratio to the first row)",
            "sp",
            &WAITERS,
            &[
                ("rss_per_waiter", "RSS bytes per waiter", &f0),
                ("heap_per_waiter", "heap bytes per waiter", &f0),
                ("server_mem_per_waiter", "server bytes per waiter", &f0),
                ("sub_conns", "subscriber connections", &f0),
                ("scripts_per_acq", "scripts per acquire", &f2),
                ("all_ms", "wake-up of the last, ms", &f0),
                ("us_per_waiter", "µs per waiter", &f1),
                ("client_cpu_us_per_acq", "client CPU µs per acquire", &f1),
            ],
        );
    }
    if has("sn", &NAMES, "cps") {
        out += &curve(
            r,
            "SN: W2 (64 tasks) over distinct names, each touched once first (×: ratio to the first row)",
            "sn",
            &NAMES,
            &[
                ("keys_idle", "server keys when idle", &f0),
                ("server_mem_per_name", "server bytes per idle name", &f2),
                ("heap_per_name", "client heap bytes per idle name", &f2),
                ("tracked_idle", "client tracked holds", &f0),
                ("cps", "cycles/s", &int),
                ("client_us", "client µs/cycle", &f1),
                ("server_us", "server µs/cycle", &f1),
                ("touch_s", "touch all, s", &f1),
            ],
        );
    }
    if has("st", &TASKS, "cps") {
        out += &curve(
            r,
            "ST: W2 by task count (×: ratio to the first row)",
            "st",
            &TASKS,
            &[
                ("cps", "cycles/s", &int),
                ("client_us", "client µs/cycle", &f1),
                ("server_us", "server µs/cycle", &f1),
                ("allocs", "allocations/cycle", &f1),
                ("cmds", "server calls/cycle", &f2),
                ("script_usec", "script µs/cycle", &f3),
            ],
        );
    }
    (!out.is_empty()).then_some(out)
}
