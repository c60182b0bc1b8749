//! `locks`: benchmarks of redisson-lock against the Redis server's own ceiling and against peer
//! crates, in one run, on one machine (issue 7; method of `shared/reference/peer-bench.md`).
//!
//! ```text
//! cargo run --release --manifest-path benches/Cargo.toml -- [--quick] [--runs N]
//!     [--only w0,w1,w2,w3,w3w,wd,mw,rl,w3f,w3rw,rm,wc,scale|sw,sp,sn,st]
//!     [--libs ours,ours-batch,rslock,redisson,raw,raw-spawndel,raw-nodel,raw-nolatch,
//!             redisson-java,redisson-java-tuned]
//!     [--svg PATH | --no-svg] [--save PATH] [--replay PATH]
//!     [--server redis|valkey|PATH[,...]] [--server-cpus LIST] [--client-cpus LIST]
//! ```
//!
//! It starts its own `redis-server` on a free loopback port (or uses `REDIS_URL`, loopback only),
//! prints one markdown table of medians over the runs, and writes the SVG chart
//! (`docs/benchmarks.svg` by default). Every figure of every run is saved (`--save`, default
//! `benches/target/last-run.tsv`); `--replay FILE` re-renders table and chart from such a file
//! without measuring. W3 and W3w spawn this binary twice with `--child`.
//!
//! Deployment (issue 24 item 4): `--server` picks the server binary (several: the plan runs once
//! per server, one table each plus the main figures side by side); `--server-cpus` and
//! `--client-cpus` pin the servers and this process (`taskset -c` lists); `--only wc` runs W2 over
//! 1-, 3- and 6-master clusters (`cluster.rs`; not in the default plan: it takes ~2 minutes).
//!
//! Cost as the work grows (issue 30 item 3): `--only scale` (or any of `sw,sp,sn,st`) runs the
//! watchdog, parked-waiter, names and tasks curves of `curves.rs`; not in the default plan.
//! `--libs redisson-java,redisson-java-tuned` runs Java Redisson in a JVM of its own (`java.rs`).

mod cluster;
mod contend;
mod curves;
mod deploy;
mod java;
mod libs;
mod pin;
mod report;
mod server;
mod util;
mod workloads;

use std::time::Instant;

use deploy::{Section, ServerBin};
use libs::{Kind, Lib};
use util::Result;
use workloads::{ChildArgs, Plan, Run};

struct Args {
    quick: bool,
    runs: usize,
    only: Vec<String>,
    libs: Vec<Kind>,
    svg: Option<String>,
    save: Option<String>,
    replay: Option<String>,
    child: Option<ChildArgs>,
    servers: Vec<ServerBin>,
    pinning: pin::Pinning,
}

fn value(args: &[String], i: &mut usize) -> Result<String> {
    *i += 1;
    args.get(*i)
        .cloned()
        .ok_or_else(|| format!("{} needs a value", args[*i - 1]).into())
}

