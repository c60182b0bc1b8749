//! Issue 24 item 3: the fair lock and the read-write lock under contention.
//!
//! * **W3f** / **W3rw**: W3 (two processes x 4 tasks, one name, hold 0) with
//!   `get_fair_lock(name)` / `get_read_write_lock(name).write_lock()`, analysed as W3
//!   (`analyze_w3`), next to the RLock's W3 of the same run. Every W3 variant also records the
//!   server's commands per hold (`INFO commandstats` around the two processes).
//! * **RM** (read-mostly): one client, N tasks on one name, 8 readers to 1 writer, each taking its
//!   side of a read-write lock and releasing at once; reads/s against the same library's W2 with
//!   N tasks (run here when W2's task counts lack N), the writers' waits, and overlaps (a read
//!   hold overlapping a write hold, or two write holds), time-stamped with CLOCK_MONOTONIC.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use redis::aio::MultiplexedConnection;

use crate::libs::{Kind, Lib, LockKind};
use crate::report::{int, Report};
use crate::server::{self, Delta, Target};
use crate::util::{now_ns, percentile, Result};
use crate::workloads::{w3_as, Run};

// ------------------------------------------------------------------------------------------
// RM: read-mostly, one client, one name, 8 readers to 1 writer.

/// Task counts of RM (quick, full).
pub fn rm_tasks(quick: bool) -> Vec<usize> {
    if quick {
        vec![9, 36]
    } else {
        vec![9, 18, 36]
    }
}

/// One RM hold (CLOCK_MONOTONIC ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RwHold {
    pub write: bool,
    pub req: u64,
    pub acq: u64,
    pub rel_s: u64,
}

/// RM figures from the holds of one name.
#[derive(Debug, PartialEq)]
pub struct RmStats {
    /// Holds acquired in the window, per side.
    pub reads: usize,
    pub writes: usize,
    /// Acquire waits of the write holds (all of them), ascending.
    pub write_waits: Vec<u64>,
    /// Acquire waits of the read holds (all of them), ascending.
    pub read_waits: Vec<u64>,
    /// Holds that began while a conflicting hold acquired before them was still held: a read
    /// inside a write hold, or a write inside any hold.
    pub overlaps: usize,
}

/// Analyses RM holds: counts in `[start, end)`, waits, overlaps (over every hold).
pub fn analyze_rm(mut holds: Vec<RwHold>, start: u64, end: u64) -> RmStats {
    holds.sort_by_key(|h| h.acq);
    // Pair (a, b), a acquired first, overlaps when b.acq < a.rel_s; it conflicts when either
    // is a write. Per b: the latest release of any earlier write, and of any earlier hold.
    let (mut write_until, mut any_until) = (0u64, 0u64);
    let mut overlaps = 0;
    for h in &holds {
        if h.acq < write_until || (h.write && h.acq < any_until) {
            overlaps += 1;
        }
        any_until = any_until.max(h.rel_s);
        if h.write {
            write_until = write_until.max(h.rel_s);
        }
    }
    let in_win = |h: &&RwHold| h.acq >= start && h.acq < end;
    let waits = |write: bool| {
        let mut w: Vec<u64> = holds
            .iter()
            .filter(|h| h.write == write)
            .map(|h| h.acq.saturating_sub(h.req))
            .collect();
        w.sort_unstable();
        w
    };
    RmStats {
        reads: holds.iter().filter(in_win).filter(|h| !h.write).count(),
        writes: holds.iter().filter(in_win).filter(|h| h.write).count(),
        write_waits: waits(true),
        read_waits: waits(false),
        overlaps,
    }
}

/// Is task `i` of RM a writer? One in nine: 8 readers to 1 writer.
pub fn rm_writer(i: usize) -> bool {
    i % 9 == 8
}

