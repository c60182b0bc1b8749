//! W1 (single-task lock+unlock latency) and W2 (uncontended throughput, N tasks on distinct
//! names; also the timed loop of WC, `Cycles`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use redis::aio::MultiplexedConnection;

use super::Run;
use crate::libs::{Kind, Lib};
use crate::server::{self, Delta};
use crate::util::{cpu_ns, now_ns, percentile, Result};

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
    record_w1(
        run,
        kind.key(),
        percentile(&lat, 50.0) as f64 / 1000.0,
        percentile(&lat, 99.0) as f64 / 1000.0,
    );
    Ok(())
}

/// W1's figures under `w1.<k>.*`.
pub fn record_w1(run: &mut Run, k: &str, p50: f64, p99: f64) {
    run.set(format!("w1.{k}.p50_us"), p50);
    run.set(format!("w1.{k}.p99_us"), p99);
    if let Some(rtt) = run.get("w0.rtt_us") {
        run.set(format!("w1.{k}.x2rtt"), p50 / (2.0 * rtt));
    }
}

// ------------------------------------------------------------------------------------------
// W2: uncontended throughput, N tasks on distinct names.

/// W2's tasks (W2 and WC): `tasks` tasks, each on its own name `<prefix>:<i>`, 5 warm-up
/// cycles each, then lock+unlock cycles for `secs` from the moment [`Cycles::go`] starts them.
pub struct Cycles {
    joins: Vec<tokio::task::JoinHandle<Result<()>>>,
    /// Passed once every task finished its warm-up cycles (see [`Cycles::warmed`]).
    warm: Option<Arc<tokio::sync::Barrier>>,
    barrier: Arc<tokio::sync::Barrier>,
    total: Arc<AtomicU64>,
    start_at: Arc<AtomicU64>,
}

impl Cycles {
    pub fn spawn(lib: &Arc<Lib>, prefix: &str, tasks: usize, secs: f64) -> Cycles {
        let barrier = Arc::new(tokio::sync::Barrier::new(tasks + 1));
        let warm = Arc::new(tokio::sync::Barrier::new(tasks + 1));
        let total = Arc::new(AtomicU64::new(0));
        let start_at = Arc::new(AtomicU64::new(0));
        let mut joins = Vec::with_capacity(tasks);
        for i in 0..tasks {
            let (lib, warm, barrier, total, start_at) = (
                lib.clone(),
                warm.clone(),
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
                warm.wait().await;
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
            warm: Some(warm),
            barrier,
            total,
            start_at,
        }
    }

    /// Waits until every task has done its warm-up cycles: counters read after this see none of
    /// them (with thousands of tasks the warm-up is several times the timed window's cycles).
    pub async fn warmed(&mut self) {
        if let Some(w) = self.warm.take() {
            w.wait().await;
        }
    }

    /// Starts the window now (after the warm-up) and waits for every task: (the start in ns,
    /// the cycles done, the first task's error if any).
    pub async fn go(mut self) -> (u64, f64, Option<crate::util::Error>) {
        self.warmed().await;
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
    let mut cy = Cycles::spawn(&lib, &format!("w2:{}:{tasks}", kind.key()), tasks, secs);
    cy.warmed().await;
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
    let d = Delta::between(&s0, &s1);
    record_w2(
        run,
        kind.key(),
        tasks,
        cycles,
        wall,
        (c1 - c0) as f64,
        Some((a1 - a0) as f64),
        &d,
    );
    Ok(())
}

/// W2's figures under `w2.<k>.<tasks>.*` from one window: `cycles` in `wall` seconds, the
/// client's CPU (`client_ns`), its allocations (where counted) and the server's counters.
#[allow(clippy::too_many_arguments)]
pub fn record_w2(
    run: &mut Run,
    k: &str,
    tasks: usize,
    cycles: f64,
    wall: f64,
    client_ns: f64,
    allocs: Option<f64>,
    d: &Delta,
) {
    let cps = cycles / wall;
    if let Some(a) = allocs {
        run.set(format!("w2.{k}.{tasks}.allocs"), a / cycles);
    }
    run.set(format!("w2.{k}.{tasks}.cps"), cps);
    if let Some(ceiling) = run.get("w0.ceiling") {
        run.set(format!("w2.{k}.{tasks}.xceil"), cps / ceiling);
    }
    run.set(format!("w2.{k}.{tasks}.server_us"), d.cpu_s * 1e6 / cycles);
    run.set(format!("w2.{k}.{tasks}.server_util"), d.cpu_s / wall);
    run.set(
        format!("w2.{k}.{tasks}.client_us"),
        client_ns / 1e3 / cycles,
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
}