fn parse_args() -> Result<Args> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let default_svg = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/benchmarks.svg").to_string();
    let mut a = Args {
        quick: false,
        runs: 0,
        only: [
            "w0", "w1", "w2", "w3", "w3w", "wd", "mw", "rl", "w3f", "w3rw", "rm",
        ]
        .map(String::from)
        .to_vec(),
        libs: Kind::ALL.to_vec(),
        svg: Some(default_svg),
        save: Some(concat!(env!("CARGO_MANIFEST_DIR"), "/target/last-run.tsv").to_string()),
        replay: None,
        child: None,
        servers: vec![ServerBin::default_bin()],
        pinning: pin::Pinning::default(),
    };
    let mut child_mode: Option<String> = None;
    let (mut kind, mut url, mut start_ns, mut secs, mut proc, mut tasks) =
        (Kind::Ours, String::new(), 0u64, 5.0f64, 0u32, 4u32);
    let mut current_thread = false;
    let mut lock = libs::LockKind::Plain;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => a.quick = true,
            "--bench" => {} // passed by `cargo bench`
            "--runs" => a.runs = value(&args, &mut i)?.parse()?,
            "--only" => a.only = value(&args, &mut i)?.split(',').map(String::from).collect(),
            "--libs" => {
                a.libs = value(&args, &mut i)?
                    .split(',')
                    .map(|s| Kind::parse(s).ok_or_else(|| format!("unknown library {s}")))
                    .collect::<std::result::Result<_, _>>()?
            }
            "--svg" => a.svg = Some(value(&args, &mut i)?),
            "--no-svg" => a.svg = None,
            "--save" => a.save = Some(value(&args, &mut i)?),
            "--replay" => a.replay = Some(value(&args, &mut i)?),
            "--child" => child_mode = Some(value(&args, &mut i)?),
            "--server" => a.servers = deploy::parse_servers(&value(&args, &mut i)?)?,
            "--server-cpus" => a.pinning.server = Some(pin::parse_cpus(&value(&args, &mut i)?)?),
            "--client-cpus" => a.pinning.client = Some(pin::parse_cpus(&value(&args, &mut i)?)?),
            "--lib" => {
                let v = value(&args, &mut i)?;
                kind = Kind::parse(&v).ok_or_else(|| format!("unknown library {v}"))?;
            }
            "--url" => url = value(&args, &mut i)?,
            "--start-ns" => start_ns = value(&args, &mut i)?.parse()?,
            "--secs" => secs = value(&args, &mut i)?.parse()?,
            "--proc" => proc = value(&args, &mut i)?.parse()?,
            "--tasks" => tasks = value(&args, &mut i)?.parse()?,
            "--rt" => current_thread = value(&args, &mut i)? == "current",
            "--lock" => {
                let v = value(&args, &mut i)?;
                lock = libs::LockKind::parse(&v).ok_or_else(|| format!("unknown lock {v}"))?;
            }
            "-h" | "--help" => {
                println!("usage: locks [--quick] [--runs N] [--only w0,w1,w2,w3,w3w,wd,mw,rl,w3f,w3rw,rm,wc,scale,sw,sp,sn,st] [--libs {}] [--svg PATH | --no-svg] [--save PATH] [--replay PATH] [--server redis|valkey|PATH[,...]] [--server-cpus LIST] [--client-cpus LIST]",
                    Kind::ALL.into_iter().chain(Kind::JAVA).map(Kind::key).collect::<Vec<_>>().join(","));
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
        i += 1;
    }
    if let Some(mode) = child_mode {
        a.child = Some(ChildArgs {
            wake: match mode.as_str() {
                "w3" => false,
                "w3w" => true,
                m => return Err(format!("unknown child mode {m}").into()),
            },
            kind,
            url,
            start_ns,
            secs,
            proc,
            tasks,
            current_thread,
            lock,
        });
    }
    if a.runs == 0 {
        a.runs = if a.quick { 1 } else { 3 };
    }
    Ok(a)
}

#[global_allocator]
static ALLOC: util::Counting = util::Counting;

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("locks: {e}");
            std::process::exit(2);
        }
    };
    if args.child.is_none() {
        // Before the runtime's threads exist: they (and every child process) inherit the set.
        if let Err(e) = pin::init(args.pinning.clone()) {
            eprintln!("locks: {e}");
            std::process::exit(2);
        }
    }
    let rt = match &args.child {
        Some(c) if c.current_thread => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build()
    .expect("tokio runtime");
    let r = match args.child.clone() {
        Some(c) => rt.block_on(workloads::child(c)),
        None => rt.block_on(orchestrate(args)),
    };
    if let Err(e) = r {
        eprintln!("locks: {e}");
        std::process::exit(1);
    }
}

