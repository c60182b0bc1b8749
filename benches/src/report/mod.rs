//! The one table (markdown) and the SVG chart, from the medians over runs: the rows of the
//! table in `rows.rs` (a method per workload), the chart in `svg.rs`.

mod rows;
mod svg;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::libs::Kind;
use crate::util::median;
use crate::workloads::Run;

pub struct Report<'a> {
    pub runs: &'a [Run],
    pub w2_tasks: &'a [usize],
}

const PEERS: [Kind; 3] = [Kind::Ours, Kind::Rslock, Kind::Redisson];

/// The table being built: one `[workload, figure, reference, ours, rslock, redisson, target, met]`
/// per row.
#[derive(Default)]
pub(super) struct Rows(Vec<[String; 8]>);

impl Rows {
    fn row(
        &mut self,
        wl: &str,
        fig: &str,
        reference: String,
        cells: [String; 3],
        target: &str,
        met: String,
    ) {
        let [a, b, c] = cells;
        self.0.push([
            wl.into(),
            fig.into(),
            reference,
            a,
            b,
            c,
            target.into(),
            met,
        ]);
    }
}

impl Report<'_> {
    /// Median over runs of a figure (runs that lack it are skipped).
    pub fn med(&self, key: &str) -> Option<f64> {
        let mut v: Vec<f64> = self.runs.iter().filter_map(|r| r.get(key)).collect();
        (!v.is_empty()).then(|| median(&mut v))
    }

    fn note(&self, key: &str) -> Option<&str> {
        self.runs
            .iter()
            .rev()
            .find_map(|r| r.notes.get(key).map(String::as_str))
    }

    /// Why a library has no figure for a workload: its recorded failure, or a fixed reason.
    fn missing(&self, wl: &str, k: Kind) -> String {
        if let Some(e) = self.note(&format!("fail.{wl}.{}", k.key())) {
            let short: String = e.chars().take(60).collect();
            return format!("failed: {short}");
        }
        match (wl, k) {
            ("wd", Kind::Rslock) => "n/a (no watchdog)".into(),
            ("wd", Kind::Redisson) => "n/a (lock() never renews: lease 30 s)".into(),
            ("mw", Kind::Rslock | Kind::Redisson) => "n/a (polls; no subscriptions)".into(),
            _ => "n/a".into(),
        }
    }

    /// One cell per peer: its figure, or why it has none.
    fn per_lib(&self, f: &dyn Fn(Kind) -> Option<String>, wl: &str) -> [String; 3] {
        PEERS.map(|k| f(k).unwrap_or_else(|| self.missing(wl, k)))
    }

    pub fn table(&self) -> String {
        let mut t = Rows::default();
        self.w0_rows(&mut t);
        self.w1_rows(&mut t);
        self.w2_rows(&mut t);
        self.w3_rows(&mut t);
        self.w3w_rows(&mut t);
        self.watchdog_rows(&mut t);
        self.many_waiters_rows(&mut t);
        self.redlock_rows(&mut t);
        self.cost_rows(&mut t);
        self.group_commit_rows(&mut t);
        let mut out = String::new();
        out.push_str("| workload | figure | reference (same run) | redisson-lock | rslock 0.10 | redisson 0.1 | target | met |\n");
        out.push_str("|---|---|---|---|---|---|---|---|\n");
        for r in t.0 {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        out
    }

    /// Key figures of every run side by side: how much the medians hide.
    pub fn per_run(&self) -> String {
        let keys: [(&str, &str); 23] = [
            ("w0.rtt_us", "W0 RTT µs"),
            ("w0.cold_rtt_us", "W0 cold RTT µs"),
            ("w0.ceiling", "W0 ceiling cycles/s"),
            ("w1.ours.p50_us", "W1 ours p50 µs"),
            (
                "w1.raw-nodel.p50_us",
                "W1 raw-nodel (ours on the wire) p50 µs",
            ),
            ("w1.raw.p50_us", "W1 raw (+ UNLINK per 10 ms) p50 µs"),
            ("w1.rslock.p50_us", "W1 rslock p50 µs"),
            ("w1.ours-batch.p50_us", "W1 ours-batch p50 µs"),
            ("w2.ours.64.cps", "W2 64 ours cycles/s"),
            ("w2.raw-nolatch.64.cps", "W2 64 raw-nolatch cycles/s"),
            ("w2.rslock.64.cps", "W2 64 rslock cycles/s"),
            ("w2.ours.64.client_us", "W2 64 ours client µs/cycle"),
            ("w2.ours.64.allocs", "W2 64 ours allocations/cycle"),
            ("w2.ours.64.server_us", "W2 64 ours server µs/cycle"),
            ("w2.ours-batch.64.cps", "W2 64 ours-batch cycles/s"),
            ("w2.ours.256.cps", "W2 256 ours cycles/s"),
            ("w2.ours-batch.256.cps", "W2 256 ours-batch cycles/s"),
            ("w2.rslock.256.cps", "W2 256 rslock cycles/s"),
            ("w3.ours-batch.maxwait_ms", "W3 ours-batch longest wait ms"),
            ("w3.ours.maxwait_ms", "W3 ours longest wait ms"),
            ("w3.raw.maxwait_ms", "W3 raw longest wait ms"),
            ("w3w.ours.p50_ms", "W3w ours p50 ms"),
            ("w3w.raw.p50_ms", "W3w raw p50 ms"),
        ];
        let mut out = String::from("| figure |");
        for i in 0..self.runs.len() {
            let _ = write!(out, " run {} |", i + 1);
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(self.runs.len()));
        out.push('\n');
        for (key, label) in keys {
            let _ = write!(out, "| {label} |");
            for r in self.runs {
                let cell = r
                    .get(key)
                    .map(|v| {
                        if v >= 1000.0 {
                            int(v)
                        } else {
                            format!("{v:.1}")
                        }
                    })
                    .unwrap_or_else(|| "—".into());
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
        out
    }

    fn max_over_runs(&self, key: &str) -> Option<f64> {
        self.runs.iter().filter_map(|r| r.get(key)).reduce(f64::max)
    }

    /// Per-cycle command mix (last run), for the doc.
    pub fn notes(&self) -> BTreeMap<String, String> {
        self.runs
            .last()
            .map(|r| r.notes.clone())
            .unwrap_or_default()
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "?".into())
}

fn verdict(v: Option<(bool, String)>) -> String {
    match v {
        Some((true, s)) => format!("yes ({s})"),
        Some((false, s)) => format!("**no** ({s})"),
        None => "?".into(),
    }
}

fn short(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

/// Integer with thousands separators.
pub fn int(v: f64) -> String {
    if !v.is_finite() {
        return "?".into();
    }
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(int(65189.4), "65,189");
        assert_eq!(int(999.0), "999");
        assert_eq!(int(1_000_000.0), "1,000,000");
    }
}
