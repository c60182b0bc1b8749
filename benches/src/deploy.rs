//! Server choice (issue 24 item 4): `--server redis|valkey|PATH[,...]`. With several servers the
//! whole plan runs once per server; each gives a [`Section`] (its own header and runs), all are
//! saved in one TSV (a `server\t<label>` line opens each section) and the report ends with the
//! main figures side by side, as ratios to the first server.

use std::fmt::Write as _;
use std::path::Path;

use crate::report::{int, Report};
use crate::util::Result;
use crate::workloads::Run;

/// Makes `bin` the binary every later [`crate::server::start`] runs.
pub fn use_bin(bin: &ServerBin) {
    crate::server::use_bin(&bin.path);
}

/// The binary [`crate::server::start`] runs now.
pub fn current() -> ServerBin {
    ServerBin::labelled(crate::server::bin())
}

/// A server binary the bench starts.
#[derive(Clone, Debug)]
pub struct ServerBin {
    /// `redis`, `valkey`, or the binary's file name.
    pub label: String,
    pub path: String,
}

impl ServerBin {
    /// What the bench starts when `--server` is not given: `REDIS_SERVER_BIN` or `redis-server`.
    pub fn default_bin() -> ServerBin {
        match std::env::var("REDIS_SERVER_BIN") {
            Ok(p) if !p.is_empty() => ServerBin::labelled(p),
            _ => ServerBin {
                label: "redis".into(),
                path: "redis-server".into(),
            },
        }
    }

    fn labelled(path: String) -> ServerBin {
        let name = Path::new(&path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.clone());
        let label = match name.as_str() {
            "redis-server" => "redis".to_owned(),
            "valkey-server" => "valkey".to_owned(),
            _ => name,
        };
        ServerBin { label, path }
    }

    /// `redis` (redis-server on PATH), `valkey` (the repository's `target/valkey-8.1.8/`, made
    /// by `scripts/ensure-valkey`, else valkey-server on PATH) or a path to a server binary.
    pub fn parse(s: &str) -> Result<ServerBin> {
        match s {
            "" => Err("--server needs redis, valkey or a path to a server binary".into()),
            "redis" => on_path("redis-server")
                .map(|path| ServerBin {
                    label: "redis".into(),
                    path,
                })
                .ok_or_else(|| {
                    "--server redis: no redis-server on PATH (apt-get install redis-server)".into()
                }),
            "valkey" => {
                let pinned = concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../target/valkey-8.1.8/valkey-server"
                );
                let path = if is_executable(Path::new(pinned)) {
                    std::fs::canonicalize(pinned)
                        .ok()
                        .map(|p| p.to_string_lossy().into_owned())
                } else {
                    on_path("valkey-server")
                };
                path.map(|path| ServerBin {
                    label: "valkey".into(),
                    path,
                })
                .ok_or_else(|| {
                    "--server valkey: no target/valkey-8.1.8/valkey-server and no valkey-server on PATH (run scripts/ensure-valkey)".into()
                })
            }
            path if is_executable(Path::new(path)) => Ok(ServerBin::labelled(path.to_owned())),
            other => Err(format!(
                "--server {other}: not redis, valkey or an executable server binary"
            )
            .into()),
        }
    }

    /// The binary's `--version` line, e.g. `Valkey server v=8.1.8 ...`, shortened to
    /// `Valkey server v=8.1.8`.
    pub fn version(&self) -> String {
        std::process::Command::new(&self.path)
            .arg("--version")
            .output()
            .ok()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("{} (version unknown)", self.path))
    }
}

/// `--server a,b,...`; labels must differ (they key the sections).
pub fn parse_servers(list: &str) -> Result<Vec<ServerBin>> {
    let bins: Vec<ServerBin> = list
        .split(',')
        .map(|s| ServerBin::parse(s.trim()))
        .collect::<Result<_>>()?;
    for (i, b) in bins.iter().enumerate() {
        if bins[..i].iter().any(|o| o.label == b.label) {
            return Err(format!("--server {list}: {} given twice", b.label).into());
        }
    }
    Ok(bins)
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.is_file()
        && p.metadata()
            .map(|m| m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
}

fn on_path(name: &str) -> Option<String> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
            .map(|p| p.to_string_lossy().into_owned())
    })
}

/// One server's share of an invocation.
#[derive(Debug, Default)]
pub struct Section {
    pub label: String,
    pub header: String,
    pub runs: Vec<Run>,
}

