//! Java Redisson as a peer (`--libs redisson-java,redisson-java-tuned`): the bench main of the
//! Java peer (`interop/java/.../Bench.java`, in the jar `scripts/ensure-java` builds) runs W1,
//! W2 (platform threads at W2's task counts, and virtual threads at 256 and 1024 where the JVM
//! has them), W3, W3f and W3w in one JVM against the server of this run, each timed window after
//! a JIT warm-up of the same work. The JVM is a child of this (possibly pinned) process, so it
//! runs on the client CPUs. It prints `BEGIN tag` before and `END tag ...` after each window and
//! waits for a line on stdin each time: the server's counters (`INFO cpu`, `INFO
//! commandstats`) are read there, so server CPU and commands per cycle are measured as for ours.
//! W3's holds come back as `H` lines and go through the same analysis as ours (`analyze_w3`,
//! `analyze_w3w`). Client CPU is the JVM's whole process CPU time (JIT and GC threads included;
//! their milliseconds are reported beside it).
//!
//! The JDK: `JAVA_HOME`, else the newest under `/usr/lib/jvm`, else `java` on PATH. The Redisson
//! version: `REDISSON_JAVA_VERSION` (one `scripts/ensure-java` builds), default 4.7.0.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::libs::Kind;
use crate::report::{int, Report};
use crate::server::{self, Delta, Target};
use crate::util::Result;
use crate::workloads::{analyze_w3w, record_w1, record_w2, record_w3, record_w3w, Hold, Plan, Run};

/// Thread counts of W2 on virtual threads (Java 21+).
const VT_THREADS: [usize; 2] = [256, 1024];