/// RM with `tasks` tasks for one library (ours or ours-batch): figures under `rm.<lib>.<n>.*`.
pub async fn rm(lib: Arc<Lib>, kind: Kind, tasks: usize, secs: f64, run: &mut Run) -> Result<()> {
    let Lib::Ours(client) = &*lib else {
        return Err("RM needs ours or ours-batch".into());
    };
    let rw = client.get_read_write_lock(format!("rm:{}:{tasks}", kind.key()));
    let barrier = Arc::new(tokio::sync::Barrier::new(tasks + 1));
    let start_at = Arc::new(AtomicU64::new(0));
    let mut joins = Vec::with_capacity(tasks);
    for i in 0..tasks {
        let (rw, barrier, start_at) = (rw.clone(), barrier.clone(), start_at.clone());
        joins.push(tokio::spawn(async move {
            let write = rm_writer(i);
            let (r, w) = (rw.read_lock(), rw.write_lock());
            let cycle = || async {
                if write {
                    w.lock().await?.unlock().await
                } else {
                    r.lock().await?.unlock().await
                }
            };
            for _ in 0..3 {
                cycle().await?;
            }
            barrier.wait().await;
            let deadline = start_at.load(Ordering::Acquire) + (secs * 1e9) as u64;
            let mut holds = Vec::new();
            while now_ns() < deadline {
                let req = now_ns();
                // Two arms, not a shared closure: the guard types differ.
                if write {
                    let g = w.lock().await?;
                    let acq = now_ns();
                    let rel_s = now_ns();
                    g.unlock().await?;
                    holds.push(RwHold {
                        write,
                        req,
                        acq,
                        rel_s,
                    });
                } else {
                    let g = r.lock().await?;
                    let acq = now_ns();
                    let rel_s = now_ns();
                    g.unlock().await?;
                    holds.push(RwHold {
                        write,
                        req,
                        acq,
                        rel_s,
                    });
                }
            }
            Ok::<_, crate::util::Error>(holds)
        }));
    }
    let t0 = now_ns();
    start_at.store(t0, Ordering::Release);
    barrier.wait().await;
    let mut holds = Vec::new();
    let mut err = None;
    for j in joins {
        match j.await.map_err(crate::util::Error::from).and_then(|r| r) {
            Ok(h) => holds.extend(h),
            Err(e) => {
                err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    let s = analyze_rm(holds, t0, t0 + (secs * 1e9) as u64);
    let (k, n) = (kind.key(), tasks);
    let reads_ps = s.reads as f64 / secs;
    run.set(format!("rm.{k}.{n}.reads_ps"), reads_ps);
    run.set(format!("rm.{k}.{n}.writes_ps"), s.writes as f64 / secs);
    let ms = |v: &[u64], p: f64| percentile(v, p) as f64 / 1e6;
    run.set(format!("rm.{k}.{n}.wmax_ms"), ms(&s.write_waits, 100.0));
    run.set(format!("rm.{k}.{n}.wp99_ms"), ms(&s.write_waits, 99.0));
    run.set(format!("rm.{k}.{n}.rmax_ms"), ms(&s.read_waits, 100.0));
    run.set(format!("rm.{k}.{n}.overlaps"), s.overlaps as f64);
    if let Some(w2) = run.get(&format!("w2.{k}.{n}.cps")) {
        run.set(format!("rm.{k}.{n}.xw2"), reads_ps / w2);
    }
    Ok(())
}

/// The three workloads of this module for every library that has them (ours, ours-batch), in
/// one run: W3f and W3rw (after the caller's W3), then RM (with W2 at its task counts when W2
/// lacks them).
#[allow(clippy::too_many_arguments)]
pub async fn run_all(
    t: &Target,
    libs: &[Kind],
    on: &dyn Fn(&str) -> bool,
    quick: bool,
    w3_secs: f64,
    w2_secs: f64,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
    say: &dyn Fn(String),
) -> Result<()> {
    let ours = || {
        libs.iter()
            .copied()
            .filter(|k| matches!(k, Kind::Ours | Kind::OursBatch))
    };
    for lock in [LockKind::Fair, LockKind::RwWrite] {
        if !on(lock.key()) {
            continue;
        }
        for kind in ours() {
            server::flushall(admin).await?;
            say(format!(
                "  {} {} ({w3_secs} s)",
                lock.key().to_uppercase(),
                kind.key()
            ));
            if let Err(e) = w3_as(t, kind, lock, w3_secs, run).await {
                say(format!("  {} {} failed: {e}", lock.key(), kind.key()));
                run.note(format!("fail.{}.{}", lock.key(), kind.key()), e.to_string());
            }
        }
    }
    if !on("rm") {
        return Ok(());
    }
    for kind in ours() {
        let lib = match Lib::connect(kind, &t.url, 10).await {
            Ok(l) => Arc::new(l),
            Err(e) => {
                run.note(format!("fail.rm.{}", kind.key()), e.to_string());
                continue;
            }
        };
        for n in rm_tasks(quick) {
            if run.get(&format!("w2.{}.{n}.cps", kind.key())).is_none() {
                server::flushall(admin).await?;
                say(format!("  W2 {} x{n} (for RM)", kind.key()));
                if let Err(e) =
                    crate::workloads::w2(lib.clone(), kind, n, w2_secs, admin, run).await
                {
                    run.note(format!("fail.w2.{}", kind.key()), e.to_string());
                }
            }
            server::flushall(admin).await?;
            say(format!("  RM {} x{n} (8:1, {w3_secs} s)", kind.key()));
            let s0 = server::snapshot(admin).await?;
            if let Err(e) = rm(lib.clone(), kind, n, w3_secs, run).await {
                say(format!("  RM {} x{n} failed: {e}", kind.key()));
                run.note(format!("fail.rm.{}", kind.key()), e.to_string());
                continue;
            }
            let s1 = server::snapshot(admin).await?;
            // Per acquire (reads and writes; warm-up and the last cycles past the window
            // included, so slightly high).
            let key = |f: &str| format!("rm.{}.{n}.{f}", kind.key());
            let ops = (run.get(&key("reads_ps")).unwrap_or(0.0)
                + run.get(&key("writes_ps")).unwrap_or(0.0))
                * w3_secs;
            if ops > 0.0 {
                let d = Delta::between(&s0, &s1);
                run.set(key("evalsha_per_op"), d.calls("evalsha") as f64 / ops);
                run.note(key("per_op"), d.per(ops));
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// The table.

/// The fair, read-write and read-mostly rows with the targets; empty when the run has
/// none of them.
pub fn table(r: &Report<'_>) -> String {
    let max_over = |key: &str| {
        r.runs
            .iter()
            .filter_map(|run| run.get(key))
            .reduce(f64::max)
    };
    let f1 = |v: Option<f64>| v.map_or("?".into(), |v| format!("{v:.1}"));
    let f2 = |v: Option<f64>| v.map_or("?".into(), |v| format!("{v:.2}"));
    let mut rows: Vec<String> = Vec::new();
    for k in [Kind::Ours, Kind::OursBatch] {
        let k = k.key();
        let base = r.med(&format!("w3.{k}.hps"));
        for lock in [LockKind::Plain, LockKind::Fair, LockKind::RwWrite] {
            let w = lock.key();
            let Some(hps) = r.med(&format!("{w}.{k}.hps")) else {
                if let Some(e) = r
                    .runs
                    .iter()
                    .rev()
                    .find_map(|run| run.notes.get(&format!("fail.{w}.{k}")))
                {
                    let short: String = e.chars().take(60).collect();
                    rows.push(format!(
                        "| {} | {k} | failed: {short} | | | | | | | |",
                        w.to_uppercase()
                    ));
                }
                continue;
            };
            let ratio = base.map(|b| hps / b);
            let maxw = r.med(&format!("{w}.{k}.maxwait_ms"));
            let p99 = r.med(&format!("{w}.{k}.wait_p99_ms"));
            let ov = max_over(&format!("{w}.{k}.overlaps"));
            let scripts = r.med(&format!("{w}.{k}.evalsha_per_hold"));
            let subs = r.med(&format!("{w}.{k}.subscribe_per_hold"));
            let unsubs = r.med(&format!("{w}.{k}.unsubscribe_per_hold"));
            let (target, met) = match lock {
                LockKind::Fair => {
                    let ok = maxw.is_some_and(|m| m <= 50.0)
                        && ratio.is_some_and(|x| x >= 0.7)
                        && ov == Some(0.0);
                    (
                        "longest wait ≤ 50 ms; ≥ 0.7× RLock; 0 overlaps",
                        met_text(maxw.is_some() && ratio.is_some() && ov.is_some(), ok),
                    )
                }
                _ => ("0 overlaps", met_text(ov.is_some(), ov == Some(0.0))),
            };
            rows.push(format!(
                "| {} | {k} | {} handoffs/s | {} | {} | {} | {} | {} / {} / {} | {target} | {met} |",
                w.to_uppercase(),
                int(hps),
                ratio.map_or("?".into(), |x| format!("{x:.2}× RLock W3")),
                f1(maxw),
                f2(p99),
                ov.map_or("?".into(), |v| format!("{v:.0}")),
                f2(scripts),
                f2(subs),
                f2(unsubs),
            ));
        }
        for n in [9usize, 18, 36] {
            let key = |f: &str| format!("rm.{k}.{n}.{f}");
            let Some(reads) = r.med(&key("reads_ps")) else {
                continue;
            };
            let w2 = r.med(&format!("w2.{k}.{n}.cps"));
            let ratio = r.med(&key("xw2"));
            let wmax = r.med(&key("wmax_ms"));
            let ov = max_over(&key("overlaps"));
            let ok = ratio.is_some_and(|x| x >= 0.6)
                && wmax.is_some_and(|m| m <= 100.0)
                && ov == Some(0.0);
            rows.push(format!(
                "| RM x{n} (8:1) | {k} | {} reads/s, {} writes/s | {} | {} (reads {}) | {} | {} | {} EVALSHA per acquire | reads ≥ 0.6× W2 x{n}; writer longest wait ≤ 100 ms; 0 overlaps | {} |",
                int(reads),
                r.med(&key("writes_ps")).map_or("?".into(), int),
                match (ratio, w2) {
                    (Some(x), Some(w)) => format!("{x:.2}× W2 x{n} ({})", int(w)),
                    _ => "?".into(),
                },
                f1(wmax),
                f1(r.med(&key("rmax_ms"))),
                f2(r.med(&key("wp99_ms"))),
                ov.map_or("?".into(), |v| format!("{v:.0}")),
                f2(r.med(&key("evalsha_per_op"))),
                met_text(ratio.is_some() && wmax.is_some() && ov.is_some(), ok),
            ));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| workload | library | throughput | × reference (same run) | longest wait ms | p99 wait ms | overlaps (max over runs) | EVALSHA / SUBSCRIBE / UNSUBSCRIBE per hold | target | met |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&row);
        out.push('\n');
    }
    out
}

fn met_text(known: bool, ok: bool) -> String {
    match (known, ok) {
        (false, _) => "?".into(),
        (true, true) => "yes".into(),
        (true, false) => "**no**".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(write: bool, req: u64, acq: u64, rel_s: u64) -> RwHold {
        RwHold {
            write,
            req,
            acq,
            rel_s,
        }
    }

    #[test]
    fn rm_reads_may_overlap_reads_only() {
        // Two overlapping reads: fine. A write after both: fine.
        let ok = vec![
            h(false, 0, 1, 10),
            h(false, 0, 2, 8),
            h(true, 0, 11, 12),
            h(false, 5, 13, 14),
        ];
        let s = analyze_rm(ok, 0, 100);
        assert_eq!(s.overlaps, 0);
        assert_eq!((s.reads, s.writes), (3, 1));
        assert_eq!(s.write_waits, vec![11]);
        assert_eq!(s.read_waits, vec![1, 2, 8]);
    }

    #[test]
    fn rm_counts_conflicting_overlaps() {
        // A write that begins inside a read; a read that begins inside a write; a write inside
        // a write: three. The holds come unsorted.
        let bad = vec![
            h(true, 0, 5, 7),   // inside the read [1, 10)
            h(false, 0, 1, 10), // overlaps nothing acquired before it
            h(true, 0, 20, 30),
            h(false, 0, 25, 26), // inside the write [20, 30)
            h(true, 0, 29, 31),  // inside the write [20, 30)
        ];
        let s = analyze_rm(bad, 0, 100);
        assert_eq!(s.overlaps, 3);
    }

    #[test]
    fn rm_window_counts_only_acquires_inside() {
        let holds = vec![
            h(false, 0, 5, 6),
            h(false, 0, 10, 11),
            h(true, 0, 19, 20),
            h(true, 0, 20, 21),
        ];
        let s = analyze_rm(holds, 10, 20);
        assert_eq!((s.reads, s.writes), (1, 1));
    }

    #[test]
    fn writers_are_one_in_nine() {
        let writers = (0..36).filter(|&i| rm_writer(i)).count();
        assert_eq!(writers, 4);
        // 8 readers to 1 writer at any multiple of 9.
        let writers = (0..72).filter(|&i| rm_writer(i)).count();
        assert_eq!((72 - writers, writers), (64, 8));
        assert!(!rm_writer(0));
    }

    #[test]
    fn lock_kind_round_trips() {
        for k in [LockKind::Plain, LockKind::Fair, LockKind::RwWrite] {
            assert_eq!(LockKind::parse(k.arg()), Some(k));
        }
        assert_eq!(LockKind::parse("nope"), None);
    }
}
