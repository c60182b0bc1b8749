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
    let lease = Duration::from_secs(3);
    watchdog_n(t, plan.wd_locks, lease, plan.wd_window, "wd", admin, run).await
}

/// The watchdog workload with `holds` locks held for `window`; figures under `<key>.`. Besides
/// the counts, it times one whole renewal pass (`pass_ms`) and samples the leases of up to 256
/// holds spread over them every 50 ms: the oldest lease seen, less the renewal period, is the
/// longest renewal lag (`lag_ms`; to the sampling step).
pub async fn watchdog_n(
    t: &Target,
    holds: usize,
    lease: Duration,
    window: Duration,
    key: &str,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
) -> Result<()> {
    use redisson_lock::{Client, Config};
    let client =
        Client::with_config(Config::new(t.url.as_str()).with_watchdog_timeout(lease)).await?;
    let locks: Vec<_> = (0..holds)
        .map(|i| client.get_lock(format!("{key}:{i}")))
        .collect();
    let t0 = Instant::now();
    let mut guards = Vec::with_capacity(locks.len());
    for chunk in locks.chunks(500) {
        for g in join_all(chunk.iter().map(|l| l.lock())).await {
            guards.push(g?);
        }
    }
    run.set(format!("{key}.acquire_s"), t0.elapsed().as_secs_f64());
    // One renewal pass first: the first pass after a script-cache flush pays NOSCRIPT + SCRIPT
    // LOAD per batch, which is not the steady state being measured.
    client.renew_now().await;
    // A second one, timed: what one tick's pass takes, first script sent to last reply.
    let p0 = Instant::now();
    client.renew_now().await;
    run.set(format!("{key}.pass_ms"), p0.elapsed().as_secs_f64() * 1e3);
    let sampled: Vec<String> = {
        let step = (holds / 256).max(1);
        (0..holds)
            .step_by(step)
            .map(|i| format!("{key}:{i}"))
            .collect()
    };
    let stop = Arc::new(tokio::sync::Notify::new());
    let sampler = {
        let (mut conn, stop) = (server::connect(t).await?, stop.clone());
        let lease_ms = lease.as_millis() as i64;
        tokio::spawn(async move {
            let mut oldest = 0i64;
            loop {
                let mut pipe = redis::pipe();
                for k in &sampled {
                    pipe.cmd("PTTL").arg(k);
                }
                let ttls: Vec<i64> = pipe.query_async(&mut conn).await?;
                for ttl in ttls {
                    if ttl < 0 {
                        return Err::<i64, crate::util::Error>("a watched hold expired".into());
                    }
                    oldest = oldest.max(lease_ms - ttl);
                }
                tokio::select! {
                    () = stop.notified() => return Ok(oldest),
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        })
    };
    let s0 = server::snapshot(admin).await?;
    let c0 = cpu_ns();
    tokio::time::sleep(window).await;
    let c1 = cpu_ns();
    let s1 = server::snapshot(admin).await?;
    stop.notify_one();
    let oldest_ms = sampler.await??;
    let d = Delta::between(&s0, &s1);
    let n = guards.len() as f64;
    // Every renewal of a hold is one HEXISTS: the ticks are the renewals per hold, counted
    // exactly, *not rounded*. The window (4.5 s over a 2 s period) ends inside a pass about as
    // often as not, and a pass over 100k holds lasts long enough (0.4-4 s) that part of it falls
    // inside: rounding the tick count to a whole number charged that part to the whole ticks
    // and showed up to 1.5x the calls per hold and tick (the 1.24x at 100k holds first
    // published, read as holds renewed twice in a tick; each pass renews each hold once).
    let ticks = d.calls("hexists") as f64 / n;
    if ticks < 0.5 {
        return Err("watchdog: no renewal tick in the window".into());
    }
    let watched = client.stats().watched_holds;
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("{key}:0"))
        .query_async(admin)
        .await?;
    // The sampler's PTTLs are the bench's, not the watchdog's.
    let pttls = d.calls("pttl");
    let period_ms = lease.as_secs_f64() * 1e3 / 3.0;
    let f = |s: &str| format!("{key}.{s}");
    run.set(f("locks"), n);
    run.set(f("watched"), watched as f64);
    run.set(f("ticks"), ticks);
    run.set(f("tick_s"), lease.as_secs_f64() / 3.0);
    run.set(f("scripts_per_tick"), d.calls("evalsha") as f64 / ticks);
    run.set(
        f("scripts_per_lock_tick"),
        d.calls("evalsha") as f64 / (n * ticks),
    );
    run.set(
        f("cmds_per_lock_tick"),
        d.all_calls().saturating_sub(pttls) as f64 / (n * ticks),
    );
    run.set(
        f("toplevel_per_lock_tick"),
        d.total.saturating_sub(1 + pttls) as f64 / (n * ticks),
    );
    run.set(f("client_cpu_ms_per_tick"), (c1 - c0) as f64 / 1e6 / ticks);
    run.set(f("server_cpu_ms_per_tick"), d.cpu_s * 1e3 / ticks);
    run.set(f("pttl_after_ms"), ttl as f64);
    run.set(f("lag_ms"), (oldest_ms as f64 - period_ms).max(0.0));
    let mut d = d;
    d.calls.remove("pttl");
    run.note(f("per_lock_tick"), d.per(n * ticks));
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
    many_waiters_n(t, plan.mw_waiters, plan.mw_names, "mw", admin, run).await
}

/// `waiters` waiters over `names` names, all parked at once on one client, then released;
/// figures under `<key>.`.
pub async fn many_waiters_n(
    t: &Target,
    waiters: usize,
    names: usize,
    key: &str,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
) -> Result<()> {
    use redisson_lock::Client;
    let client = Client::connect(&t.url).await?;
    let names: Arc<Vec<String>> = Arc::new((0..names).map(|j| format!("{key}:{j}")).collect());
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
    let mem0 = used_memory(admin).await?;
    let base = server::snapshot(admin).await?;
    let mut joins = Vec::with_capacity(waiters);
    for i in 0..waiters {
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
        if n >= waiters as u64 && n == last {
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
    let mem1 = used_memory(admin).await?;
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
    let w = waiters as f64;
    let f = |s: &str| format!("{key}.{s}");
    run.set(f("waiters"), w);
    run.set(f("names"), names.len() as f64);
    run.set(f("park_s"), park_s);
    run.set(f("sub_conns"), sub_conns as f64);
    run.set(f("client_sub_conns"), stats.subscriber_connections as f64);
    run.set(f("channels"), stats.subscribed_channels as f64);
    run.set(f("rss_per_waiter"), rss1.saturating_sub(rss0) as f64 / w);
    // What the parked waiters hold (their tasks, futures, and the client's per-waiter state),
    // including the bench's own `JoinHandle` per waiter (a pointer) and its task wrapper.
    run.set(f("heap_per_waiter"), heap1.saturating_sub(heap0) as f64 / w);
    run.set(f("rss_mb"), rss1 as f64 / 1048576.0);
    run.set(f("all_ms"), all_ms);
    run.set(f("us_per_waiter"), all_ms * 1e3 / w);
    run.set(f("server_mem_per_waiter"), (mem1 - mem0).max(0.0) / w);
    run.set(f("rate"), w / (all_ms / 1e3));
    run.set(f("scripts_per_acq"), d.calls("evalsha") as f64 / w);
    run.set(f("client_cpu_us_per_acq"), (c1 - c0) as f64 / 1e3 / w);
    run.note(f("per_acq"), d.per(w));
    Ok(())
}

/// The server's `used_memory`, bytes.
pub async fn used_memory(admin: &mut MultiplexedConnection) -> Result<f64> {
    Ok(server::info(admin, "memory")
        .await?
        .get("used_memory")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0))
}

/// The server's key count (`DBSIZE`).
pub async fn dbsize(admin: &mut MultiplexedConnection) -> Result<f64> {
    let n: u64 = redis::cmd("DBSIZE").query_async(admin).await?;
    Ok(n as f64)
}
