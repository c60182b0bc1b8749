//! W0: the server's own ceiling for our acquire script, and the round trip.

use std::process::Stdio;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::{Plan, Run};
use crate::libs::{self};
use crate::server::{self, Delta, Target};
use crate::util::{now_ns, percentile, Result};

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
