//! Cost as the work grows: many locks held under the watchdog, many waiters parked at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;

use super::{Plan, Run};
use crate::server::{self, Delta, Target};
use crate::util::{cpu_ns, live_heap_bytes, now_ns, rss_bytes, Result};

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
