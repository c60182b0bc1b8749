//! What a round found ([`RoundOutcome`]: the checker's report, classified) and what a campaign
//! found ([`Campaign`]: every round aggregated, as Markdown and JSON).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;

use super::plan::{FaultClass, Lang, Round};
use crate::failovers::FailoverOutcome;
use crate::support::checker::{Fault, Hold, Report};

/// One round, checked.
#[derive(Debug)]
pub struct RoundOutcome {
    pub round: Round,
    pub report: Report,
    /// Every injected fault, on the holders' CLOCK_MONOTONIC timeline.
    pub faults: Vec<Fault>,
    /// Faults injected per kind (idle draws included, as `idle`).
    pub counts: HashMap<&'static str, u32>,
    /// Each holder process's language.
    pub langs: HashMap<u32, Lang>,
    /// Holders that did not exit cleanly.
    pub unclean: Vec<u32>,
    /// Overlapping pairs with a hold reported lost.
    pub overlaps_lost: usize,
    /// Overlapping pairs nobody was told about, explained by a fault outside the model.
    pub overlaps_outside: usize,
    /// Overlapping pairs explained by nothing: a mutual-exclusion violation.
    pub overlaps_unexplained: usize,
    /// Holds reported lost with no fault that can lose holds to explain it.
    pub lost_unexplained: usize,
    /// Increments missing from the counter, and whether the lost holds (and outside faults)
    /// explain them.
    pub lost_updates: i64,
    pub lost_updates_explained: bool,
    pub stale_rejected: usize,
    pub stale_accepted: usize,
    /// Time from a failover to the holders' `lost()` (failover rounds fill it), ms: holders
    /// with failover awareness (the "after" figure).
    pub detect_ms: Vec<f64>,
    /// The same for holders without it, on the same switches (the "before" figure).
    pub detect_blind_ms: Vec<f64>,
    /// Holds a switch cost that holders without awareness were never told of before the round
    /// ended.
    pub untold_blind: usize,
    /// Time from the end of each fault to the next hold taken, ms, by fault kind.
    pub retake_ms: Vec<(&'static str, f64)>,
    /// What must hold and did not (empty: the round passed).
    pub violations: Vec<String>,
    pub notes: Vec<String>,
    /// The histories, kept for inspection when the round failed.
    pub kept: Option<PathBuf>,
}

impl RoundOutcome {
    pub fn new(
        round: Round,
        report: Report,
        faults: Vec<Fault>,
        counts: HashMap<&'static str, u32>,
        langs: HashMap<u32, Lang>,
        unclean: Vec<u32>,
    ) -> RoundOutcome {
        let topology = round.topology();
        let outside =
            |f: &Fault| FaultClass::by_name(f.kind).is_some_and(|c| c.outside_model(topology));
        let touches = |f: &Fault, a: &Hold, b: &Hold| {
            let from = a.start.min(b.start);
            let to = a
                .end
                .unwrap_or(u64::MAX)
                .max(b.end.unwrap_or(u64::MAX))
                .saturating_add(200_000_000);
            f.target.is_none_or(|p| p == a.pid || p == b.pid) && f.start <= to && f.end >= from
        };
        let (mut overlaps_lost, mut overlaps_outside, mut overlaps_unexplained) = (0, 0, 0);
        let stale_accepted = stale_accepted(&report);
        for &(i, j) in &report.overlaps {
            let (a, b) = (&report.holds[i], &report.holds[j]);
            if a.lost || b.lost {
                overlaps_lost += 1;
            } else if faults.iter().any(|f| outside(f) && touches(f, a, b)) {
                overlaps_outside += 1;
            } else {
                overlaps_unexplained += 1;
            }
        }
        let lost = report.lost_holds() as i64;
        // A killed holder, or one cut off from everything, may have written without hearing
        // back (the write applied, its history line never written).
        let kills = faults
            .iter()
            .filter(|f| {
                matches!(
                    f.kind,
                    "kill9" | "cut holder" | "cut holder, past the lease"
                )
            })
            .count() as i64;
        let extra = report.counter - report.increments as i64;
        // Each lost hold (or unreported overlap outside the model) may overwrite one other
        // increment; a killed holder may die between its write and its history line.
        let lost_updates = (-extra).max(0);
        let lost_updates_explained = (-(lost + overlaps_outside as i64)..=kills).contains(&extra);
        let unexplained = report.unexplained_lost(&faults);
        let renewal_dropped = unexplained
            .iter()
            .filter(|h| renewal_dropped_by_redisson(h, &report.holds, &faults, &langs))
            .count();
        let lost_unexplained = unexplained.len() - renewal_dropped;

        let mut starts: Vec<u64> = report.holds.iter().map(|h| h.start).collect();
        starts.sort_unstable();
        let retake_ms = faults
            .iter()
            .filter(|f| !f.kind.starts_with("clock"))
            .filter_map(|f| {
                let next = starts[starts.partition_point(|&s| s <= f.end)..].first()?;
                Some((f.kind, (next - f.end) as f64 / 1e6))
            })
            .collect();

        let mut out = RoundOutcome {
            round,
            report,
            faults,
            counts,
            langs,
            unclean,
            overlaps_lost,
            overlaps_outside,
            overlaps_unexplained,
            lost_unexplained,
            lost_updates,
            lost_updates_explained,
            stale_rejected: 0,
            stale_accepted,
            detect_ms: Vec::new(),
            detect_blind_ms: Vec::new(),
            untold_blind: 0,
            retake_ms,
            violations: Vec::new(),
            notes: Vec::new(),
            kept: None,
        };
        out.stale_rejected = out.report.fenced_rejected;
        if renewal_dropped > 0 {
            out.notes.push(format!(
                "{renewal_dropped} Redisson hold(s) lost within {} s after a fault that cost the \
                 holder's hold before: Redisson's renewal dropped for the next hold (outside \
                 the model, docs/reliability.md)",
                REDISSON_STALE_RENEWAL_NS / 1_000_000_000
            ));
        }
        out.violations = out.check();
        out.notes.extend(out.clock_note());
        out
    }

