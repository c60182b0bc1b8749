//! The SVG chart: W3w wake-up gaps (log scale) and W2 throughput over the ceiling.

use std::fmt::Write as _;

use super::{int, short, Report, PEERS};
use crate::libs::Kind;

impl Report<'_> {
    /// The SVG chart: W3w wake-up gaps (log scale) and W2 throughput over the ceiling.
    pub fn svg(&self) -> String {
        let (w, h) = (1000.0, 460.0);
        let colors = ["#1f77b4", "#d62728", "#ff7f0e", "#9467bd"];
        let names = [
            "redisson-lock",
            "rslock 0.10",
            "redisson 0.1",
            "redisson-lock, group commit",
        ];
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
        let rtt = self.med("w0.rtt_us").unwrap_or(f64::NAN);
        let ceiling = self.med("w0.ceiling").unwrap_or(f64::NAN);
        let _ = writeln!(
            s,
            r#"<text x="20" y="24" font-size="16" font-weight="bold">redisson-lock vs peers (median of {} run{}; RTT {rtt:.0} µs, cycle ceiling {} cycles/s)</text>"#,
            self.runs.len(),
            if self.runs.len() == 1 { "" } else { "s" },
            int(ceiling)
        );

        // Panel A: wake-up gap, log scale 0.1 ms .. 1000 ms.
        let (ax, ay, aw, ah) = (70.0, 70.0, 360.0, 320.0);
        let _ = writeln!(
            s,
            r#"<text x="{ax}" y="{}" font-size="14">W3w wake-up gap (release → parked waiter acquires), ms, log scale</text>"#,
            ay - 16.0
        );
        let (lo, hi) = (0.1f64.log10(), 1000f64.log10());
        let ypos = |ms: f64| ay + ah - (ms.max(0.1).log10() - lo) / (hi - lo) * ah;
        for d in [0.1, 1.0, 10.0, 100.0, 1000.0] {
            let y = ypos(d);
            let _ = writeln!(
                s,
                r##"<line x1="{ax}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
                ax + aw
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{d}</text>"#,
                ax - 6.0,
                y + 4.0
            );
        }
        let _ = writeln!(
            s,
            r##"<line x1="{ax}" y1="{}" x2="{}" y2="{}" stroke="#333"/>"##,
            ay + ah,
            ax + aw,
            ay + ah
        );
        if rtt.is_finite() {
            let y = ypos(3.0 * rtt / 1e3);
            let _ = writeln!(
                s,
                r##"<line x1="{ax}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#2ca02c" stroke-dasharray="6,4"/>"##,
                ax + aw
            );
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" fill="#2ca02c">3 RTT</text>"##,
                ax + aw + 4.0,
                y + 4.0
            );
        }
        let group = aw / 3.0;
        for (i, k) in PEERS.iter().enumerate() {
            let gx = ax + group * i as f64;
            for (j, (q, op)) in [("p50", "1"), ("p90", "0.45")].iter().enumerate() {
                let Some(v) = self.med(&format!("w3w.{}.{q}_ms", k.key())) else {
                    let _ = writeln!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}">n/a</text>"#,
                        gx + 30.0,
                        ay + ah - 8.0
                    );
                    continue;
                };
                let x = gx + 18.0 + j as f64 * 40.0;
                let y = ypos(v);
                let _ = writeln!(
                    s,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="36" height="{:.1}" fill="{}" fill-opacity="{op}"/>"#,
                    (ay + ah - y).max(0.0),
                    colors[i]
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
                    x + 18.0,
                    y - 4.0,
                    short(v)
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{q}</text>"#,
                    x + 18.0,
                    ay + ah + 13.0
                );
            }
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                gx + 58.0,
                ay + ah + 30.0,
                names[i]
            );
        }

        // Panel B: W2 throughput / ceiling.
        let (bx, by, bw, bh) = (560.0, 70.0, 400.0, 320.0);
        let _ = writeln!(
            s,
            r#"<text x="{bx}" y="{}" font-size="14">W2 uncontended lock+unlock cycles/s ÷ cycle ceiling</text>"#,
            by - 16.0
        );
        let ymax = 1.2;
        let yb = |r: f64| by + bh - (r.clamp(0.0, ymax) / ymax) * bh;
        for t in [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2] {
            let y = yb(t);
            let _ = writeln!(
                s,
                r##"<line x1="{bx}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
                bx + bw
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{t:.1}</text>"#,
                bx - 6.0,
                y + 4.0
            );
        }
        let y = yb(0.94);
        let _ = writeln!(
            s,
            r##"<line x1="{bx}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#2ca02c" stroke-dasharray="6,4"/>"##,
            bx + bw
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#2ca02c">0.94</text>"##,
            bx + bw + 4.0,
            y + 4.0
        );
        let _ = writeln!(
            s,
            r##"<line x1="{bx}" y1="{}" x2="{}" y2="{}" stroke="#333"/>"##,
            by + bh,
            bx + bw,
            by + bh
        );
        // Group commit's bar beside ours when the run has it.
        let mut bars = PEERS.to_vec();
        if self.med("w2.ours-batch.64.xceil").is_some() {
            bars.push(Kind::OursBatch);
        }
        let ng = self.w2_tasks.len().max(1) as f64;
        let gw = bw / ng;
        for (gi, &n) in self.w2_tasks.iter().enumerate() {
            let gx = bx + gw * gi as f64;
            let barw = (gw - 20.0) / bars.len() as f64;
            for (i, k) in bars.iter().enumerate() {
                let x = gx + 10.0 + barw * i as f64;
                match self.med(&format!("w2.{}.{n}.xceil", k.key())) {
                    Some(v) => {
                        let y = yb(v);
                        let _ = writeln!(
                            s,
                            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                            barw - 2.0,
                            (by + bh - y).max(0.0),
                            colors[i]
                        );
                        let _ = writeln!(
                            s,
                            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{v:.2}</text>"#,
                            x + barw / 2.0 - 1.0,
                            y - 3.0
                        );
                    }
                    None => {
                        let _ = writeln!(
                            s,
                            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">n/a</text>"#,
                            x + barw / 2.0,
                            by + bh - 4.0
                        );
                    }
                }
            }
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{n} task{}</text>"#,
                gx + gw / 2.0,
                by + bh + 16.0,
                if n == 1 { "" } else { "s" }
            );
        }

        // Legend.
        for (i, name) in names.iter().take(bars.len()).enumerate() {
            let x = 70.0 + 150.0 * i as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{x}" y="{}" width="14" height="14" fill="{}"/>"#,
                h - 34.0,
                colors[i]
            );
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}">{name}</text>"#,
                x + 20.0,
                h - 22.0
            );
        }
        let lx = 70.0 + 150.0 * bars.len() as f64;
        let _ = writeln!(
            s,
            r##"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="#2ca02c" stroke-dasharray="6,4"/>"##,
            h - 27.0,
            lx + 30.0,
            h - 27.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">targets: W3w p50 ≤ 3 RTT; W2 64 ≥ 0.94</text>"#,
            lx + 36.0,
            h - 22.0
        );
        s.push_str("</svg>\n");
        s
    }
}