fn machine() -> String {
    // The machine's CPUs, not this (possibly pinned) process's share of them.
    // SAFETY: sysconf has no preconditions.
    let nproc = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "?".into());
    let server = deploy::current();
    format!(
        "{nproc} CPUs ({model}); {} ({}); {}",
        server.version(),
        server.path,
        pin::describe()
    )
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Prints the table, the per-run figures and the command mix; writes the chart.
fn render(header: &str, runs: &[Run], w2_tasks: &[usize], svg: Option<&str>) -> Result<()> {
    let report = report::Report { runs, w2_tasks };
    println!("{header}\n");
    print!("{}", report.table());
    let contention = contend::table(&report);
    if !contention.is_empty() {
        println!("\nFair and read-write locks under contention (issue 24 item 3; same run):\n");
        print!("{contention}");
    }
    if let Some(t) = java::table(&report) {
        println!("\nOurs beside Java Redisson (same run, same server; medians):\n\n{t}");
    }
    if let Some(t) = cluster::table(&report) {
        println!("\nWC: W2 over an N-master cluster (one client process):\n\n{t}");
    }
    if let Some(t) = curves::table(&report) {
        println!("\nCost as the work grows (one run; the figures that are counts do not depend on load):\n{t}");
    }
    if let Some(t) = deploy::busy_table(&report) {
        println!("\nW2, server busy share per row (pinned):\n\n{t}");
    }
    println!("\nPer run (the medians above hide this spread):\n");
    print!("{}", report.per_run());
    let notes = report.notes();
    if !notes.is_empty() {
        println!("\nServer commands per cycle (last run; script-internal calls included):\n");
        for (k, v) in notes.iter().filter(|(k, _)| !k.starts_with("fail.")) {
            println!("- `{k}`: {v}");
        }
        for (k, v) in notes.iter().filter(|(k, _)| k.starts_with("fail.")) {
            println!("- `{k}`: {v}");
        }
    }
    if let Some(path) = svg {
        std::fs::write(path, report.svg())?;
        eprintln!("chart written to {path}");
    }
    Ok(())
}

/// Re-renders a saved run (tables and chart) without measuring anything.
fn replay(path: &str, svg: Option<&str>) -> Result<()> {
    let text = std::fs::read_to_string(path)?;
    render_all(&deploy::load(path, &text)?, &Plan::quick().w2_tasks, svg)
}

/// One section per server; with several, each under its label, then the main figures side by
/// side. The chart shows the first server.
fn render_all(sections: &[Section], w2_tasks: &[usize], svg: Option<&str>) -> Result<()> {
    for (i, s) in sections.iter().enumerate() {
        if sections.len() > 1 {
            println!("\n# Server: {}\n", s.label);
        }
        render(
            &s.header,
            &s.runs,
            w2_tasks,
            if i == 0 { svg } else { None },
        )?;
    }
    if sections.len() > 1 {
        println!(
            "\n# Servers side by side (medians; ratios to {})\n",
            sections[0].label
        );
        print!("{}", deploy::side_by_side(sections, w2_tasks));
    }
    Ok(())
}

async fn orchestrate(args: Args) -> Result<()> {
    if let Some(path) = &args.replay {
        return replay(path, args.svg.as_deref());
    }
    if args.servers.len() > 1 && server::from_env()?.is_some() {
        return Err("--server with several servers cannot use REDIS_URL (unset it)".into());
    }
    let plan = if args.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    let mut sections = Vec::new();
    for bin in &args.servers {
        deploy::use_bin(bin);
        server::reset_cpu_round_robin();
        sections.push(measure(&args, bin).await?);
    }
    if let Some(path) = &args.save {
        // The default lives under the bench crate's target/, which another CARGO_TARGET_DIR
        // never creates.
        if let Some(dir) = std::path::Path::new(path).parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, deploy::save(&sections))?;
        eprintln!("figures saved to {path} (re-render with --replay {path})");
    }
    render_all(&sections, &plan.w2_tasks, args.svg.as_deref())?;
    eprintln!("done");
    Ok(())
}