    /// What must hold whatever the schedule.
    fn check(&self) -> Vec<String> {
        let r = &self.report;
        let mut v = Vec::new();
        if !self.unclean.is_empty() {
            v.push(format!(
                "holders did not finish cleanly: {:?}",
                self.unclean
            ));
        }
        if !r.fencing_errors.is_empty() {
            v.push(format!("fencing violated: {:?}", r.fencing_errors));
        }
        if self.stale_accepted > r.fencing_errors.len() {
            v.push("a stale fenced write was accepted during an overlap".into());
        }
        if self.overlaps_unexplained > 0 {
            let pairs: Vec<_> = r
                .overlaps
                .iter()
                .map(|&(a, b)| (&r.holds[a], &r.holds[b]))
                .filter(|(a, b)| !a.lost && !b.lost)
                .take(3)
                .collect();
            v.push(format!(
                "{} overlapping holds with neither reported lost nor a fault outside the \
                 model: {pairs:#?}",
                self.overlaps_unexplained
            ));
        }
        if self.lost_unexplained > 0 {
            v.push(format!(
                "{} holds lost with no injected fault to explain it (is the watchdog renewing?)",
                self.lost_unexplained
            ));
        }
        if r.unstable_reads > 0 && r.lost_holds() == 0 && self.overlaps_outside == 0 {
            v.push("a read hold saw a write without any lost hold".into());
        }
        if !self.lost_updates_explained {
            v.push(format!(
                "lost update: counter {} after {} increments ({} holds lost, {} killed)",
                r.counter,
                r.increments,
                r.lost_holds(),
                self.counts.get("kill9").copied().unwrap_or(0)
            ));
        }
        // Progress: a hold per holder; where the lock server is away most of the round (long
        // stops back to back: seen 10 s of 12 with the server stopped, and Java writers took
        // none), at least one hold: the system is not stuck.
        let needed = match self.round.class() {
            FaultClass::ServerLongPause | FaultClass::Partition => 1,
            _ => self.round.holders,
        };
        if r.holds.len() < needed {
            v.push(format!("no progress: {} holds", r.holds.len()));
        }
        v
    }