/// The Redisson version whose jar runs.
fn redisson_version() -> String {
    std::env::var("REDISSON_JAVA_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "4.7.0".into())
}

/// The `java` binary and a description (its path and version): `JAVA_HOME`, else the newest
/// JDK under `/usr/lib/jvm` (by the `JAVA_VERSION` of its `release` file), else `java` on PATH.
pub fn jdk() -> (PathBuf, String) {
    let version_of = |home: &Path| -> Option<String> {
        let text = std::fs::read_to_string(home.join("release")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("JAVA_VERSION="))
            .map(|v| v.trim_matches('"').to_owned())
    };
    if let Some(home) = std::env::var_os("JAVA_HOME").filter(|h| !h.is_empty()) {
        let home = PathBuf::from(home);
        let v = version_of(&home).unwrap_or_else(|| "?".into());
        return (
            home.join("bin/java"),
            format!("{} (JAVA_HOME; {v})", home.display()),
        );
    }
    let numbers = |v: &str| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let newest = std::fs::read_dir("/usr/lib/jvm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("bin/java").is_file() && !p.is_symlink())
        .filter_map(|p| version_of(&p).map(|v| (numbers(&v), v, p)))
        .max();
    match newest {
        Some((_, v, home)) => (
            home.join("bin/java"),
            format!("{} (newest in /usr/lib/jvm; {v})", home.display()),
        ),
        None => (PathBuf::from("java"), "java on PATH".into()),
    }
}

/// The peer's jar: `REDISSON_JAVA_JAR` when set, else built (when missing or stale) by
/// `scripts/ensure-java`.
fn jar() -> Result<PathBuf> {
    // A host without Maven (a many-core bench machine) is given the jar built elsewhere.
    if let Some(jar) = std::env::var_os("REDISSON_JAVA_JAR").filter(|j| !j.is_empty()) {
        let jar = PathBuf::from(jar);
        // A jar, or the directory of its unpacked classes (both work on a class path).
        return if jar.exists() {
            Ok(jar)
        } else {
            Err(format!("REDISSON_JAVA_JAR={} does not exist", jar.display()).into())
        };
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/ensure-java");
    let out = std::process::Command::new("bash")
        .arg(script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    let want = format!("redisson-peer-{}.jar", redisson_version());
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().find(|l| l.ends_with(&want)) {
        Some(path) if out.status.success() => Ok(PathBuf::from(path)),
        _ => Err(format!(
            "no {want}: scripts/ensure-java failed ({}); run it by hand (it needs a JDK 17+ and Maven, \
             and downloads Redisson from Maven Central on its first run)",
            out.status
        )
        .into()),
    }
}

/// Which workload a tag of the Java side belongs to (for failure notes).
fn workload(tag: &str) -> &str {
    match tag.split('.').next().unwrap_or(tag) {
        "w2vt" => "w2",
        w => w,
    }
}

/// Runs the Java bench for `kind` against `t`: its figures go into `run` under the kind's key
/// (virtual-thread W2 under `<key>-vt`), its failures into `fail.<workload>.<key>` notes.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    kind: Kind,
    t: &Target,
    plan: &Plan,
    quick: bool,
    on: &dyn Fn(&str) -> bool,
    admin: &mut MultiplexedConnection,
    run: &mut Run,
    say: &dyn Fn(String),
) -> Result<()> {
    let k = kind.key();
    let only: Vec<&str> = ["w1", "w2", "w3", "w3f", "w3w"]
        .into_iter()
        .filter(|w| on(w))
        .collect();
    if only.is_empty() {
        return Ok(());
    }
    let jar = jar()?;
    let (java, jdk) = jdk();
    say(format!("  {k}: JVM {jdk}; jar {}", jar.display()));
    run.note(format!("java.{k}.jdk"), jdk);
    let join = |v: &[usize]| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    server::flushall(admin).await?;
    let mut child = tokio::process::Command::new(&java)
        .arg("-cp")
        .arg(&jar)
        .arg("io.redissonlock.peer.Bench")
        .args(["--url", &t.url, "--lib", k, "--only", &only.join(",")])
        .args(["--w1-cycles", &plan.w1_cycles.to_string()])
        .args(["--w2-secs", &plan.w2_secs.to_string()])
        .args(["--w2-threads", &join(&plan.w2_tasks)])
        .args(["--vt-threads", &join(&VT_THREADS)])
        .args(["--w3-secs", &plan.w3_secs.to_string()])
        .args(["--w3w-secs", &plan.w3w_secs.to_string()])
        .args(["--warmup-secs", if quick { "1" } else { "3" }])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", java.display()))?;
    let mut stdin = child.stdin.take().ok_or("no JVM stdin")?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no JVM stdout")?).lines();
    let mut stderr = child.stderr.take().ok_or("no JVM stderr")?;
    let err_task = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });
    let mut holds: Vec<Hold> = Vec::new();
    let mut s0 = None;
    let mut done = false;
    // The longest quiet stretch: a W3w window plus its warm-up and the JVM's start.
    let quiet = Duration::from_secs_f64(plan.w3w_secs.max(plan.w3_secs) + 120.0);
    loop {
        let line = match tokio::time::timeout(quiet, lines.next_line()).await {
            Ok(l) => l?,
            Err(_) => return Err(format!("{k}: the JVM said nothing for {quiet:?}").into()),
        };
        let Some(line) = line else { break };
        let mut f = line.split_whitespace();
        match f.next() {
            Some("INFO") => {
                let rest = line["INFO ".len()..].to_owned();
                say(format!("  {k}: {rest}"));
                let key = if rest.starts_with("settings") {
                    "settings"
                } else {
                    "jvm"
                };
                run.note(format!("java.{k}.{key}"), rest);
            }
            Some("BEGIN") => {
                let tag = f.next().unwrap_or("?");
                say(format!("  {} {k}", tag.to_uppercase()));
                holds.clear();
                s0 = Some(server::snapshot(admin).await?);
                stdin.write_all(b"go\n").await?;
            }
            Some("H") => {
                let n: Vec<u64> = f.map(str::parse).collect::<std::result::Result<_, _>>()?;
                if let [proc, task, name, req, acq, rel_s, rel_e] = n[..] {
                    holds.push(Hold {
                        proc: proc as u32,
                        task: task as u32,
                        name: name as u32,
                        req,
                        acq,
                        rel_s,
                        rel_e,
                    });
                }
            }
            Some("END") => {
                let s1 = server::snapshot(admin).await?;
                let tag = f.next().unwrap_or("?").to_owned();
                let fields: std::collections::HashMap<&str, f64> = f
                    .filter_map(|kv| kv.split_once('='))
                    .filter_map(|(a, b)| Some((a, b.parse().ok()?)))
                    .collect();
                let d = Delta::between(s0.as_ref().ok_or("END before BEGIN")?, &s1);
                if let Err(e) = record(run, k, &tag, &fields, std::mem::take(&mut holds), plan, &d)
                {
                    say(format!("  {tag} {k} failed: {e}"));
                    run.note(format!("fail.{}.{k}", workload(&tag)), e.to_string());
                }
                stdin.write_all(b"go\n").await?;
            }
            Some("FAIL") => {
                let tag = f.next().unwrap_or("?");
                let msg: Vec<&str> = f.collect();
                say(format!("  {tag} {k} failed: {}", msg.join(" ")));
                run.note(format!("fail.{}.{k}", workload(tag)), msg.join(" "));
            }
            Some("DONE") => done = true,
            _ => {}
        }
    }
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .map_err(|_| format!("{k}: the JVM did not exit"))??;
    let err = err_task.await.unwrap_or_default();
    if !done || !status.success() {
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!(
            "{k}: the JVM ended ({status}) before its end: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )
        .into());
    }
    Ok(())
}

/// The figures of one `END` line (and the holds since its `BEGIN`).
fn record(
    run: &mut Run,
    k: &str,
    tag: &str,
    f: &std::collections::HashMap<&str, f64>,
    holds: Vec<Hold>,
    plan: &Plan,
    d: &Delta,
) -> Result<()> {
    let get = |key: &str| {
        f.get(key)
            .copied()
            .ok_or_else(|| format!("{tag}: no {key} in the JVM's END line"))
    };
    let cpu = get("cpu_ns")?;
    let (w, n) = tag.split_once('.').unwrap_or((tag, ""));
    match w {
        "w1" => {
            let cycles = get("cycles")?;
            record_w1(run, k, get("p50_ns")? / 1e3, get("p99_ns")? / 1e3);
            run.set(format!("w1.{k}.client_us"), cpu / 1e3 / cycles);
            run.set(format!("w1.{k}.server_us"), d.cpu_s * 1e6 / cycles);
        }
        "w2" | "w2vt" => {
            let n: usize = n.parse()?;
            let key = if w == "w2vt" {
                format!("{k}-vt")
            } else {
                k.to_owned()
            };
            let cycles = get("cycles")?;
            if cycles <= 0.0 {
                return Err(format!("{tag}: no cycles").into());
            }
            record_w2(run, &key, n, cycles, get("wall_ns")? / 1e9, cpu, None, d);
            run.set(format!("w2.{key}.{n}.gc_ms"), get("gc_ms")?);
            run.set(format!("w2.{key}.{n}.jit_ms"), get("jit_ms")?);
        }
        "w3" | "w3f" => {
            let total = holds.len() as f64;
            record_w3(
                run,
                w,
                k,
                holds,
                get("start_ns")? as u64,
                plan.w3_secs,
                0,
                d,
            );
            if total > 0.0 {
                run.set(format!("{w}.{k}.client_us_per_hold"), cpu / 1e3 / total);
            }
        }
        "w3w" => record_w3w(run, k, &analyze_w3w(&holds, &[]), 0)?,
        other => return Err(format!("unknown tag {other} from the JVM").into()),
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// The table: ours beside Java Redisson.

/// Is a higher figure better?
#[derive(Clone, Copy, PartialEq)]
enum Better {
    Higher,
    Lower,
}

/// Ours beside both Java settings, and ours' lead over the better of them (> 1: ours ahead);
/// `None` when the run has no Java figure.
pub fn table(r: &Report<'_>) -> Option<String> {
    let java = Kind::JAVA.map(Kind::key);
    let has_java = r.runs.iter().any(|run| {
        run.f
            .keys()
            .chain(run.notes.keys())
            .any(|key| java.iter().any(|j| key.contains(&format!(".{j}"))))
    });
    if !has_java {
        return None;
    }
    // (label, ours' key, the Java key with {k} for the library, better, digits)
    let mut rows: Vec<(String, String, String, Better, usize)> = vec![
        row("W1 lock+unlock p50 µs", "w1.{k}.p50_us", Better::Lower, 0),
        row("W1 lock+unlock p99 µs", "w1.{k}.p99_us", Better::Lower, 0),
    ];
    for &n in r.w2_tasks {
        rows.push(row(
            &format!("W2 {n} threads/tasks, cycles/s"),
            &format!("w2.{{k}}.{n}.cps"),
            Better::Higher,
            0,
        ));
    }
    for n in VT_THREADS {
        let mut x = row(
            &format!("W2 {n} virtual threads (ours: {n} tasks), cycles/s"),
            &format!("w2.{{k}}-vt.{n}.cps"),
            Better::Higher,
            0,
        );
        x.1 = format!("w2.ours.{n}.cps");
        rows.push(x);
    }
    for (key, label, digits) in [
        (
            "client_us",
            "client CPU µs per cycle (JVM: JIT and GC included)",
            1,
        ),
        ("server_us", "server CPU µs per cycle", 2),
        ("cmds", "commands per cycle (script-internal included)", 2),
    ] {
        rows.push(row(
            &format!("W2 64: {label}"),
            &format!("w2.{{k}}.64.{key}"),
            Better::Lower,
            digits,
        ));
    }
    for (w, name) in [("w3", "W3 (RLock)"), ("w3f", "W3f (fair lock)")] {
        rows.push(row(
            &format!("{name} handoffs/s"),
            &format!("{w}.{{k}}.hps"),
            Better::Higher,
            0,
        ));
        rows.push(row(
            &format!("{name} handoff gap p50 µs"),
            &format!("{w}.{{k}}.gap_p50_us"),
            Better::Lower,
            0,
        ));
        rows.push(row(
            &format!("{name} longest wait ms"),
            &format!("{w}.{{k}}.maxwait_ms"),
            Better::Lower,
            0,
        ));
    }
    rows.push(row(
        "W3w wake-up gap p50 ms",
        "w3w.{k}.p50_ms",
        Better::Lower,
        2,
    ));
    rows.push(row(
        "W3w wake-up gap max ms",
        "w3w.{k}.max_ms",
        Better::Lower,
        2,
    ));
    let mut out = String::from(
        "| figure | redisson-lock | redisson-java (defaults) | redisson-java-tuned | ours ÷ best Java (> 1: ours ahead) |\n|---|---|---|---|---|\n",
    );
    let fmt = |v: Option<f64>, digits: usize| match v {
        Some(v) if v >= 1000.0 => int(v),
        Some(v) => format!("{v:.digits$}"),
        None => "—".into(),
    };
    for (label, ours_key, java_key, better, digits) in rows {
        let ours = r.med(&ours_key);
        let js: Vec<Option<f64>> = java
            .iter()
            .map(|j| r.med(&java_key.replace("{k}", j)))
            .collect();
        if ours.is_none() && js.iter().all(Option::is_none) {
            continue;
        }
        let best = js.iter().flatten().copied().reduce(|a, b| match better {
            Better::Higher => a.max(b),
            Better::Lower => a.min(b),
        });
        let lead = match (ours, best) {
            (Some(o), Some(b)) if o > 0.0 && b > 0.0 => {
                let x = if better == Better::Higher {
                    o / b
                } else {
                    b / o
                };
                if x >= 1.0 {
                    format!("{x:.2}×")
                } else {
                    format!("**{x:.2}×**")
                }
            }
            _ => "—".into(),
        };
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {lead} |",
            fmt(ours, digits),
            fmt(js[0], digits),
            fmt(js[1], digits)
        );
    }
    let notes = r.notes();
    for j in java {
        for what in ["jdk", "jvm", "settings"] {
            if let Some(v) = notes.get(&format!("java.{j}.{what}")) {
                let _ = writeln!(out, "\n- {j} {what}: {v}");
            }
        }
        for (key, v) in notes
            .iter()
            .filter(|(key, _)| key.starts_with("fail.") && key.ends_with(&format!(".{j}")))
        {
            let _ = writeln!(out, "- `{key}`: {v}");
        }
    }
    Some(out)
}

fn row(
    label: &str,
    key: &str,
    better: Better,
    digits: usize,
) -> (String, String, String, Better, usize) {
    (
        label.to_owned(),
        key.replace("{k}", "ours"),
        key.to_owned(),
        better,
        digits,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_their_workload() {
        assert_eq!(workload("w2vt.1024"), "w2");
        assert_eq!(workload("w2.64"), "w2");
        assert_eq!(workload("w3f"), "w3f");
    }

    #[test]
    fn the_table_puts_ours_beside_the_better_java_setting() {
        let mut run = Run::default();
        run.set("w2.ours.64.cps", 30_000.0);
        run.set("w2.redisson-java.64.cps", 10_000.0);
        run.set("w2.redisson-java-tuned.64.cps", 20_000.0);
        run.set("w1.ours.p50_us", 200.0);
        run.set("w1.redisson-java.p50_us", 100.0);
        let runs = [run];
        let t = table(&Report {
            runs: &runs,
            w2_tasks: &[64],
        })
        .expect("a table");
        assert!(
            t.contains("| W2 64 threads/tasks, cycles/s | 30,000 | 10,000 | 20,000 | 1.50× |"),
            "{t}"
        );
        assert!(
            t.contains("| W1 lock+unlock p50 µs | 200 | 100 | — | **0.50×** |"),
            "{t}"
        );
        let none = [Run::default()];
        assert!(table(&Report {
            runs: &none,
            w2_tasks: &[64]
        })
        .is_none());
    }
}
