//! T34, the lost-update soak (Jepsen's lock-set): holder processes contend for one fenced lock
//! while a seeded nemesis injects a random mix of faults; the checker then reads every history.
//!
//! * Default (CI): a short run, a few seconds with 3 holders, so the soak itself is exercised.
//! * `SOAK=1 cargo test --test it fault_soak:: -- --nocapture`: 90 s with 6 holders. Tune with
//!   `SOAK_SECS`, `SOAK_HOLDERS`; replay a run with `SOAK_SEED` (printed at the start);
//!   `SOAK_KIND=rlock|fair|rw` soaks another lock kind (no fencing token: the fencing check is
//!   then vacuous, the others hold; `rw` alternates writers and readers of a read-write lock).
//!
//! The lock server gets the faults; the counter and the fenced resource live on a second server
//! that is never faulted. `SOAK_RESTARTS=1` adds restarts of the lock server (kill -9, restart
//! empty): outside the model, they lose every hold and reset the fencing-token counter, so the
//! resource then rejects writes until the new tokens pass the old maximum (safe, not live).
//!
//! What must hold, whatever the schedule:
//! * no accepted stale fencing token, ever;
//! * every overlap of two holds involves a hold that was reported lost (only the out-of-model
//!   fault, a holder stopped past its lease, may cause one);
//! * every hold reported lost is tied to an injected fault that can lose holds (on that holder or
//!   the server, during the hold): inside the model nothing is lost, and holds last longer than
//!   the lease, so a watchdog that does not renew fails here;
//! * no lost update beyond what the lost holds explain: the counter is at least the increments
//!   recorded less one per lost hold, and at most one more per killed holder (which may die
//!   between its write and its history line);
//! * progress: holds keep being taken, and every holder not killed exits cleanly.
//!
//! The soak is a campaign round (`campaign::nemesis::run_round`) with a fault mix instead of one
//! class; the round's checks are the campaign's (`campaign::outcome::RoundOutcome`), and the soak
//! adds the stricter one it always had: every overlap has a hold reported lost (none is left to a
//! fault outside the model).

use crate::campaign::nemesis::run_round;
use crate::campaign::outcome::RoundOutcome;
use crate::campaign::plan::{Break, FaultClass, Kind, Lang, Round};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Soak length, holder count and seed from the environment (see the module docs).
fn settings(label: &str) -> (u64, usize, u64) {
    let long = std::env::var("SOAK").is_ok_and(|v| v == "1");
    let secs = env_u64("SOAK_SECS").unwrap_or(if long { 90 } else { 16 });
    let n = env_u64("SOAK_HOLDERS").unwrap_or(if long { 6 } else { 3 }) as usize;
    let seed = env_u64("SOAK_SEED").unwrap_or(0x5eed_0005);
    eprintln!("soak: {secs} s, {n} holders, SOAK_SEED={seed}, {label}");
    (secs, n, seed)
}

/// Asserts what must hold whatever the schedule (see the module docs).
fn verify(o: &RoundOutcome) {
    let r = &o.report;
    eprintln!(
        "soak: faults {:?}; holds {}, lost {}, overlaps {}, increments {}, counter {}, \
         fenced accepted {} rejected {}, unstable reads {}, holder errors {}",
        o.counts,
        r.holds.len(),
        r.lost_holds(),
        r.overlaps.len(),
        r.increments,
        r.counter,
        r.fenced_log.len(),
        r.fenced_rejected,
        r.unstable_reads,
        r.errors.len(),
    );
    assert!(
        o.violations.is_empty(),
        "seed {}: {}{}",
        o.round.seed,
        o.violations.join("\n"),
        o.kept
            .as_ref()
            .map(|p| format!("\n(histories kept in {})", p.display()))
            .unwrap_or_default()
    );
    assert_eq!(
        o.overlaps_outside, 0,
        "seed {}: overlapping holds neither of which was reported lost",
        o.round.seed
    );
}

fn soak_round(kind: Kind, secs: u64, n: usize, seed: u64, mix: Vec<(FaultClass, u32)>) -> Round {
    Round {
        index: 0,
        seed,
        kind,
        lang: Lang::Rust,
        mixed: false,
        holders: n,
        secs,
        mix,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_fault_mix_keeps_fencing_and_explains_every_overlap() {
    let kind = match std::env::var("SOAK_KIND").as_deref() {
        Ok("rlock") => Kind::RLock,
        Ok("fair") => Kind::Fair,
        Ok("rw") => Kind::Rw,
        _ => Kind::Fenced,
    };
    let (secs, n, seed) = settings(&format!("SOAK_KIND={}", kind.name()));
    let restarts = std::env::var("SOAK_RESTARTS").is_ok_and(|v| v == "1");
    let mix = vec![
        (FaultClass::Kill9, 2),
        // Inside the model: shorter than a renewal period.
        (FaultClass::ShortStop, 3),
        // Outside the model: stopped past its lease (Kleppmann's pause).
        (FaultClass::LongStop, 1),
        // Command or subscriber connections, half and half.
        (FaultClass::ClientKill, 4),
        (FaultClass::ServerPause, 2),
        // Outside the model: the lock server forgets every lock (and the token counter).
        (FaultClass::ServerRestart, u32::from(restarts)),
        (FaultClass::Idle, 2 + u32::from(!restarts)),
    ];
    let round = soak_round(kind, secs, n, seed, mix);
    verify(&run_round(&round, Break::None).await);
}

/// The same soak for a RedLock over three independent nodes: holder processes take it with
/// watchdog leases while the nemesis kills and stops holders, stops one node at a time (briefly,
/// or longer than the lease: a minority down is inside RedLock's model) and kills connections on
/// one node. A node fault may explain a lost hold: a RedLock taken on a bare majority (one node
/// missed at acquisition, a slow node on a loaded machine) is lost with one of its members (seen
/// under load: one node stopped past the lease, a hold reported lost). Node restarts are left out: an empty restart is outside RedLock's model (the F4
/// hazard), pinned deterministically by `fault_redlock::redlock_node_restarted_empty_allows_a_second_majority`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_seeded_fault_mix_explains_every_overlap() {
    let (secs, n, seed) = settings("redlock");
    let mix = vec![
        (FaultClass::Kill9, 4),
        (FaultClass::ShortStop, 4),
        (FaultClass::LongStop, 2),
        // One node of three: the majority keeps every hold.
        (FaultClass::ClientKill, 8),
        // One node at a time, briefly or past the lease: a minority, inside RedLock's model.
        (FaultClass::ServerPause, 3),
        (FaultClass::ServerLongPause, 3),
        (FaultClass::Idle, 6),
    ];
    let round = soak_round(Kind::RedLock, secs, n, seed, mix);
    verify(&run_round(&round, Break::None).await);
}