    /// For a clock round: what the skewed holder's holds did.
    fn clock_note(&self) -> Option<String> {
        let rate = self.round.clock()?;
        let f = self.faults.iter().find(|f| f.kind.starts_with("clock"))?;
        let pid = f.target?;
        let mine: Vec<&Hold> = self.report.holds.iter().filter(|h| h.pid == pid).collect();
        let lost = mine.iter().filter(|h| h.lost).count();
        let guard = mine.iter().filter(|h| h.guard_lost).count();
        let overlapping = self
            .report
            .overlaps
            .iter()
            .filter(|&&(a, b)| self.report.holds[a].pid == pid || self.report.holds[b].pid == pid)
            .count();
        let rejected = mine.iter().filter(|h| h.fenced == Some(false)).count();
        Some(format!(
            "{}: the skewed holder took {} holds: {lost} reported lost ({guard} by the guard \
             before release, the rest by the release), {overlapping} overlapped another hold, \
             {rejected} of its fenced writes rejected",
            rate.faketime().trim_start_matches("+0 "),
            mine.len()
        ))
    }
}

/// Fencing violations, and overlapping holds whose writes the fenced resource both accepted
/// with the later one's token lower. "Later" by the holders' start lines, written after the
/// grant's reply: only when they are more than [`GRANT_ORDER_NS`] apart (two grants racing for
/// an evicted lock, 10 ms apart, had their start lines the other way round: the holder of the
/// lower token wrote its line last; both writes in token order, rightly accepted).
fn stale_accepted(report: &Report) -> usize {
    let mut n = report.fencing_errors.len();
    for &(i, j) in &report.overlaps {
        let (a, b) = (&report.holds[i], &report.holds[j]);
        let (first, then) = if a.start <= b.start { (a, b) } else { (b, a) };
        if first.fenced == Some(true)
            && then.fenced == Some(true)
            && first.token > then.token
            && then.start - first.start > GRANT_ORDER_NS
        {
            n += 1;
        }
    }
    n
}

/// How far apart two holds' start lines must be to say which was granted first.
const GRANT_ORDER_NS: u64 = 1_000_000_000;

/// How long after a fault a Redisson holder's next hold may lose its renewal to it: the reply
/// of a renewal sent during the fault (Redisson's reply timeout and one retry: 2.2 s here)
/// that finds the lock gone cancels the renewal of the lock's name for that thread, which by
/// then may belong to a hold taken after the fault (redisson/redisson#6844, #2515, #3714:
/// "the lock is never renewed" after a failed renewal). The crate had the same bug and fixed it
/// (docs/reliability.md, bug 7); Rust holds never get this excuse.
const REDISSON_STALE_RENEWAL_NS: u64 = 3_000_000_000;

/// How soon after a Redisson hold reported lost its renewal entry may still fire: Redisson
/// drops the entry when a renewal's reply finds the lock gone, the first renewal after the
/// loss (a third of the 1.5 s lease, plus the 1 s reply timeout). A server stop that begins
/// within this catches that renewal, as if the holder had held through it.
const REDISSON_STALE_ENTRY_NS: u64 = 2_000_000_000;

/// Whether `hold`, lost with no fault during it, is a Redisson holder's taken within
/// [`REDISSON_STALE_RENEWAL_NS`] after a fault that can lose holds (on it or the server)
/// during an earlier hold of the same holder (whose renewal was then in flight), or, for a
/// server fault, beginning within [`REDISSON_STALE_ENTRY_NS`] after an earlier hold of the same
/// holder that was reported lost (its renewal entry still firing: seen in the 2026-12-07 Valkey
/// run, a read hold taken 7 ms after a stop, never renewed).
fn renewal_dropped_by_redisson(
    hold: &Hold,
    holds: &[Hold],
    faults: &[Fault],
    langs: &HashMap<u32, Lang>,
) -> bool {
    let held_during = |f: &Fault| {
        holds.iter().any(|p| {
            p.pid == hold.pid
                && p.start < hold.start
                && p.start <= f.end
                && p.end_or(u64::MAX) >= f.start
        })
    };
    let lost_just_before = |f: &Fault| {
        f.target.is_none()
            && holds.iter().any(|p| {
                p.pid == hold.pid
                    && p.lost
                    && p.start < hold.start
                    && p.end_or(u64::MAX) <= f.start
                    && f.start - p.end_or(u64::MAX) <= REDISSON_STALE_ENTRY_NS
            })
    };
    langs.get(&hold.pid).is_some_and(|l| *l != Lang::Rust)
        && faults.iter().any(|f| {
            f.can_lose
                && f.target.is_none_or(|pid| pid == hold.pid)
                && f.end <= hold.start
                && hold.start - f.end <= REDISSON_STALE_RENEWAL_NS
                && (held_during(f) || lost_just_before(f))
        })
}

impl RoundOutcome {
    /// A failover round (`failovers.rs`): its groups' reports as one (the holds of every
    /// lock), classified by the failover round's own reading (an overlap is explained by a hold
    /// told lost or by a hold a switch outside the model cost), its violations those of
    /// `failovers::round_violations`, its time-to-detect split by awareness.
    pub fn from_failover(round: Round, out: &FailoverOutcome) -> RoundOutcome {
        let mut report = Report::default();
        let (mut overlaps_lost, mut overlaps_outside, mut overlaps_unexplained) = (0, 0, 0);
        let (mut lost_unexplained, mut lost_updates, mut explained) = (0, 0, true);
        let (mut detect_ms, mut detect_blind_ms, mut untold_blind) = (Vec::new(), Vec::new(), 0);
        let mut stale = 0;
        let mut retake_ms = Vec::new();
        let mut langs = HashMap::new();
        let mut notes = Vec::new();
        let lang = round.lang;
        for g in &out.groups {
            let r = &g.report;
            stale += stale_accepted(r);
            let n = r.overlaps.len();
            let lost = r
                .overlaps
                .iter()
                .filter(|&&(a, b)| r.holds[a].lost || r.holds[b].lost)
                .count();
            overlaps_unexplained += g.unexplained_overlaps.len();
            overlaps_lost += lost;
            overlaps_outside += n.saturating_sub(lost + g.unexplained_overlaps.len());
            let (excused, rest): (Vec<&Hold>, Vec<&Hold>) = r
                .unexplained_lost(&out.faults)
                .into_iter()
                .partition(|h| crate::failovers::synced_unlock_by_redisson(g, h, &out.faults));
            lost_unexplained += rest.len();
            if !excused.is_empty() {
                notes.push(format!(
                    "{} Redisson 3.52.0 hold(s) of {} said lost at the unlock, held just \
                     before, after a switch: its replica check (outside the model, \
                     docs/reliability.md anomaly 3)",
                    excused.len(),
                    g.spec.lock
                ));
            }
            // Each hold told lost or cost by a switch may overwrite one increment; every holder
            // is killed at the end and may die between its write and its history line.
            let extra = r.counter - r.increments as i64;
            lost_updates += (-extra).max(0);
            let slack = (r.lost_holds() + g.affected.len()) as i64;
            explained &= (-slack..=g.spec.holders as i64).contains(&extra);
            let ms = g.detect_ms.iter().map(|&d| d as f64);
            if g.spec.aware {
                detect_ms.extend(ms);
            } else {
                detect_blind_ms.extend(ms);
                untold_blind += g.unreported.len();
            }
            let mut starts: Vec<u64> = r.holds.iter().map(|h| h.start).collect();
            starts.sort_unstable();
            for f in &out.faults {
                if let Some(next) = starts.iter().find(|&&s| s > f.end) {
                    retake_ms.push((f.kind, (next - f.end) as f64 / 1e6));
                }
            }
            for h in &r.holds {
                let l = g.langs.get(&h.pid).and_then(|n| Lang::from_name(n));
                langs.insert(h.pid, l.unwrap_or(lang));
            }
            notes.push(format!(
                "lock {} aware={} sync={}: {} holds, {} lost, {} cost by a switch, {} never \
                 told, detect {}",
                g.spec.lock,
                g.spec.aware,
                g.spec.sync,
                r.holds.len(),
                r.lost_holds(),
                g.affected.len(),
                g.unreported.len(),
                crate::failovers::figure(&g.detect_ms)
            ));
            let base = report.holds.len();
            report.holds.extend(r.holds.iter().cloned());
            report
                .overlaps
                .extend(r.overlaps.iter().map(|&(a, b)| (a + base, b + base)));
            report.increments += r.increments;
            report.counter += r.counter;
            report.fenced_log.extend(r.fenced_log.iter().cloned());
            report.fenced_rejected += r.fenced_rejected;
            report
                .fencing_errors
                .extend(r.fencing_errors.iter().cloned());
            report.errors.extend(r.errors.iter().cloned());
            report.unstable_reads += r.unstable_reads;
        }
        let mut counts: HashMap<&'static str, u32> = HashMap::new();
        for f in &out.faults {
            *counts.entry(f.kind).or_default() += 1;
        }
        let mut violations = crate::failovers::round_violations(round.class().name(), out);
        if !explained {
            violations.push(format!(
                "lost update: counter {} after {} increments",
                report.counter, report.increments
            ));
        }
        RoundOutcome {
            round,
            stale_rejected: report.fenced_rejected,
            report,
            faults: out.faults.clone(),
            counts,
            langs,
            unclean: Vec::new(),
            overlaps_lost,
            overlaps_outside,
            overlaps_unexplained,
            lost_unexplained,
            lost_updates,
            lost_updates_explained: explained,
            stale_accepted: stale,
            detect_ms,
            detect_blind_ms,
            untold_blind,
            retake_ms,
            violations,
            notes,
            kept: None,
        }
    }
}

/// Percentiles of a sample, ms: (p50, p99, max); `None` when empty.
pub fn percentiles(mut xs: Vec<f64>) -> Option<(f64, f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    Some((at(0.5), at(0.99), *xs.last().unwrap()))
}

/// Every round of a campaign.
#[derive(Debug, Default)]
pub struct Campaign {
    pub seed: u64,
    pub server: String,
    pub secs: f64,
    pub rounds: Vec<RoundOutcome>,
}

/// A failover topology's time-to-detect, ms: (n, p50, p99, max) without and with awareness.
#[derive(Debug, Default)]
pub struct FailoverTimes {
    pub before: Option<(usize, f64, f64, f64)>,
    pub after: Option<(usize, f64, f64, f64)>,
    pub untold_before: usize,
    pub rounds: u32,
}

fn figures(xs: Vec<f64>) -> Option<(usize, f64, f64, f64)> {
    let n = xs.len();
    percentiles(xs).map(|(a, b, c)| (n, a, b, c))
}

/// Sums over rounds.
#[derive(Debug, Default)]
pub struct Totals {
    /// (language, kind) -> (operations, holds).
    pub by_lang_kind: BTreeMap<(String, String), (u64, u64)>,
    pub faults: BTreeMap<String, u32>,
    pub holds: u64,
    pub lost: u64,
    pub overlaps_lost: usize,
    pub overlaps_outside: usize,
    pub overlaps_unexplained: usize,
    pub lost_unexplained: usize,
    pub lost_updates: i64,
    pub lost_updates_unexplained: usize,
    pub stale_rejected: usize,
    pub stale_accepted: usize,
    pub detect: Option<(f64, f64, f64)>,
    /// By language: (operations, holds, holds reported lost, holds in overlaps).
    pub by_lang: BTreeMap<String, (u64, u64, u64, u64)>,
    /// By round class: (rounds, faults injected, holds, holds reported lost, rounds failed).
    pub by_class: BTreeMap<String, (u32, u32, u64, u64, u32)>,
    /// By failover topology: time-to-detect with awareness off (before) and on (after), and
    /// the holds never told without it.
    pub failover: BTreeMap<String, FailoverTimes>,
    /// By fault kind: (count, p50, p99, max).
    pub retake: BTreeMap<String, (usize, f64, f64, f64)>,
    pub violations: usize,
}

impl Campaign {
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        let mut retake: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut detect = Vec::new();
        let mut failover: BTreeMap<String, (Vec<f64>, Vec<f64>, usize, u32)> = BTreeMap::new();
        for o in &self.rounds {
            if matches!(
                o.round.class(),
                FaultClass::SentinelFailover | FaultClass::ClusterFailover
            ) {
                let e = failover
                    .entry(o.round.topology().name().to_owned())
                    .or_default();
                e.0.extend(&o.detect_blind_ms);
                e.1.extend(&o.detect_ms);
                e.2 += o.untold_blind;
                e.3 += 1;
            }
            let c = t
                .by_class
                .entry(o.round.class().name().to_owned())
                .or_default();
            c.0 += 1;
            c.1 += o
                .counts
                .iter()
                .filter(|(k, _)| **k != "idle")
                .map(|(_, n)| n)
                .sum::<u32>();
            c.2 += o.report.holds.len() as u64;
            c.3 += o.report.lost_holds() as u64;
            c.4 += u32::from(!o.violations.is_empty());
            let mut in_overlap = std::collections::HashSet::new();
            for &(a, b) in &o.report.overlaps {
                in_overlap.insert(a);
                in_overlap.insert(b);
            }
            for (i, h) in o.report.holds.iter().enumerate() {
                let lang = o.langs.get(&h.pid).copied().unwrap_or(o.round.lang);
                let ops = 1
                    + u64::from(h.end.is_some())
                    + u64::from(h.incremented)
                    + u64::from(h.fenced.is_some());
                let l = t.by_lang.entry(lang.name().to_owned()).or_default();
                l.0 += ops;
                l.1 += 1;
                l.2 += u64::from(h.lost);
                l.3 += u64::from(in_overlap.contains(&i));
                let e = t
                    .by_lang_kind
                    .entry((lang.name().to_owned(), o.round.kind.name().to_owned()))
                    .or_default();
                // An acquire, and the release, read-modify-write and fenced write it did.
                e.0 += 1
                    + u64::from(h.end.is_some())
                    + u64::from(h.incremented)
                    + u64::from(h.fenced.is_some());
                e.1 += 1;
            }
            for (k, n) in &o.counts {
                *t.faults.entry((*k).to_owned()).or_default() += n;
            }
            t.holds += o.report.holds.len() as u64;
            t.lost += o.report.lost_holds() as u64;
            t.overlaps_lost += o.overlaps_lost;
            t.overlaps_outside += o.overlaps_outside;
            t.overlaps_unexplained += o.overlaps_unexplained;
            t.lost_unexplained += o.lost_unexplained;
            t.lost_updates += o.lost_updates;
            t.lost_updates_unexplained += usize::from(!o.lost_updates_explained);
            t.stale_rejected += o.stale_rejected;
            t.stale_accepted += o.stale_accepted;
            t.violations += o.violations.len();
            detect.extend(&o.detect_ms);
            for &(k, ms) in &o.retake_ms {
                retake.entry(k.to_owned()).or_default().push(ms);
            }
        }
        t.detect = percentiles(detect);
        for (k, (before, after, untold, rounds)) in failover {
            t.failover.insert(
                k,
                FailoverTimes {
                    before: figures(before),
                    after: figures(after),
                    untold_before: untold,
                    rounds,
                },
            );
        }
        for (k, xs) in retake {
            let n = xs.len();
            if let Some((a, b, c)) = percentiles(xs) {
                t.retake.insert(k, (n, a, b, c));
            }
        }
        t
    }