/// Every section, one figure per line: `server\t<label>` (only with several sections),
/// `header\t<text>`, `f\t<run>\t<key>\t<value>`, `n\t<run>\t<key>\t<text>`.
pub fn save(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        if sections.len() > 1 {
            let _ = writeln!(out, "server\t{}", s.label);
        }
        let _ = writeln!(out, "header\t{}", s.header);
        for (i, r) in s.runs.iter().enumerate() {
            for (k, v) in &r.f {
                let _ = writeln!(out, "f\t{i}\t{k}\t{v}");
            }
            for (k, v) in &r.notes {
                let _ = writeln!(out, "n\t{i}\t{k}\t{}", v.replace(['\t', '\n'], " "));
            }
        }
    }
    out
}

/// Reads what [`save`] wrote (a file without `server` lines is one section, as before).
pub fn load(path: &str, text: &str) -> Result<Vec<Section>> {
    let mut sections: Vec<Section> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        if sections.is_empty() || matches!(f.as_slice(), ["server", _]) {
            if let ["server", label] = f.as_slice() {
                sections.push(Section {
                    label: (*label).to_owned(),
                    ..Section::default()
                });
                continue;
            }
            sections.push(Section::default());
        }
        let s = sections.last_mut().expect("a section");
        match f.as_slice() {
            ["header", h] => s.header = (*h).to_owned(),
            ["f" | "n", i, k, v] => {
                let i: usize = i.parse()?;
                while s.runs.len() <= i {
                    s.runs.push(Run::default());
                }
                if f[0] == "f" {
                    s.runs[i].set(*k, v.parse::<f64>()?);
                } else {
                    s.runs[i].note(*k, *v);
                }
            }
            _ => return Err(format!("{path}: unexpected line {line}").into()),
        }
    }
    Ok(sections)
}

/// Is a figure worth putting side by side across servers?
fn main_figure(key: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    match parts.as_slice() {
        ["w0", "p16_rps" | "p1_rps" | "rtt_us" | "ceiling"] => true,
        ["w1", _, "p50_us"] => true,
        ["w2", _, _, "cps"] => true,
        ["w2", _, "64", "server_us" | "server_util"] => true,
        ["w3" | "w3w", _, "hps" | "p50_ms" | "maxwait_ms"] => true,
        ["wc", ..] => matches!(parts.last(), Some(&"cps")),
        _ => false,
    }
}

/// The main figures of every section side by side (medians), each later server also as a
/// ratio to the first (`valkey / redis` for `--server redis,valkey`).
pub fn side_by_side(sections: &[Section], w2_tasks: &[usize]) -> String {
    let reports: Vec<Report> = sections
        .iter()
        .map(|s| Report {
            runs: &s.runs,
            w2_tasks,
        })
        .collect();
    let first = &sections[0];
    let mut keys: Vec<&String> = first
        .runs
        .iter()
        .flat_map(|r| r.f.keys())
        .filter(|k| main_figure(k))
        .collect();
    // Numeric parts in numeric order (w2.ours.16 before w2.ours.256).
    keys.sort_by_key(|k| {
        k.split('.')
            .map(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_owned()))
            .collect::<Vec<_>>()
    });
    keys.dedup();
    let mut out = String::from("| figure (median) |");
    for s in sections {
        let _ = write!(out, " {} |", s.label);
    }
    for s in &sections[1..] {
        let _ = write!(out, " {} / {} |", s.label, first.label);
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(2 * sections.len() - 1));
    out.push('\n');
    let cell = |v: Option<f64>| match v {
        Some(v) if v >= 1000.0 => int(v),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
        None => "—".into(),
    };
    for key in keys {
        let vals: Vec<Option<f64>> = reports.iter().map(|r| r.med(key)).collect();
        let _ = write!(out, "| `{key}` |");
        for v in &vals {
            let _ = write!(out, " {} |", cell(*v));
        }
        for v in &vals[1..] {
            let ratio = match (v, vals[0]) {
                (Some(a), Some(b)) if b != 0.0 => format!("{:.2}×", a / b),
                _ => "—".into(),
            };
            let _ = write!(out, " {ratio} |");
        }
        out.push('\n');
    }
    // The comparisons, within each server.
    let mut tasks: Vec<usize> = w2_tasks.to_vec();
    tasks.sort_unstable();
    for n in tasks {
        for (a, b) in [
            ("ours", "rslock"),
            ("ours-batch", "ours"),
            ("ours-batch", "rslock"),
            ("ours", "redisson-java"),
            ("ours", "redisson-java-tuned"),
        ] {
            let ratios: Vec<Option<f64>> = reports
                .iter()
                .map(|r| {
                    let x = r.med(&format!("w2.{a}.{n}.cps"))?;
                    let y = r.med(&format!("w2.{b}.{n}.cps"))?;
                    (y > 0.0).then(|| x / y)
                })
                .collect();
            if ratios.iter().all(Option::is_none) {
                continue;
            }
            let _ = write!(out, "| W2 {n} cycles/s, {a} / {b} |");
            for r in &ratios {
                let _ = write!(out, " {} |", r.map_or("—".into(), |v| format!("{v:.2}×")));
            }
            out.push_str(&" |".repeat(sections.len() - 1));
            out.push('\n');
        }
    }
    out
}

