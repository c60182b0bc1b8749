//! RedLock over 3 and 5 local servers.

use std::time::Duration;

use super::{Plan, Run};
use crate::server::{self};
use crate::util::{now_ns, percentile, Result};

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