    /// The failed rounds' violations, each with its round (and seed).
    pub fn failures(&self) -> Vec<String> {
        self.rounds
            .iter()
            .flat_map(|o| {
                o.violations.iter().map(move |v| {
                    let kept = o
                        .kept
                        .as_ref()
                        .map(|p| format!(" (histories in {})", p.display()))
                        .unwrap_or_default();
                    format!("{}{kept}: {v}", o.round.label())
                })
            })
            .collect()
    }

    pub fn markdown(&self) -> String {
        let t = self.totals();
        let mut s = String::new();
        let _ = writeln!(s, "# Campaign report\n");
        let _ = writeln!(
            s,
            "Seed {} (replay: `scripts/campaign --minutes {} --seed {} --server {}`), server {}, \
             {} rounds in {:.0} s.\n",
            self.seed,
            ((self.secs / 60.0) as u64).max(1),
            self.seed,
            // The harness's server switch, the value `--server` takes.
            std::env::var("REDISSON_LOCK_SERVER").unwrap_or_else(|_| "redis".to_owned()),
            self.server,
            self.rounds.len(),
            self.secs
        );
        let verdict = if t.violations == 0 {
            "PASS".to_owned()
        } else {
            format!("FAIL ({} violations)", t.violations)
        };
        let _ = writeln!(s, "Verdict: **{verdict}**\n");
        let _ = writeln!(s, "## Operations and holds\n\n| language | kind | operations | holds |\n|---|---|---:|---:|");
        for ((lang, kind), (ops, holds)) in &t.by_lang_kind {
            let _ = writeln!(s, "| {lang} | {kind} | {ops} | {holds} |");
        }
        let _ = writeln!(
            s,
            "\n## By language\n\n| language | operations | holds | reported lost | in an \
             overlap |\n|---|---:|---:|---:|---:|"
        );
        for (lang, (ops, holds, lost, over)) in &t.by_lang {
            let _ = writeln!(s, "| {lang} | {ops} | {holds} | {lost} | {over} |");
        }
        let _ = writeln!(
            s,
            "\n## Rounds by fault class\n\n| class | rounds | faults injected | holds | \
             reported lost | rounds failed |\n|---|---:|---:|---:|---:|---:|"
        );
        for (class, (rounds, faults, holds, lost, failed)) in &t.by_class {
            let _ = writeln!(
                s,
                "| {class} | {rounds} | {faults} | {holds} | {lost} | {failed} |"
            );
        }
        let _ = writeln!(s, "\n## Faults\n\n| fault | injected | lock taken again after it (ms): p50 / p99 / max |\n|---|---:|---|");
        for (k, n) in &t.faults {
            let retake = t
                .retake
                .get(k)
                .map(|(_, a, b, c)| format!("{a:.0} / {b:.0} / {c:.0}"))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(s, "| {k} | {n} | {retake} |");
        }
        let _ = writeln!(s, "\n## Safety\n");
        let _ = writeln!(s, "| check | count |\n|---|---:|");
        for (k, v) in [
            ("holds", t.holds as i64),
            ("holds reported lost", t.lost as i64),
            (
                "overlaps explained by a hold reported lost",
                t.overlaps_lost as i64,
            ),
            (
                "overlaps explained by a fault outside the model",
                t.overlaps_outside as i64,
            ),
            ("overlaps unexplained", t.overlaps_unexplained as i64),
            (
                "holds lost with no fault to explain it",
                t.lost_unexplained as i64,
            ),
            ("lost updates", t.lost_updates),
            (
                "rounds with lost updates unexplained",
                t.lost_updates_unexplained as i64,
            ),
            ("stale fenced writes rejected", t.stale_rejected as i64),
            ("stale fenced writes accepted", t.stale_accepted as i64),
        ] {
            let _ = writeln!(s, "| {k} | {v} |");
        }
        let detect = t
            .detect
            .map(|(a, b, c)| format!("{a:.0} / {b:.0} / {c:.0} ms"))
            .unwrap_or_else(|| "no failover rounds".into());
        let _ = writeln!(s, "\nFailover time-to-detect p50 / p99 / max: {detect}\n");
        if !t.failover.is_empty() {
            let _ = writeln!(
                s,
                "## Failover time-to-detect, before (awareness off) and after (on)\n\n\
                 Measured on the same switches in the same rounds: from the replica seen \
                 promoted to the holder's `lost` (or the release that said lost), ms.\n\n\
                 | topology | rounds | off: n | off: p50 / p99 / max | off: never told | \
                 on: n | on: p50 / p99 / max |\n|---|---:|---:|---|---:|---:|---|"
            );
            let cell = |x: &Option<(usize, f64, f64, f64)>| match x {
                Some((n, a, b, c)) => (n.to_string(), format!("{a:.0} / {b:.0} / {c:.0}")),
                None => ("0".into(), "-".into()),
            };
            for (topo, f) in &t.failover {
                let (bn, bf) = cell(&f.before);
                let (an, af) = cell(&f.after);
                let _ = writeln!(
                    s,
                    "| {topo} | {} | {bn} | {bf} | {} | {an} | {af} |",
                    f.rounds, f.untold_before
                );
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "## Rounds\n");
        for o in &self.rounds {
            let r = &o.report;
            let _ = writeln!(
                s,
                "- {}: {} holds, {} lost, overlaps {}/{}/{} (lost/outside/unexplained), \
                 fenced {} accepted {} rejected{}",
                o.round.label(),
                r.holds.len(),
                r.lost_holds(),
                o.overlaps_lost,
                o.overlaps_outside,
                o.overlaps_unexplained,
                r.fenced_log.len(),
                o.stale_rejected,
                if o.violations.is_empty() {
                    ""
                } else {
                    ": **FAILED**"
                }
            );
            for n in &o.notes {
                let _ = writeln!(s, "  - {n}");
            }
        }
        let failures = self.failures();
        if !failures.is_empty() {
            let _ = writeln!(s, "\n## Violations\n");
            for f in failures {
                let _ = writeln!(s, "- {f}");
            }
        }
        s
    }

    pub fn json(&self) -> serde_json::Value {
        let t = self.totals();
        let triple = |x: Option<(f64, f64, f64)>| {
            x.map(|(a, b, c)| serde_json::json!({"p50": a, "p99": b, "max": c}))
        };
        serde_json::json!({
            "seed": self.seed,
            "server": self.server,
            "secs": self.secs,
            "pass": t.violations == 0,
            "by_lang_kind": t.by_lang_kind.iter().map(|((l, k), (o, h))| {
                serde_json::json!({"lang": l, "kind": k, "operations": o, "holds": h})
            }).collect::<Vec<_>>(),
            "faults": t.faults,
            "holds": t.holds,
            "lost": t.lost,
            "overlaps": {
                "explained_by_lost": t.overlaps_lost,
                "explained_by_outside_fault": t.overlaps_outside,
                "unexplained": t.overlaps_unexplained,
            },
            "lost_unexplained": t.lost_unexplained,
            "lost_updates": t.lost_updates,
            "lost_updates_unexplained_rounds": t.lost_updates_unexplained,
            "stale_fenced_writes": {"rejected": t.stale_rejected, "accepted": t.stale_accepted},
            "time_to_detect_ms": triple(t.detect),
            "by_lang": t.by_lang.iter().map(|(l, (o, h, lost, over))| {
                (l.clone(), serde_json::json!({"operations": o, "holds": h, "lost": lost, "in_overlap": over}))
            }).collect::<serde_json::Map<_, _>>(),
            "by_class": t.by_class.iter().map(|(c, (r, f, h, l, failed))| {
                (c.clone(), serde_json::json!({"rounds": r, "faults": f, "holds": h, "lost": l, "failed": failed}))
            }).collect::<serde_json::Map<_, _>>(),
            "failover_time_to_detect_ms": t.failover.iter().map(|(k, f)| {
                let fig = |x: &Option<(usize, f64, f64, f64)>| x.map(|(n, a, b, c)| {
                    serde_json::json!({"n": n, "p50": a, "p99": b, "max": c})
                });
                (k.clone(), serde_json::json!({
                    "rounds": f.rounds,
                    "awareness_off": fig(&f.before),
                    "awareness_on": fig(&f.after),
                    "never_told_awareness_off": f.untold_before,
                }))
            }).collect::<serde_json::Map<_, _>>(),
            "time_to_retake_ms": t.retake.iter().map(|(k, (n, a, b, c))| {
                (k.clone(), serde_json::json!({"n": n, "p50": a, "p99": b, "max": c}))
            }).collect::<serde_json::Map<_, _>>(),
            "rounds": self.rounds.iter().map(|o| serde_json::json!({
                "label": o.round.label(),
                "topology": o.round.topology().name(),
                "holds": o.report.holds.len(),
                "lost": o.report.lost_holds(),
                "violations": o.violations,
                "notes": o.notes,
            })).collect::<Vec<_>>(),
            "violations": self.failures(),
        })
    }
}

/// The excuse for Redisson's dropped renewal fits its signature only: a Java holder's hold
/// taken within 3 s after a fault that struck while it held the lock before; never a Rust
/// holder's, nor one taken later, nor one whose holder held nothing during the fault.
#[test]
fn only_a_redisson_hold_right_after_a_fault_it_held_through_is_excused() {
    let s = 1_000_000_000;
    let hold = |pid, start, end| lost_hold(pid, start, end, 0);
    let stop = Fault {
        kind: "server long stop",
        target: None,
        start: 10 * s,
        end: 12 * s,
        can_lose: true,
    };
    let langs = HashMap::from([(1, Lang::Java3), (2, Lang::Rust), (3, Lang::Java4)]);
    let holds = [
        hold(1, 9 * s, 12 * s),
        hold(1, 13 * s, 15 * s),
        hold(2, 9 * s, 12 * s),
        hold(2, 13 * s, 15 * s),
        hold(3, 5 * s, 7 * s),
        hold(3, 13 * s, 15 * s),
    ];
    let excused =
        |h: &Hold| renewal_dropped_by_redisson(h, &holds, std::slice::from_ref(&stop), &langs);
    assert!(
        excused(&holds[1]),
        "Redisson, 1 s after a stop it held through"
    );
    assert!(!excused(&holds[3]), "a Rust hold");
    assert!(
        !excused(&holds[5]),
        "its holder held nothing during the stop"
    );
    let late = hold(1, 15 * s + 1, 17 * s);
    assert!(!excused(&late), "more than 3 s after the stop");

    // A holder whose hold was reported lost 1 s before the stop (its renewal entry still
    // firing into the stop); not when that hold was not lost, nor 3 s before.
    let langs = HashMap::from([(4, Lang::Java3), (5, Lang::Java3), (6, Lang::Java4)]);
    let mut kept = hold(5, 7 * s, 9 * s);
    kept.lost = false;
    let holds = [
        hold(4, 7 * s, 9 * s),
        hold(4, 13 * s, 15 * s),
        kept,
        hold(5, 13 * s, 15 * s),
        hold(6, 5 * s, 7 * s),
        hold(6, 13 * s, 15 * s),
    ];
    let excused =
        |h: &Hold| renewal_dropped_by_redisson(h, &holds, std::slice::from_ref(&stop), &langs);
    assert!(excused(&holds[1]), "its hold lost 1 s before the stop");
    assert!(!excused(&holds[3]), "its hold before the stop was not lost");
    assert!(
        !excused(&holds[5]),
        "its lost hold ended 3 s before the stop"
    );
}

#[cfg(test)]
fn lost_hold(pid: u32, start: u64, end: u64, token: i64) -> Hold {
    Hold {
        pid,
        lock: "l".into(),
        start,
        end: Some(end),
        token,
        incremented: true,
        fenced: Some(true),
        lost: true,
        guard_lost: false,
        read: false,
        unstable: false,
    }
}

/// A stale write accepted: two overlapping holds, both writes accepted, the one granted
/// clearly later with the lower token. Start lines 10 ms apart say nothing of the grant order
/// (the eviction round of the five-run check: tokens 2 and 3 granted in that order, their
/// lines the other way round).
#[test]
fn a_stale_write_is_a_lower_token_accepted_from_a_clearly_later_grant() {
    let ms = 1_000_000;
    let report = |later_start: u64| Report {
        holds: vec![
            lost_hold(1, 1000 * ms, 3000 * ms, 3),
            lost_hold(2, later_start, 4000 * ms, 2),
        ],
        overlaps: vec![(0, 1)],
        ..Report::default()
    };
    assert_eq!(stale_accepted(&report(1010 * ms)), 0, "10 ms apart");
    assert_eq!(stale_accepted(&report(2500 * ms)), 1, "1.5 s apart");
}

/// A lost hold whose start line came 5 ms after a stop of its own holder is the stop's (the
/// grant came during it: CI, a Redisson reader, Valkey); after a stop of the server, or of
/// another holder, or 2 s after its own, it is not.
#[test]
fn a_grant_taken_while_its_holder_was_stopped_is_explained_by_the_stop() {
    let ms = 1_000_000;
    let stop = |target| Fault {
        kind: "long stop",
        target,
        start: 1000 * ms,
        end: 3200 * ms,
        can_lose: true,
    };
    let lost = |start: u64, faults: Vec<Fault>| {
        let report = Report {
            holds: vec![lost_hold(7, start, start + 2000 * ms, 0)],
            ..Report::default()
        };
        report.unexplained_lost(&faults).len()
    };
    assert_eq!(
        lost(3205 * ms, vec![stop(Some(7))]),
        0,
        "5 ms after its own stop"
    );
    assert_eq!(lost(3205 * ms, vec![stop(None)]), 1, "after a server stop");
    assert_eq!(
        lost(3205 * ms, vec![stop(Some(8))]),
        1,
        "after another's stop"
    );
    assert_eq!(
        lost(5205 * ms, vec![stop(Some(7))]),
        1,
        "2 s after its own stop"
    );
}