/// Every W2 row's throughput and server busy share, when the run was pinned (its
/// `deploy.pinned` figure is 1): the pinned server's core is the bound to watch.
pub fn busy_table(r: &Report) -> Option<String> {
    if r.med("deploy.pinned") != Some(1.0) {
        return None;
    }
    let mut rows: Vec<(String, usize)> = r
        .runs
        .iter()
        .flat_map(|run| run.f.keys())
        .filter_map(|k| {
            let p: Vec<&str> = k.split('.').collect();
            match p.as_slice() {
                ["w2", lib, n, "server_util"] => Some((lib.to_string(), n.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    rows.sort();
    rows.dedup();
    if rows.is_empty() {
        return None;
    }
    let mut out = String::from(
        "| library | tasks | cycles/s | server busy (share of its core) | server µs/cycle | client µs/cycle |\n|---|---|---|---|---|---|\n",
    );
    for (lib, n) in rows {
        let f = |k: &str, d: usize| {
            r.med(&format!("w2.{lib}.{n}.{k}"))
                .map(|v| {
                    if v >= 1000.0 {
                        int(v)
                    } else {
                        format!("{v:.d$}")
                    }
                })
                .unwrap_or_else(|| "—".into())
        };
        out.push_str(&format!(
            "| {lib} | {n} | {} | {} | {} | {} |\n",
            f("cps", 0),
            f("server_util", 2),
            f("server_us", 2),
            f("client_us", 1)
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pairs: &[(&str, f64)]) -> Run {
        let mut r = Run::default();
        for (k, v) in pairs {
            r.set(*k, *v);
        }
        r.note("w2.ours.64.per_cycle", "evalsha 2.00");
        r
    }

    #[test]
    fn sections_survive_save_and_load() {
        let sections = vec![
            Section {
                label: "redis".into(),
                header: "## a".into(),
                runs: vec![run(&[
                    ("w2.ours.64.cps", 1000.0),
                    ("w2.rslock.64.cps", 800.0),
                ])],
            },
            Section {
                label: "valkey".into(),
                header: "## b".into(),
                runs: vec![
                    run(&[("w2.ours.64.cps", 1500.0)]),
                    run(&[("w0.rtt_us", 30.0)]),
                ],
            },
        ];
        let back = load("x", &save(&sections)).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].label, "valkey");
        assert_eq!(back[1].header, "## b");
        assert_eq!(back[1].runs.len(), 2);
        assert_eq!(back[1].runs[0].get("w2.ours.64.cps"), Some(1500.0));
        assert_eq!(
            back[0].runs[0].notes["w2.ours.64.per_cycle"],
            "evalsha 2.00"
        );
        let table = side_by_side(&back, &[64]);
        assert!(
            table.contains("| `w2.ours.64.cps` | 1,000 | 1,500 | 1.50× |"),
            "{table}"
        );
        assert!(
            table.contains("| W2 64 cycles/s, ours / rslock | 1.25× | — | |"),
            "{table}"
        );
    }

    #[test]
    fn a_file_without_server_lines_is_one_section() {
        let text = "header\t## old\nf\t0\tw0.rtt_us\t25\nf\t1\tw0.rtt_us\t27\n";
        let s = load("x", text).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].header, "## old");
        assert_eq!(s[0].runs.len(), 2);
        assert!(load("x", "bogus line\n").is_err());
    }

    #[test]
    fn bad_servers_are_refused() {
        assert!(parse_servers("/nonexistent/redis-server").is_err());
        assert!(parse_servers("").is_err());
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        assert!(ServerBin::parse(manifest).is_err(), "not executable");
        assert!(parse_servers("redis,redis").is_err(), "twice");
    }

    #[test]
    fn busy_table_only_when_pinned() {
        let mut run = Run::default();
        run.set("w2.ours.64.cps", 40_000.0);
        run.set("w2.ours.64.server_util", 0.93);
        run.set("w2.ours.64.server_us", 9.5);
        run.set("w2.ours.64.client_us", 30.0);
        run.set("deploy.pinned", 0.0);
        let table = |run: &Run| {
            busy_table(&Report {
                runs: std::slice::from_ref(run),
                w2_tasks: &[],
            })
        };
        assert!(table(&run).is_none());
        run.set("deploy.pinned", 1.0);
        let t = table(&run).unwrap();
        assert!(
            t.contains("| ours | 64 | 40,000 | 0.93 | 9.50 | 30.0 |"),
            "{t}"
        );
    }
}
