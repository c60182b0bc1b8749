//! W3 and W3w (and W3f, W3rw through `w3_as`): two processes. The parent spawns this binary
//! twice with `--child`.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::Run;
use crate::libs::{Kind, Lib};
use crate::server::{self, Delta, Target};
use crate::util::{now_ns, percentile, sleep_until_ns, Result, Rng};

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
    let st = analyze_w3w(&p.holds, &p.msgs);
    let k = if current_thread {
        format!("{}-ct", kind.key())
    } else {
        kind.key().to_owned()
    };
    record_w3w(run, &k, &st, p.late)
}

/// W3w's figures under `w3w.<k>.*` (`late`: how late the last process was ready, in ns).
pub fn record_w3w(run: &mut Run, k: &str, st: &W3wStats, late: u64) -> Result<()> {
    let (gaps, overlaps) = (&st.gaps, st.overlaps);
    if gaps.is_empty() {
        return Err(format!("{k}: no wake-up gaps recorded").into());
    }
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
    let d = Delta::between(&s0, &s1);
    record_w3(
        run,
        lock.key(),
        kind.key(),
        p.holds,
        p.start_ns,
        secs,
        p.late,
        &d,
    );
    Ok(())
}

/// W3's figures (W3f, W3rw: `w` is the workload key) under `<w>.<k>.*`, from the holds of both
/// processes, the window `[start, start + secs)` and the server's counters around them.
#[allow(clippy::too_many_arguments)]
pub fn record_w3(
    run: &mut Run,
    w: &str,
    k: &str,
    holds: Vec<Hold>,
    start: u64,
    secs: f64,
    late: u64,
    d: &Delta,
) {
    let end = start + (secs * 1e9) as u64;
    let holds_total = holds.len() as f64;
    let s = analyze_w3(holds, start, end);
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
