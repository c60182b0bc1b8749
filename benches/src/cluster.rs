//! Workload WC (issue 24 item 4): W2 (N tasks on distinct names, one client process) over a real
//! Redis Cluster of 1, 3 and 6 masters (no replicas) that the bench starts: one server process
//! per master, `cluster-enabled yes`, slots split evenly with `CLUSTER ADDSLOTSRANGE`, joined with
//! `CLUSTER MEET`. Each master takes one CPU of `--server-cpus`, round robin. Throughput is
//! compared with the 1-master cluster (same code path: the cluster client), against the
//! issue's target of 0.8·N.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::libs::{Kind, Lib};
use crate::report::{int, Report};
use crate::server::{self, Server, Target};
use crate::util::{cpu_ns, now_ns, Result};
use crate::workloads::{Cycles, Run};

/// Masters per cluster and task counts of WC.
pub const MASTERS: [usize; 3] = [1, 3, 6];
pub const TASKS: [usize; 2] = [64, 256];
/// The libraries WC measures (rslock through its `cluster` feature: `LockManager::new_cluster`).
pub const LIBS: [Kind; 3] = [Kind::Ours, Kind::OursBatch, Kind::Rslock];
/// Seconds per measurement (as W2 full; the quick plan too, so that quick runs show the same).
pub const SECS: f64 = 5.0;

/// A running cluster; its servers stop on drop.
pub struct Cluster {
    nodes: Vec<(Server, Target)>,
}

