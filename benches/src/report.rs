//! The one table (markdown) and the SVG chart, from the medians over runs.

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

    pub fn table(&self) -> String {
        let mut rows: Vec<[String; 8]> = Vec::new();
        let dash = || "—".to_string();
        let rtt = self.med("w0.rtt_us");
        let ceiling = self.med("w0.ceiling");
        let mut row = |wl: &str,
                       fig: &str,
                       reference: String,
                       cells: [String; 3],
                       target: &str,
                       met: String| {
            let [a, b, c] = cells;
            rows.push([
                wl.into(),
                fig.into(),
                reference,
                a,
                b,
                c,
                target.into(),
                met,
            ]);
        };
        let per_lib = |f: &dyn Fn(Kind) -> Option<String>, wl: &str| -> [String; 3] {
            PEERS.map(|k| f(k).unwrap_or_else(|| self.missing(wl, k)))
        };

        // W0
        let w0 = |k: &str| self.med(&format!("w0.{k}"));
        row(
            "W0",
            "EVALSHA lock.lua, redis-benchmark -c 50 -P 16 (scripts/s)",
            opt(w0("p16_rps"), int),
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        row(
            "W0",
            "EVALSHA lock.lua, -c 50 -P 1 (scripts/s)",
            opt(w0("p1_rps"), int),
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        row(
            "W0",
            "RTT = -c 1 p50 latency, µs (p99)",
            match (rtt, w0("c1_p99_us")) {
                (Some(a), Some(b)) => format!("{a:.0} ({b:.0})"),
                _ => "?".into(),
            },
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        row(
            "W0",
            "cycle ceiling = P16 rate / 2 (cycles/s)",
            opt(ceiling, int),
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        row(
            "W0",
            "same script, sequential, through redis-rs: p50 µs (× RTT)",
            match (w0("rs_rtt_us"), rtt) {
                (Some(a), Some(r)) => format!("{a:.0} ({:.2}×)", a / r),
                _ => "?".into(),
            },
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        row(
            "W0",
            "same, after 100 ms idle (cold: threads and vCPUs asleep): p50 µs (× RTT)",
            match (w0("cold_rtt_us"), rtt) {
                (Some(a), Some(r)) => format!("{a:.0} ({:.2}×)", a / r),
                _ => "?".into(),
            },
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        row(
            "W0",
            "server CPU per lock script at P16, µs (commandstats µs/call)",
            match (w0("server_us_per_script"), w0("evalsha_usec_per_call")) {
                (Some(a), Some(b)) => format!("{a:.2} ({b:.2})"),
                _ => "?".into(),
            },
            [dash(), dash(), dash()],
            "",
            String::new(),
        );

        // W1
        let w1 = |k: Kind| {
            let p50 = self.med(&format!("w1.{}.p50_us", k.key()))?;
            let x = self.med(&format!("w1.{}.x2rtt", k.key()))?;
            Some(format!("{p50:.0} ({x:.2}×)"))
        };
        let ours_x = self.med("w1.ours.x2rtt");
        row(
            "W1",
            "lock+unlock p50 µs (× 2 RTT)",
            opt(rtt, |r| format!("2 RTT = {:.0}", 2.0 * r)),
            per_lib(&w1, "w1"),
            "≤ 1.15×",
            verdict(ours_x.map(|x| (x <= 1.15, format!("{x:.2}×")))),
        );
        let w1p99 = |k: Kind| {
            self.med(&format!("w1.{}.p99_us", k.key()))
                .map(|v| format!("{v:.0}"))
        };
        row(
            "W1",
            "lock+unlock p99 µs",
            String::new(),
            per_lib(&w1p99, "w1"),
            "",
            String::new(),
        );

        // W2
        for &n in self.w2_tasks {
            let cell = |k: Kind| {
                let cps = self.med(&format!("w2.{}.{n}.cps", k.key()))?;
                let x = self.med(&format!("w2.{}.{n}.xceil", k.key()))?;
                Some(format!("{} ({x:.2})", int(cps)))
            };
            let (target, met) = if n == 64 {
                let ours = self.med("w2.ours.64.xceil");
                let ours_cps = self.med("w2.ours.64.cps");
                let rs = self.med("w2.rslock.64.cps");
                let ok = match (ours, ours_cps, rs) {
                    (Some(x), Some(o), Some(r)) => {
                        Some((x >= 0.94 && o > r, format!("{x:.2}, {:.2}× rslock", o / r)))
                    }
                    (Some(x), _, None) => Some((x >= 0.94, format!("{x:.2}"))),
                    _ => None,
                };
                ("≥ 0.94 and > rslock", verdict(ok))
            } else {
                ("", String::new())
            };
            row(
                "W2",
                &format!(
                    "{n} task{} on distinct names, cycles/s (× ceiling)",
                    if n == 1 { "" } else { "s" }
                ),
                opt(ceiling, |c| format!("ceiling {}", int(c))),
                per_lib(&cell, "w2"),
                target,
                met,
            );
        }
        let costs: [(&str, &str, usize); 5] = [
            ("server_us", "server CPU µs per cycle", 2),
            ("client_us", "bench-process CPU µs per cycle", 1),
            ("allocs", "bench-process heap allocations per cycle", 1),
            ("cmds", "commands per cycle (script-internal included)", 2),
            ("server_util", "server CPU busy (share of one core)", 2),
        ];
        for (key, label, digits) in costs {
            let cell = |k: Kind| {
                self.med(&format!("w2.{}.64.{key}", k.key()))
                    .map(|v| format!("{v:.digits$}"))
            };
            let reference = if key == "server_us" {
                opt(self.med("w0.server_us_per_script"), |v| {
                    format!("2 × {v:.2} = {:.2}", 2.0 * v)
                })
            } else {
                String::new()
            };
            row(
                "W2 64",
                label,
                reference,
                per_lib(&cell, "w2"),
                "",
                String::new(),
            );
        }

        // W3
        let w3 = |key: &'static str, fmt: fn(f64) -> String| {
            move |k: Kind| self.med(&format!("w3.{}.{key}", k.key())).map(fmt)
        };
        row(
            "W3",
            "handoffs/s (2 processes × 4 tasks, one name, 5 s)",
            String::new(),
            per_lib(&w3("hps", int), "w3"),
            "",
            String::new(),
        );
        let gap = |k: Kind| {
            let g = self.med(&format!("w3.{}.gap_p50_us", k.key()))?;
            let x = self.med(&format!("w3.{}.gap_xrtt", k.key()))?;
            Some(format!("{g:.0} ({x:.2}×)"))
        };
        row(
            "W3",
            "handoff gap p50 µs (× RTT)",
            opt(rtt, |r| format!("RTT {r:.0}")),
            per_lib(&gap, "w3"),
            "",
            String::new(),
        );
        row(
            "W3",
            "self re-acquire share",
            String::new(),
            per_lib(&w3("self_pct", |v| format!("{v:.1} %")), "w3"),
            "",
            String::new(),
        );
        row(
            "W3",
            "holders (of 8 tasks) that got the lock",
            String::new(),
            per_lib(&w3("holders", |v| format!("{v:.0}")), "w3"),
            "",
            String::new(),
        );
        row(
            "W3",
            "wait p99, ms",
            String::new(),
            per_lib(&w3("wait_p99_ms", |v| format!("{v:.2}")), "w3"),
            "",
            String::new(),
        );
        let mw = self.med("w3.ours.maxwait_ms");
        row(
            "W3",
            "longest single wait, ms",
            String::new(),
            per_lib(&w3("maxwait_ms", |v| format!("{v:.1}")), "w3"),
            "≤ 50 ms",
            verdict(mw.map(|v| (v <= 50.0, format!("{v:.1} ms")))),
        );
        let ov = self.max_over_runs("w3.ours.overlaps");
        row(
            "W3",
            "overlapping holds (all runs)",
            String::new(),
            PEERS.map(|k| {
                opt(
                    self.max_over_runs(&format!("w3.{}.overlaps", k.key())),
                    |v| format!("{v:.0}"),
                )
            }),
            "0",
            verdict(ov.map(|v| (v == 0.0, format!("{v:.0}")))),
        );

        // W3w
        let wake = |k: Kind| {
            let p = self.med(&format!("w3w.{}.p50_ms", k.key()))?;
            let x = self.med(&format!("w3w.{}.xrtt", k.key()))?;
            Some(format!("{p:.2} ({x:.1}×)"))
        };
        let wx = self.med("w3w.ours.xrtt");
        row(
            "W3w",
            "wake gap p50 ms (× RTT)",
            opt(rtt, |r| format!("3 RTT = {:.2} ms", 3.0 * r / 1e3)),
            per_lib(&wake, "w3w"),
            "≤ 3 RTT",
            verdict(wx.map(|x| (x <= 3.0, format!("{x:.1}×")))),
        );
        let wake90 = |k: Kind| {
            let p = self.med(&format!("w3w.{}.p90_ms", k.key()))?;
            let m = self.med(&format!("w3w.{}.max_ms", k.key()))?;
            let n = self.med(&format!("w3w.{}.n", k.key()))?;
            Some(format!("{p:.2} / {m:.2} (n={n:.0})"))
        };
        let wake_cold = |k: Kind| {
            self.med(&format!("w3w.{}.xcold", k.key()))
                .map(|v| format!("{v:.1}×"))
        };
        row(
            "W3w",
            "wake gap p50 ÷ cold round trip",
            opt(w0("cold_rtt_us"), |c| format!("cold RTT {c:.0} µs")),
            per_lib(&wake_cold, "w3w"),
            "",
            String::new(),
        );
        row(
            "W3w",
            "wake gap p90 / max ms (gaps per run)",
            String::new(),
            per_lib(&wake90, "w3w"),
            "",
            String::new(),
        );
        let w3wc = |key: &'static str| {
            move |k: Kind| {
                self.med(&format!("w3w.{}.{key}", k.key()))
                    .map(|v| format!("{v:.0}"))
            }
        };
        row(
            "W3w",
            "releaser's unlock call p50, µs",
            opt(rtt, |r| format!("RTT {r:.0}")),
            per_lib(&w3wc("unlock_p50_us"), "w3w"),
            "",
            String::new(),
        );
        row(
            "W3w",
            "split of our gap (p50 µs): release start → message reaches the waiter's process (probe subscriber)",
            String::new(),
            per_lib(&w3wc("delivery_p50_us"), "w3w"),
            "",
            String::new(),
        );
        row(
            "W3w",
            "… then message → waiter holds the lock (wake + acquire script)",
            String::new(),
            per_lib(&w3wc("wake_p50_us"), "w3w"),
            "",
            String::new(),
        );

        // Watchdog
        let wd = |key: &'static str, digits: usize| {
            move |k: Kind| {
                if k != Kind::Ours {
                    return None;
                }
                self.med(&format!("wd.{key}"))
                    .map(|v| format!("{v:.digits$}"))
            }
        };
        let wd_label = match (self.med("wd.locks"), self.med("wd.tick_s")) {
            (Some(n), Some(t)) => format!("{} locks, tick {t:.1} s", int(n)),
            _ => String::new(),
        };
        let spt = self.med("wd.scripts_per_lock_tick");
        row(
            "Watchdog",
            "scripts per lock per tick",
            wd_label,
            per_lib(&wd("scripts_per_lock_tick", 4), "wd"),
            "≤ 0.01",
            verdict(spt.map(|v| (v <= 0.01 + 1e-9, format!("{v:.4}")))),
        );
        row(
            "Watchdog",
            "commands per lock per tick (script-internal included)",
            String::new(),
            per_lib(&wd("cmds_per_lock_tick", 2), "wd"),
            "",
            String::new(),
        );
        row(
            "Watchdog",
            "client CPU ms per tick",
            String::new(),
            per_lib(&wd("client_cpu_ms_per_tick", 1), "wd"),
            "",
            String::new(),
        );
        row(
            "Watchdog",
            "server CPU ms per tick",
            String::new(),
            per_lib(&wd("server_cpu_ms_per_tick", 1), "wd"),
            "",
            String::new(),
        );

        // Many waiters
        let mw_label = match (self.med("mw.waiters"), self.med("mw.names")) {
            (Some(w), Some(n)) => format!("{} waiters, {} names", int(w), int(n)),
            _ => String::new(),
        };
        let mwc = |key: &'static str, digits: usize| {
            move |k: Kind| {
                if k != Kind::Ours {
                    return None;
                }
                self.med(&format!("mw.{key}"))
                    .map(|v| format!("{v:.digits$}"))
            }
        };
        row(
            "Many waiters",
            "subscriber connections (server CLIENT LIST)",
            mw_label,
            per_lib(&mwc("sub_conns", 0), "mw"),
            "",
            String::new(),
        );
        row(
            "Many waiters",
            "client memory per parked waiter, bytes (RSS delta)",
            String::new(),
            per_lib(&mwc("rss_per_waiter", 0), "mw"),
            "",
            String::new(),
        );
        row(
            "Many waiters",
            "time until all acquired once, ms",
            String::new(),
            per_lib(&mwc("all_ms", 0), "mw"),
            "",
            String::new(),
        );
        row(
            "Many waiters",
            "scripts per acquisition during the drain",
            String::new(),
            per_lib(&mwc("scripts_per_acq", 2), "mw"),
            "",
            String::new(),
        );

        // RedLock
        for n in [3, 5] {
            let cell = |label: &str| -> String {
                let p50 = self.med(&format!("rl.{n}.{label}.p50_us"));
                let p99 = self.med(&format!("rl.{n}.{label}.p99_us"));
                let x = self.med(&format!("rl.{n}.{label}.x2rtt"));
                match (p50, p99, x) {
                    (Some(a), Some(b), Some(x)) => format!("{a:.0} ({x:.2}×), p99 {b:.0}"),
                    _ => self.missing("rl", Kind::Ours),
                }
            };
            row(
                "RedLock",
                &format!(
                    "{n} servers: lock+unlock p50 µs (× 2 RTT): RedLock, members tried at once"
                ),
                opt(rtt, |r| format!("2 RTT = {:.0}", 2.0 * r)),
                [cell("conc"), "n/a".into(), "n/a".into()],
                "",
                String::new(),
            );
            row(
                "RedLock",
                &format!("{n} servers: the same member RLocks taken one after another (Redisson's order)"),
                String::new(),
                [cell("seq"), "n/a".into(), "n/a".into()],
                "",
                String::new(),
            );
        }

        // Cost analysis: our commands without our lock logic.
        // Since the latch-free unlock (issue 11 item 2) lua/unlock.lua writes no latch, so the
        // latch handling of `raw` and `raw-spawndel` deletes keys nobody wrote: what it prices
        // now is the deletion traffic ours used to send.
        let raw: [(Kind, &str); 4] = [
            (
                Kind::Raw,
                "lock + unlock EVALSHA + an UNLINK per 10 ms of latch names (the old latch reaper's traffic; the unlock writes none)",
            ),
            (
                Kind::RawSpawnDel,
                "lock + unlock EVALSHA + a spawned DEL per unlock (Redisson's latch deletion, of a key our unlock no longer writes)",
            ),
            (
                Kind::RawNoDel,
                "lock + unlock EVALSHA of lua/ as shipped, nothing else (= ours on the wire)",
            ),
            (
                Kind::RawNoLatch,
                "lock + unlock EVALSHA, the unlock inlined in the bench (the same commands)",
            ),
        ];
        for (k, label) in raw {
            let w1v = w1(k).unwrap_or_else(|| self.missing("w1", k));
            let w2v = (|| {
                let cps = self.med(&format!("w2.{}.64.cps", k.key()))?;
                let x = self.med(&format!("w2.{}.64.xceil", k.key()))?;
                let s = self.med(&format!("w2.{}.64.server_us", k.key()))?;
                let c = self.med(&format!("w2.{}.64.client_us", k.key()))?;
                let a = self
                    .med(&format!("w2.{}.64.allocs", k.key()))
                    .map_or(String::new(), |a| format!(", {a:.1} allocations"));
                Some(format!(
                    "W2 64: {} ({x:.2}); server {s:.2} µs, client {c:.1} µs{a}/cycle",
                    int(cps)
                ))
            })()
            .unwrap_or_else(|| self.missing("w2", k));
            row(
                "Cost: raw redis-rs",
                label,
                String::new(),
                [format!("W1: {w1v}"), w2v, String::new()],
                "",
                String::new(),
            );
        }

        let wait = |k: &str| -> String {
            let hps = self.med(&format!("w3.{k}.hps"));
            let mw = self.med(&format!("w3.{k}.maxwait_ms"));
            let sp = self.med(&format!("w3.{k}.self_pct"));
            let ww = self.med(&format!("w3w.{k}.p50_ms"));
            let wx = self.med(&format!("w3w.{k}.xrtt"));
            format!(
                "W3: {} handoffs/s, self {} %, longest wait {} ms; W3w p50 {} ms ({}× RTT)",
                opt(hps, int),
                opt(sp, |v| format!("{v:.1}")),
                opt(mw, |v| format!("{v:.1}")),
                opt(ww, |v| format!("{v:.2}")),
                opt(wx, |v| format!("{v:.1}"))
            )
        };
        row(
            "Cost: raw redis-rs",
            "minimal pub/sub waiter on our scripts (no local wake, no gate)",
            String::new(),
            [wait("raw"), String::new(), String::new()],
            "",
            String::new(),
        );
        let ct = |key: &str| self.med(&format!("w3w.ours-ct.{key}"));
        row(
            "Cost: runtime",
            "ours, both W3w processes on tokio's current-thread runtime",
            String::new(),
            [
                match (ct("p50_ms"), ct("xrtt"), ct("unlock_p50_us")) {
                    (Some(p), Some(x), Some(u)) => {
                        format!("W3w p50 {p:.2} ms ({x:.1}× RTT); unlock call {u:.0} µs")
                    }
                    _ => self.missing("w3w", Kind::Ours),
                },
                String::new(),
                String::new(),
            ],
            "",
            String::new(),
        );

        // Group commit (`Config::with_batching(true)`), beside ours and rslock.
        if self.med("w2.ours-batch.64.cps").is_some() {
            let b = |key: &str| self.med(&format!("w1.ours-batch.{key}"));
            row(
                "Group commit",
                "ours-batch: W1 lock+unlock p50 µs (× 2 RTT; × ours)",
                String::new(),
                [
                    match (b("p50_us"), b("x2rtt"), self.med("w1.ours.p50_us")) {
                        (Some(p), Some(x), Some(o)) => {
                            format!("{p:.0} ({x:.2}×; {:.2}× ours)", p / o)
                        }
                        _ => self.missing("w1", Kind::OursBatch),
                    },
                    String::new(),
                    String::new(),
                ],
                "",
                String::new(),
            );
            for &n in self.w2_tasks {
                let cps = |k: &str| self.med(&format!("w2.{k}.{n}.cps"));
                let cell = match (cps("ours-batch"), cps("ours"), cps("rslock")) {
                    (Some(b), Some(o), Some(r)) => {
                        format!("{} ({:.2}× ours, {:.2}× rslock)", int(b), b / o, b / r)
                    }
                    (Some(b), _, _) => int(b),
                    _ => self.missing("w2", Kind::OursBatch),
                };
                row(
                    "Group commit",
                    &format!(
                        "ours-batch: W2 {n} task{}, cycles/s",
                        if n == 1 { "" } else { "s" }
                    ),
                    String::new(),
                    [cell, String::new(), String::new()],
                    "",
                    String::new(),
                );
            }
            let per = |k: &str| {
                let s = self.med(&format!("w2.ours-batch.{k}.server_us"))?;
                let c = self.med(&format!("w2.ours-batch.{k}.client_us"))?;
                let e = self.med(&format!("w2.ours-batch.{k}.cmds"))?;
                Some(format!(
                    "server {s:.2} µs, client {c:.1} µs, {e:.2} commands"
                ))
            };
            for n in [64, 256] {
                row(
                    "Group commit",
                    &format!("ours-batch: W2 {n} per cycle"),
                    String::new(),
                    [
                        per(&n.to_string()).unwrap_or_else(|| self.missing("w2", Kind::OursBatch)),
                        String::new(),
                        String::new(),
                    ],
                    "",
                    String::new(),
                );
            }
            row(
                "Group commit",
                "ours-batch: W3 and W3w",
                String::new(),
                [wait("ours-batch"), String::new(), String::new()],
                "",
                String::new(),
            );
        }

        let mut out = String::new();
        out.push_str("| workload | figure | reference (same run) | redisson-lock | rslock 0.10 | redisson 0.1 | target | met |\n");
        out.push_str("|---|---|---|---|---|---|---|---|\n");
        for r in rows {
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
