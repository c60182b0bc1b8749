//! The rows of the one table, a method per workload (W0 .. group commit), in the table's order.

use super::{int, opt, verdict, Report, Rows, PEERS};
use crate::libs::Kind;

impl Report<'_> {
    pub(super) fn w0_rows(&self, t: &mut Rows) {
        // W0
        let rtt = self.med("w0.rtt_us");
        let ceiling = self.med("w0.ceiling");
        let w0 = |k: &str| self.med(&format!("w0.{k}"));
        t.row(
            "W0",
            "EVALSHA lock.lua, redis-benchmark -c 50 -P 16 (scripts/s)",
            opt(w0("p16_rps"), int),
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        t.row(
            "W0",
            "EVALSHA lock.lua, -c 50 -P 1 (scripts/s)",
            opt(w0("p1_rps"), int),
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        t.row(
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
        t.row(
            "W0",
            "cycle ceiling = P16 rate / 2 (cycles/s)",
            opt(ceiling, int),
            [dash(), dash(), dash()],
            "",
            String::new(),
        );
        t.row(
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
        t.row(
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
        t.row(
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
    }

    pub(super) fn w1_rows(&self, t: &mut Rows) {
        // W1
        let rtt = self.med("w0.rtt_us");
        let ours_x = self.med("w1.ours.x2rtt");
        t.row(
            "W1",
            "lock+unlock p50 µs (× 2 RTT)",
            opt(rtt, |r| format!("2 RTT = {:.0}", 2.0 * r)),
            self.per_lib(&|k| self.w1_cell(k), "w1"),
            "≤ 1.15×",
            verdict(ours_x.map(|x| (x <= 1.15, format!("{x:.2}×")))),
        );
        let w1p99 = |k: Kind| {
            self.med(&format!("w1.{}.p99_us", k.key()))
                .map(|v| format!("{v:.0}"))
        };
        t.row(
            "W1",
            "lock+unlock p99 µs",
            String::new(),
            self.per_lib(&w1p99, "w1"),
            "",
            String::new(),
        );
    }

    pub(super) fn w2_rows(&self, t: &mut Rows) {
        // W2
        let ceiling = self.med("w0.ceiling");
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
            t.row(
                "W2",
                &format!(
                    "{n} task{} on distinct names, cycles/s (× ceiling)",
                    if n == 1 { "" } else { "s" }
                ),
                opt(ceiling, |c| format!("ceiling {}", int(c))),
                self.per_lib(&cell, "w2"),
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
            t.row(
                "W2 64",
                label,
                reference,
                self.per_lib(&cell, "w2"),
                "",
                String::new(),
            );
        }
    }

    pub(super) fn w3_rows(&self, t: &mut Rows) {
        // W3
        let rtt = self.med("w0.rtt_us");
        let w3 = |key: &'static str, fmt: fn(f64) -> String| {
            move |k: Kind| self.med(&format!("w3.{}.{key}", k.key())).map(fmt)
        };
        t.row(
            "W3",
            "handoffs/s (2 processes × 4 tasks, one name, 5 s)",
            String::new(),
            self.per_lib(&w3("hps", int), "w3"),
            "",
            String::new(),
        );
        let gap = |k: Kind| {
            let g = self.med(&format!("w3.{}.gap_p50_us", k.key()))?;
            let x = self.med(&format!("w3.{}.gap_xrtt", k.key()))?;
            Some(format!("{g:.0} ({x:.2}×)"))
        };
        t.row(
            "W3",
            "handoff gap p50 µs (× RTT)",
            opt(rtt, |r| format!("RTT {r:.0}")),
            self.per_lib(&gap, "w3"),
            "",
            String::new(),
        );
        t.row(
            "W3",
            "self re-acquire share",
            String::new(),
            self.per_lib(&w3("self_pct", |v| format!("{v:.1} %")), "w3"),
            "",
            String::new(),
        );
        t.row(
            "W3",
            "holders (of 8 tasks) that got the lock",
            String::new(),
            self.per_lib(&w3("holders", |v| format!("{v:.0}")), "w3"),
            "",
            String::new(),
        );
        t.row(
            "W3",
            "wait p99, ms",
            String::new(),
            self.per_lib(&w3("wait_p99_ms", |v| format!("{v:.2}")), "w3"),
            "",
            String::new(),
        );
        let mw = self.med("w3.ours.maxwait_ms");
        t.row(
            "W3",
            "longest single wait, ms",
            String::new(),
            self.per_lib(&w3("maxwait_ms", |v| format!("{v:.1}")), "w3"),
            "≤ 50 ms",
            verdict(mw.map(|v| (v <= 50.0, format!("{v:.1} ms")))),
        );
        let ov = self.max_over_runs("w3.ours.overlaps");
        t.row(
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
    }

    pub(super) fn w3w_rows(&self, t: &mut Rows) {
        // W3w
        let rtt = self.med("w0.rtt_us");
        let wake = |k: Kind| {
            let p = self.med(&format!("w3w.{}.p50_ms", k.key()))?;
            let x = self.med(&format!("w3w.{}.xrtt", k.key()))?;
            Some(format!("{p:.2} ({x:.1}×)"))
        };
        let wx = self.med("w3w.ours.xrtt");
        t.row(
            "W3w",
            "wake gap p50 ms (× RTT)",
            opt(rtt, |r| format!("3 RTT = {:.2} ms", 3.0 * r / 1e3)),
            self.per_lib(&wake, "w3w"),
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
        t.row(
            "W3w",
            "wake gap p50 ÷ cold round trip",
            opt(self.med("w0.cold_rtt_us"), |c| {
                format!("cold RTT {c:.0} µs")
            }),
            self.per_lib(&wake_cold, "w3w"),
            "",
            String::new(),
        );
        t.row(
            "W3w",
            "wake gap p90 / max ms (gaps per run)",
            String::new(),
            self.per_lib(&wake90, "w3w"),
            "",
            String::new(),
        );
        let w3wc = |key: &'static str| {
            move |k: Kind| {
                self.med(&format!("w3w.{}.{key}", k.key()))
                    .map(|v| format!("{v:.0}"))
            }
        };
        t.row(
            "W3w",
            "releaser's unlock call p50, µs",
            opt(rtt, |r| format!("RTT {r:.0}")),
            self.per_lib(&w3wc("unlock_p50_us"), "w3w"),
            "",
            String::new(),
        );
        t.row(
            "W3w",
            "split of our gap (p50 µs): release start → message reaches the waiter's process (probe subscriber)",
            String::new(),
            self.per_lib(&w3wc("delivery_p50_us"), "w3w"),
            "",
            String::new(),
        );
        t.row(
            "W3w",
            "… then message → waiter holds the lock (wake + acquire script)",
            String::new(),
            self.per_lib(&w3wc("wake_p50_us"), "w3w"),
            "",
            String::new(),
        );
    }

    pub(super) fn watchdog_rows(&self, t: &mut Rows) {
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
        t.row(
            "Watchdog",
            "scripts per lock per tick",
            wd_label,
            self.per_lib(&wd("scripts_per_lock_tick", 4), "wd"),
            "≤ 0.01",
            verdict(spt.map(|v| (v <= 0.01 + 1e-9, format!("{v:.4}")))),
        );
        t.row(
            "Watchdog",
            "commands per lock per tick (script-internal included)",
            String::new(),
            self.per_lib(&wd("cmds_per_lock_tick", 2), "wd"),
            "",
            String::new(),
        );
        t.row(
            "Watchdog",
            "client CPU ms per tick",
            String::new(),
            self.per_lib(&wd("client_cpu_ms_per_tick", 1), "wd"),
            "",
            String::new(),
        );
        t.row(
            "Watchdog",
            "server CPU ms per tick",
            String::new(),
            self.per_lib(&wd("server_cpu_ms_per_tick", 1), "wd"),
            "",
            String::new(),
        );
    }

    pub(super) fn many_waiters_rows(&self, t: &mut Rows) {
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
        t.row(
            "Many waiters",
            "subscriber connections (server CLIENT LIST)",
            mw_label,
            self.per_lib(&mwc("sub_conns", 0), "mw"),
            "",
            String::new(),
        );
        t.row(
            "Many waiters",
            "client memory per parked waiter, bytes (RSS delta)",
            String::new(),
            self.per_lib(&mwc("rss_per_waiter", 0), "mw"),
            "",
            String::new(),
        );
        t.row(
            "Many waiters",
            "time until all acquired once, ms",
            String::new(),
            self.per_lib(&mwc("all_ms", 0), "mw"),
            "",
            String::new(),
        );
        t.row(
            "Many waiters",
            "scripts per acquisition during the drain",
            String::new(),
            self.per_lib(&mwc("scripts_per_acq", 2), "mw"),
            "",
            String::new(),
        );
    }

    pub(super) fn redlock_rows(&self, t: &mut Rows) {
        // RedLock
        let rtt = self.med("w0.rtt_us");
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
            t.row(
                "RedLock",
                &format!(
                    "{n} servers: lock+unlock p50 µs (× 2 RTT): RedLock, members tried at once"
                ),
                opt(rtt, |r| format!("2 RTT = {:.0}", 2.0 * r)),
                [cell("conc"), "n/a".into(), "n/a".into()],
                "",
                String::new(),
            );
            t.row(
                "RedLock",
                &format!("{n} servers: the same member RLocks taken one after another (Redisson's order)"),
                String::new(),
                [cell("seq"), "n/a".into(), "n/a".into()],
                "",
                String::new(),
            );
        }
    }

    pub(super) fn cost_rows(&self, t: &mut Rows) {
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
            let w1v = self.w1_cell(k).unwrap_or_else(|| self.missing("w1", k));
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
            t.row(
                "Cost: raw redis-rs",
                label,
                String::new(),
                [format!("W1: {w1v}"), w2v, String::new()],
                "",
                String::new(),
            );
        }

        t.row(
            "Cost: raw redis-rs",
            "minimal pub/sub waiter on our scripts (no local wake, no gate)",
            String::new(),
            [self.w3_summary("raw"), String::new(), String::new()],
            "",
            String::new(),
        );
        let ct = |key: &str| self.med(&format!("w3w.ours-ct.{key}"));
        t.row(
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
    }

    pub(super) fn group_commit_rows(&self, t: &mut Rows) {
        // Group commit (`Config::with_batching(true)`), beside ours and rslock.
        if self.med("w2.ours-batch.64.cps").is_some() {
            let b = |key: &str| self.med(&format!("w1.ours-batch.{key}"));
            t.row(
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
                t.row(
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
                t.row(
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
            t.row(
                "Group commit",
                "ours-batch: W3 and W3w",
                String::new(),
                [self.w3_summary("ours-batch"), String::new(), String::new()],
                "",
                String::new(),
            );
        }
    }

    /// W1's cell: lock+unlock p50 µs and its ratio to two round trips.
    fn w1_cell(&self, k: Kind) -> Option<String> {
        let p50 = self.med(&format!("w1.{}.p50_us", k.key()))?;
        let x = self.med(&format!("w1.{}.x2rtt", k.key()))?;
        Some(format!("{p50:.0} ({x:.2}×)"))
    }

    /// W3 and W3w in one cell, for the cost and group-commit rows.
    fn w3_summary(&self, k: &str) -> String {
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
    }
}

/// The cell of a figure that only the reference column has.
fn dash() -> String {
    "—".to_string()
}