impl Cluster {
    /// Starts `n` masters and waits until each reports `cluster_state:ok` with `n` known nodes.
    pub fn start(n: usize) -> Result<Cluster> {
        server::reset_cpu_round_robin();
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            nodes.push(server::start_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
            ])?);
        }
        let cluster = Cluster { nodes };
        for (i, (_, t)) in cluster.nodes.iter().enumerate() {
            let mut c = sync_conn(t)?;
            // Distinct epochs up front, as `redis-cli --cluster create` does.
            redis::cmd("CLUSTER")
                .arg("SET-CONFIG-EPOCH")
                .arg(i + 1)
                .query::<()>(&mut c)?;
            let (lo, hi) = slots(i, n);
            redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(lo)
                .arg(hi)
                .query::<()>(&mut c)
                .map_err(|e| format!("CLUSTER ADDSLOTSRANGE (Redis 7+ / Valkey): {e}"))?;
        }
        let mut first = sync_conn(&cluster.nodes[0].1)?;
        for (_, t) in &cluster.nodes[1..] {
            redis::cmd("CLUSTER")
                .arg("MEET")
                .arg(&t.host)
                .arg(t.port)
                .query::<()>(&mut first)?;
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cluster.is_ok(n) {
            if Instant::now() > deadline {
                return Err(
                    format!("a {n}-master cluster did not reach cluster_state:ok in 30 s").into(),
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(cluster)
    }

    fn is_ok(&self, n: usize) -> bool {
        self.nodes.iter().all(|(_, t)| {
            let info: String = sync_conn(t)
                .and_then(|mut c| Ok(redis::cmd("CLUSTER").arg("INFO").query(&mut c)?))
                .unwrap_or_default();
            info.contains("cluster_state:ok")
                && info.contains(&format!("cluster_known_nodes:{n}\r"))
        })
    }

    /// Seed URLs: every master.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|(_, t)| t.url.clone()).collect()
    }

    async fn admins(&self) -> Result<Vec<MultiplexedConnection>> {
        let mut v = Vec::with_capacity(self.nodes.len());
        for (_, t) in &self.nodes {
            v.push(server::connect(t).await?);
        }
        Ok(v)
    }
}

/// Master `i` of `n`: slots `lo..=hi`, 16384 split evenly.
fn slots(i: usize, n: usize) -> (usize, usize) {
    (i * 16384 / n, (i + 1) * 16384 / n - 1)
}

fn sync_conn(t: &Target) -> Result<redis::Connection> {
    Ok(redis::Client::open(t.url.as_str())?.get_connection_with_timeout(Duration::from_secs(5))?)
}

/// One library over the cluster (default configuration otherwise: no replicas, so no `WAIT`).
async fn connect(kind: Kind, urls: &[String]) -> Result<Lib> {
    use redisson_lock::{Client, Config};
    Ok(match kind {
        Kind::Ours => Lib::Ours(Client::with_config(Config::cluster(urls.to_vec())).await?),
        Kind::OursBatch => Lib::Ours(
            Client::with_config(Config::cluster(urls.to_vec()).with_batching(true)).await?,
        ),
        Kind::Rslock => Lib::Rslock(Arc::new(
            rslock::LockManager::new_cluster(urls.to_vec())
                .map_err(|e| format!("rslock new_cluster: {e}"))?,
        )),
        other => return Err(format!("{} has no cluster mode here", other.key()).into()),
    })
}

/// WC over every cluster size, for the libraries of `libs` it supports.
pub async fn wc(libs: &[Kind], run: &mut Run, say: &dyn Fn(String)) -> Result<()> {
    for n in MASTERS {
        let cluster = Cluster::start(n)?;
        let urls = cluster.urls();
        let mut admins = cluster.admins().await?;
        for kind in LIBS.into_iter().filter(|k| libs.contains(k)) {
            let lib = match connect(kind, &urls).await {
                Ok(l) => Arc::new(l),
                Err(e) => {
                    run.note(format!("fail.wc.{}", kind.key()), e.to_string());
                    continue;
                }
            };
            for tasks in TASKS {
                for a in admins.iter_mut() {
                    server::flushall(a).await?;
                }
                say(format!("  WC {n} master(s), {} x{tasks}", kind.key()));
                if let Err(e) = measure(lib.clone(), kind, n, tasks, &mut admins, run).await {
                    say(format!("  WC {n} {} x{tasks} failed: {e}", kind.key()));
                    run.note(format!("fail.wc.{}", kind.key()), e.to_string());
                }
            }
        }
    }
    Ok(())
}

async fn cpu_s(admins: &mut [MultiplexedConnection]) -> Result<Vec<f64>> {
    let mut v = Vec::with_capacity(admins.len());
    for a in admins.iter_mut() {
        v.push(server::snapshot(a).await?.cpu_s);
    }
    Ok(v)
}

/// W2's timed loop (5 warm-up cycles per task, then `SECS`), over the cluster.
async fn measure(
    lib: Arc<Lib>,
    kind: Kind,
    n: usize,
    tasks: usize,
    admins: &mut [MultiplexedConnection],
    run: &mut Run,
) -> Result<()> {
    let cy = Cycles::spawn(&lib, &format!("wc:{}:{tasks}", kind.key()), tasks, SECS);
    let s0 = cpu_s(admins).await?;
    let c0 = cpu_ns();
    let (t0, cycles, err) = cy.go().await;
    let wall = (now_ns() - t0) as f64 / 1e9;
    let c1 = cpu_ns();
    let s1 = cpu_s(admins).await?;
    if let Some(e) = err {
        return Err(e);
    }
    let busy: Vec<f64> = s0.iter().zip(&s1).map(|(a, b)| (b - a) / wall).collect();
    let p = format!("wc.{n}.{}.{tasks}", kind.key());
    run.set(format!("{p}.cps"), cycles / wall);
    run.set(
        format!("{p}.server_util"),
        busy.iter().sum::<f64>() / busy.len() as f64,
    );
    run.set(
        format!("{p}.server_util_max"),
        busy.iter().copied().fold(0.0, f64::max),
    );
    run.set(format!("{p}.client_cores"), (c1 - c0) as f64 / 1e9 / wall);
    run.set(format!("{p}.client_us"), (c1 - c0) as f64 / 1e3 / cycles);
    Ok(())
}

/// The scaling table: cycles/s per cluster size, the ratio to 1 master against 0.8·N.
pub fn table(r: &Report) -> Option<String> {
    let mut out = String::from(
        "| masters | library | tasks | cycles/s | × 1 master | target ≥ 0.8·N | met | server busy per master, mean (max) | client CPU, cores (µs/cycle) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut any = false;
    for n in MASTERS {
        for kind in LIBS {
            for tasks in TASKS {
                let k = |f: &str| r.med(&format!("wc.{n}.{}.{tasks}.{f}", kind.key()));
                let Some(cps) = k("cps") else { continue };
                any = true;
                let base = r.med(&format!("wc.1.{}.{tasks}.cps", kind.key()));
                let (ratio, target, met) = match base {
                    Some(b) if n > 1 => {
                        let x = cps / b;
                        let goal = 0.8 * n as f64;
                        (
                            format!("{x:.2}×"),
                            format!("{goal:.1}×"),
                            if x >= goal { "met" } else { "missed" }.to_owned(),
                        )
                    }
                    Some(_) => ("1.00×".into(), "—".into(), String::new()),
                    None => ("?".into(), format!("{:.1}×", 0.8 * n as f64), String::new()),
                };
                let busy = match (k("server_util"), k("server_util_max")) {
                    (Some(a), Some(m)) => format!("{a:.2} ({m:.2})"),
                    _ => "?".into(),
                };
                let client = match (k("client_cores"), k("client_us")) {
                    (Some(c), Some(u)) => format!("{c:.2} ({u:.1})"),
                    _ => "?".into(),
                };
                let _ = writeln!(
                    out,
                    "| {n} | {} | {tasks} | {} | {ratio} | {target} | {met} | {busy} | {client} |",
                    kind.key(),
                    int(cps)
                );
            }
        }
    }
    any.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_every_slot_once() {
        for n in MASTERS {
            let mut next = 0;
            for i in 0..n {
                let (lo, hi) = slots(i, n);
                assert_eq!(lo, next, "{n} masters, master {i}");
                assert!(hi >= lo);
                next = hi + 1;
            }
            assert_eq!(next, 16384, "{n} masters");
        }
    }

    #[test]
    fn table_compares_with_one_master() {
        let mut run = Run::default();
        run.set("wc.1.ours.64.cps", 10_000.0);
        run.set("wc.3.ours.64.cps", 25_000.0);
        run.set("wc.6.ours.64.cps", 30_000.0);
        let runs = [run];
        let t = table(&Report {
            runs: &runs,
            w2_tasks: &[],
        })
        .unwrap();
        assert!(
            t.contains("| 3 | ours | 64 | 25,000 | 2.50× | 2.4× | met |"),
            "{t}"
        );
        assert!(
            t.contains("| 6 | ours | 64 | 30,000 | 3.00× | 4.8× | missed |"),
            "{t}"
        );
        assert!(table(&Report {
            runs: &[],
            w2_tasks: &[]
        })
        .is_none());
    }
}