/// The whole plan against one server binary.
async fn measure(args: &Args, bin: &ServerBin) -> Result<Section> {
    let load_start = loadavg();
    let plan = if args.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    let (_server, target) = match server::from_env()? {
        Some(t) => (None, t),
        None => {
            let (s, t) = server::start()?;
            (Some(s), t)
        }
    };
    let began = Instant::now();
    let say = |msg: String| eprintln!("[{:6.1}s] {msg}", began.elapsed().as_secs_f64());
    say(format!(
        "server {} {} ; {}",
        bin.label,
        target.url,
        machine()
    ));
    let mut admin = server::connect(&target).await?;
    let on = |w: &str| args.only.iter().any(|o| o == w);
    let mut runs: Vec<Run> = Vec::new();
    for r in 0..args.runs {
        let mut run = Run::default();
        run.set("deploy.pinned", f64::from(u8::from(pin::pinned())));
        say(format!("run {}/{}: W0", r + 1, args.runs));
        workloads::w0(&target, &plan, &mut admin, &mut run).await?;
        say(format!(
            "  RTT {:.0} µs, ceiling {:.0} cycles/s",
            run.get("w0.rtt_us").unwrap_or(f64::NAN),
            run.get("w0.ceiling").unwrap_or(f64::NAN)
        ));
        if on("w1") || on("w2") {
            for &kind in args.libs.iter().filter(|k| !k.java()) {
                server::flushall(&mut admin).await?;
                let lib = match Lib::connect(kind, &target.url, 10).await {
                    Ok(l) => std::sync::Arc::new(l),
                    Err(e) => {
                        say(format!("  {}: cannot connect: {e}", kind.key()));
                        run.note(format!("fail.w1.{}", kind.key()), e.to_string());
                        run.note(format!("fail.w2.{}", kind.key()), e.to_string());
                        continue;
                    }
                };
                if on("w1") {
                    say(format!("  W1 {}", kind.key()));
                    if let Err(e) = workloads::w1(lib.clone(), kind, plan.w1_cycles, &mut run).await
                    {
                        say(format!("  W1 {} failed: {e}", kind.key()));
                        run.note(format!("fail.w1.{}", kind.key()), e.to_string());
                    }
                }
                if on("w2") {
                    let counts: Vec<usize> = match kind {
                        Kind::Ours | Kind::OursBatch | Kind::Rslock | Kind::Redisson => {
                            plan.w2_tasks.clone()
                        }
                        _ => vec![64],
                    };
                    for n in counts {
                        server::flushall(&mut admin).await?;
                        let lib = if kind == Kind::Redisson && n > 10 {
                            // Its default pool of 10 fails above 10 concurrent tasks (peer-bench).
                            match Lib::connect(kind, &target.url, n as u32).await {
                                Ok(l) => std::sync::Arc::new(l),
                                Err(e) => {
                                    run.note(format!("fail.w2.{}", kind.key()), e.to_string());
                                    continue;
                                }
                            }
                        } else {
                            lib.clone()
                        };
                        say(format!("  W2 {} x{n}", kind.key()));
                        if let Err(e) =
                            workloads::w2(lib, kind, n, plan.w2_secs, &mut admin, &mut run).await
                        {
                            say(format!("  W2 {} x{n} failed: {e}", kind.key()));
                            run.note(format!("fail.w2.{}", kind.key()), e.to_string());
                        }
                    }
                }
            }
        }
        for (wl, secs) in [("w3", plan.w3_secs), ("w3w", plan.w3w_secs)] {
            if !on(wl) {
                continue;
            }
            for &kind in args.libs.iter().filter(|k| k.waits()) {
                server::flushall(&mut admin).await?;
                say(format!("  {} {} ({secs} s)", wl.to_uppercase(), kind.key()));
                let r = if wl == "w3" {
                    workloads::w3(&target, kind, secs, &mut run).await
                } else {
                    workloads::w3w(&target, kind, secs, false, &mut run).await
                };
                if let Err(e) = r {
                    say(format!("  {wl} {} failed: {e}", kind.key()));
                    run.note(format!("fail.{wl}.{}", kind.key()), e.to_string());
                }
                if wl == "w3w" && kind == Kind::Ours {
                    // The same, with both processes on tokio's current-thread runtime: prices
                    // the cross-thread wake-ups of the multi-thread runtime.
                    say(format!("  W3W ours, current-thread runtime ({secs} s)"));
                    server::flushall(&mut admin).await?;
                    if let Err(e) = workloads::w3w(&target, kind, secs, true, &mut run).await {
                        say(format!("  w3w ours-ct failed: {e}"));
                        run.note("fail.w3w.ours-ct", e.to_string());
                    }
                }
            }
        }
        if let Err(e) = contend::run_all(
            &target,
            &args.libs,
            &on,
            args.quick,
            plan.w3_secs,
            plan.w2_secs,
            &mut admin,
            &mut run,
            &|m| say(m),
        )
        .await
        {
            say(format!("  contention workloads failed: {e}"));
        }
        for &kind in args.libs.iter().filter(|k| k.java()) {
            say(format!("  {}: W1, W2, W3, W3f, W3w in one JVM", kind.key()));
            if let Err(e) = java::run(
                kind,
                &target,
                &plan,
                args.quick,
                &on,
                &mut admin,
                &mut run,
                &|m| say(m),
            )
            .await
            {
                say(format!("  {} failed: {e}", kind.key()));
                run.note(format!("fail.w1.{}", kind.key()), e.to_string());
            }
        }
        if on("wd") && args.libs.contains(&Kind::Ours) {
            server::flushall(&mut admin).await?;
            say(format!("  watchdog: {} locks", plan.wd_locks));
            if let Err(e) = workloads::watchdog(&target, &plan, &mut admin, &mut run).await {
                say(format!("  watchdog failed: {e}"));
                run.note("fail.wd.ours", e.to_string());
            }
        }
        if on("mw") && args.libs.contains(&Kind::Ours) {
            server::flushall(&mut admin).await?;
            say(format!(
                "  many waiters: {} over {} names",
                plan.mw_waiters, plan.mw_names
            ));
            if let Err(e) = workloads::many_waiters(&target, &plan, &mut admin, &mut run).await {
                say(format!("  many waiters failed: {e}"));
                run.note("fail.mw.ours", e.to_string());
            }
        }
        if on("wc") {
            say("  WC: W2 over 1-, 3- and 6-master clusters".into());
            if let Err(e) = cluster::wc(&args.libs, &mut run, &say).await {
                say(format!("  WC failed: {e}"));
                run.note("fail.wc.ours", e.to_string());
            }
        }
        if curves::wanted(&args.only).iter().any(|&w| w) {
            if let Err(e) =
                curves::run_all(&target, &args.only, &mut admin, &mut run, &|m| say(m)).await
            {
                say(format!("  scale curves failed: {e}"));
                run.note("fail.scale.ours", e.to_string());
            }
        }
        if on("rl") && args.libs.contains(&Kind::Ours) {
            say("  RedLock over 3 and 5 servers (5 more redis-servers)".into());
            if let Err(e) = workloads::redlock(&plan, &mut run).await {
                say(format!("  RedLock failed: {e}"));
                run.note("fail.rl.ours", e.to_string());
            }
        }
        runs.push(run);
    }
    let header = format!(
        "## redisson-lock benchmark ({} mode, {} run{}, medians; {}; load average {} at start, {} at end; {:.0} s)",
        if args.quick { "quick" } else { "full" },
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        machine(),
        load_start,
        loadavg(),
        began.elapsed().as_secs_f64()
    );
    say(format!("{} done", bin.label));
    Ok(Section {
        label: bin.label.clone(),
        header,
        runs,
    })
}
