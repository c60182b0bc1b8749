//! Runs one round: starts its servers and holder processes, injects its faults (one function per
//! [`FaultClass`] arm), stops the holders and hands the histories to the checker.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::outcome::RoundOutcome;
use super::plan::{Break, FaultClass, Kind, Lang, Rate, Round, Topology};
use crate::support::checker::*;
use crate::support::*;

/// The watchdog lease, and how long each hold lasts: longer than the lease, over several renewal
/// periods, so a hold survives only if the watchdog renews it (with renewals turned off, every
/// hold is lost without any fault to explain it, and the round fails).
pub const LEASE_MS: u64 = 1500;
pub const HOLD_MS: u64 = 2000;

/// How long a holder may take to start and connect (a JVM with Redisson, on a loaded machine).
const STARTUP: Duration = Duration::from_secs(60);

/// A clock-skewed holder's fixed lease and hold (holder time): inside the model (1 % fast) the
/// hold ends well inside the lease on any clock; outside it, slow (x0.8), the hold outlasts the
/// lease by 250 ms of true time while the holder's clock says it has 200 ms left; fast (x1.25),
/// it ends after 1440 ms of true time, 1.56 s inside the lease: the time between the server's
/// grant and the holder's start line is not in the history, and a cold JVM's first acquire
/// under load spent over 400 ms there (a 2 s lease's margin, 560 ms, was not enough twice).
const CLOCK_INSIDE: (u64, u64) = (3000, 1800);
pub(super) const CLOCK_SLOW: (u64, u64) = (2000, 1800);
pub(super) const CLOCK_FAST: (u64, u64) = (3000, 1800);

/// Runs `round` (breaking what `brk` says) and checks it.
pub async fn run_round(round: &Round, brk: Break) -> RoundOutcome {
    // The classes that bring their own topology run their whole round in one function.
    match round.class() {
        FaultClass::Partition => return partition(round, brk).await,
        FaultClass::SentinelFailover | FaultClass::ClusterFailover | FaultClass::SlotMigration => {
            return failover(round, brk).await
        }
        _ => {}
    }
    let mut rng = StdRng::seed_from_u64(round.seed);
    let mut servers: Vec<TestServer> = (0..round.topology().nodes())
        .map(|_| TestServer::start())
        .collect();
    let store = TestServer::start();
    let lock = format!("campaign-{}", round.index);
    let mut spec = HolderSpec::new(&servers[0].url(), &lock);
    spec.kind = match round.kind {
        Kind::Rw => "rw",
        other => other.name(),
    };
    spec.fair_wait_ms = 1500;
    if round.kind == Kind::RedLock {
        spec.urls = servers.iter().map(|n| n.url()).collect();
    }
    let mut fleet = Fleet::start(round, spec, &store, brk).await;

    let end = Instant::now() + Duration::from_secs(round.secs);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(rng.random_range(200..1200))).await;
        let class = draw(&round.mix, &mut rng);
        inject(class, &mut fleet, &mut servers, round.topology(), &mut rng).await;
    }
    fleet.finish(round, &store, &lock).await
}

fn draw(mix: &[(FaultClass, u32)], rng: &mut StdRng) -> FaultClass {
    let total: u32 = mix.iter().map(|m| m.1).sum();
    let mut pick = rng.random_range(0..total.max(1));
    for &(class, weight) in mix {
        if pick < weight {
            return class;
        }
        pick -= weight;
    }
    FaultClass::Idle
}

/// Injects one fault of `class`: one function per class.
async fn inject(
    class: FaultClass,
    fleet: &mut Fleet,
    servers: &mut [TestServer],
    topology: Topology,
    rng: &mut StdRng,
) {
    let at = mono_ns();
    let victim = rng.random_range(0..fleet.live.len());
    let node = rng.random_range(0..servers.len());
    // A server fault can lose holds on one server; and on a RedLock node too: a RedLock taken
    // on a bare majority (one node missed at acquisition, a slow node on a loaded machine) is
    // lost when one of its members is. Seen in the soak under load: one node stopped past the
    // lease, a hold reported lost, and no other fault near it.
    let _ = topology;
    match class {
        FaultClass::Idle => fleet.count(class),
        FaultClass::Kill9 => fleet.kill9(victim, rng, at),
        FaultClass::ShortStop => fleet.short_stop(victim, rng, at).await,
        FaultClass::LongStop => fleet.long_stop(victim, at).await,
        FaultClass::ServerPause => {
            let ms = rng.random_range(50..400);
            server_stop(fleet, &servers[node], ms, class, at).await
        }
        FaultClass::ServerLongPause => {
            let ms = LEASE_MS + 500;
            server_stop(fleet, &servers[node], ms, class, at).await
        }
        FaultClass::ClientKill => {
            let pubsub = rng.random_bool(0.5);
            fleet.client_kill(&servers[node], pubsub, at).await
        }
        FaultClass::ServerRestart => server_restart(fleet, &mut servers[node], at),
        FaultClass::Eviction => evict(fleet, &servers[node], at).await,
        // A clock is set when its holder starts; the round's pacing goes on meanwhile.
        FaultClass::Clock(_) => fleet.count(FaultClass::Idle),
        // Whole rounds of their own (see `run_round`), never drawn inside another.
        FaultClass::Partition
        | FaultClass::SentinelFailover
        | FaultClass::ClusterFailover
        | FaultClass::SlotMigration => fleet.count(FaultClass::Idle),
    }
}

async fn server_stop(fleet: &mut Fleet, server: &TestServer, ms: u64, class: FaultClass, at: u64) {
    server.pause();
    tokio::time::sleep(Duration::from_millis(ms)).await;
    server.resume();
    fleet.log(class.name(), None, at, true);
}

/// Outside the model: the lock server forgets every lock (and the token counter).
fn server_restart(fleet: &mut Fleet, server: &mut TestServer, at: u64) {
    server.restart();
    fleet.log(FaultClass::ServerRestart.name(), None, at, true);
}

/// Memory pressure on `server` for 1 s: `volatile-lru` under a cap a little above the memory
/// in use, junk keys written with a short TTL (so they may be evicted, and go by themselves).
/// A held lock key, renewed every third of the lease, is soon the least recently used key.
async fn evict(fleet: &mut Fleet, server: &TestServer, at: u64) {
    let mut raw = server.conn().await;
    let used: u64 = info_field(&info(&mut raw, "memory").await, "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("INFO memory has used_memory");
    config_set(&mut raw, "maxmemory-policy", "volatile-lru").await;
    config_set(&mut raw, "maxmemory", &(used + 1024 * 1024).to_string()).await;
    let (value, until) = (vec![b'x'; 1024], Instant::now() + Duration::from_secs(1));
    let mut next = 0u64;
    while Instant::now() < until {
        let mut pipe = redis::pipe();
        for _ in 0..200 {
            pipe.cmd("SET").arg(format!("junk:{at}:{next}")).arg(&value);
            pipe.arg("EX").arg(3).ignore();
            next += 1;
        }
        let _: () = pipe.query_async(&mut raw).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    config_set(&mut raw, "maxmemory", "0").await;
    fleet.log(FaultClass::Eviction.name(), None, at, true);
}

/// A holder inside a hold right now, if any (its history ends with `acquired` or `read`), so a
/// long pause lands inside a hold rather than on a waiter.
fn pick_holding(live: &[Holder], fallback: usize) -> usize {
    live.iter()
        .position(|h| {
            h.events()
                .last()
                .is_some_and(|e| e.kind == "acquired" || e.kind == "read")
        })
        .unwrap_or(fallback)
}

/// The holder processes of one round and the faults injected into them so far.
pub struct Fleet {
    spec: HolderSpec,
    /// The round (its holders' languages).
    round: Round,
    brk: Break,
    clock: Option<Rate>,
    dir: tempfile::TempDir,
    stop_file: std::path::PathBuf,
    next_id: usize,
    live: Vec<Holder>,
    dead: Vec<Holder>,
    open_ends: HashMap<u32, u64>,
    langs: HashMap<u32, Lang>,
    /// The clock-skewed holder: its pid and when it started.
    skewed: Option<(u32, u64)>,
    faultless: bool,
    /// How long the first holders took to say `started`; those that never did, and why.
    startup: Duration,
    unstarted: Vec<String>,
    counts: HashMap<&'static str, u32>,
    faults: Vec<Fault>,
}

impl Fleet {
    /// Starts the round's holders of `spec` (its lock, kind and URLs set) with the common
    /// settings: watchdog leases shorter than each hold, the counter on `store`; returns once
    /// each has said `started` (connected), so that the round's seconds are the holders'.
    /// Four JVMs starting Redisson beside a loaded suite took more than a 7 s round: 0 holds,
    /// "no progress", in CI. One that never starts is left to the round's progress check.
    async fn start(round: &Round, mut spec: HolderSpec, store: &TestServer, brk: Break) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let stop_file = dir.path().join("stop");
        spec.store = Some(store.url());
        spec.iterations = 1_000_000;
        spec.watchdog_ms = LEASE_MS;
        spec.response_ms = 1000;
        // Holds longer than the lease: only renewals keep them.
        spec.hold_ms = HOLD_MS;
        spec.rmw_ms = 2;
        spec.max_secs = round.secs + 60;
        spec.stop_file = Some(stop_file.clone());
        apply_break(&mut spec, brk);
        let mut fleet = Fleet {
            spec,
            round: round.clone(),
            brk,
            clock: round.clock(),
            dir,
            stop_file,
            next_id: 0,
            live: Vec::new(),
            dead: Vec::new(),
            open_ends: HashMap::new(),
            langs: HashMap::new(),
            skewed: None,
            faultless: true,
            startup: Duration::ZERO,
            unstarted: Vec::new(),
            counts: HashMap::new(),
            faults: Vec::new(),
        };
        for i in 0..round.holders {
            let h = fleet.spawn(i as u64 * 3);
            fleet.live.push(h);
        }
        let began = Instant::now();
        for h in &fleet.live {
            if !h.wait_for("started", 1, STARTUP).await {
                let events = h.events();
                let error = events.iter().rev().find(|e| e.kind == "error");
                let why = error.map_or("no error line".into(), |e| format!("{:?}", e.fields));
                fleet.unstarted.push(format!("holder {}: {why}", h.pid()));
            }
        }
        fleet.startup = began.elapsed();
        fleet
    }

    fn spawn(&mut self, gap: u64) -> Holder {
        let mut s = self.spec.clone();
        s.gap_ms = gap;
        let lang = self.round.lang_of(self.next_id);
        lang.apply(&mut s, self.brk);
        self.next_id += 1;
        if s.kind == "rw" {
            // Writers and readers of one read-write lock, alternately.
            s.kind = if self.next_id % 2 == 1 {
                "write"
            } else {
                "read"
            };
        }
        // The first holder of a clock round runs on a skewed clock with a fixed lease.
        let skew = self.next_id == 1 && self.clock.is_some();
        if let (true, Some(rate)) = (skew, self.clock) {
            let (lease, hold) = match rate {
                Rate::Fast101 => CLOCK_INSIDE,
                Rate::Fast125 => CLOCK_FAST,
                Rate::Slow080 => CLOCK_SLOW,
            };
            s.lease_ms = lease;
            s.hold_ms = hold;
            match faketime_lib() {
                Some(lib) => s.env.extend([
                    ("LD_PRELOAD".to_owned(), lib),
                    ("FAKETIME".to_owned(), rate.faketime().to_owned()),
                    ("FAKETIME_NO_CACHE".to_owned(), "1".to_owned()),
                ]),
                // Said plainly in the outcome (a violation), never passed silently.
                None => self.faultless = false,
            }
        }
        let h = Holder::spawn(&s, history_path(self.dir.path(), self.next_id));
        self.langs.insert(h.pid(), lang);
        if skew {
            self.skewed = Some((h.pid(), mono_ns()));
        }
        h
    }

    fn count(&mut self, class: FaultClass) {
        *self.counts.entry(class.name()).or_default() += 1;
    }

    fn log(&mut self, kind: &'static str, target: Option<u32>, at: u64, can_lose: bool) {
        *self.counts.entry(kind).or_default() += 1;
        self.faults.push(Fault::new(kind, target, at, can_lose));
    }

    /// Kills a holder (its open hold ends now) and starts a new one in its place.
    fn kill9(&mut self, victim: usize, rng: &mut StdRng, at: u64) {
        let mut h = self.live.swap_remove(victim);
        let pid = h.pid();
        self.open_ends.insert(pid, h.kill9());
        self.log(FaultClass::Kill9.name(), Some(pid), at, true);
        self.dead.push(h);
        let fresh = self.spawn(rng.random_range(0..5));
        self.live.push(fresh);
    }

    /// Stops a holder for less than a renewal period.
    async fn short_stop(&mut self, victim: usize, rng: &mut StdRng, at: u64) {
        let ms = rng.random_range(50..300);
        self.stop_for(victim, ms, at, FaultClass::ShortStop).await;
    }

    /// Stops a holder that is inside a hold past its lease.
    async fn long_stop(&mut self, victim: usize, at: u64) {
        let victim = pick_holding(&self.live, victim);
        self.stop_for(victim, LEASE_MS + 700, at, FaultClass::LongStop)
            .await;
    }

    async fn stop_for(&mut self, victim: usize, ms: u64, at: u64, class: FaultClass) {
        self.live[victim].pause();
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.live[victim].resume();
        let pid = self.live[victim].pid();
        self.log(class.name(), Some(pid), at, true);
    }

    /// Kills the command (or, with `pubsub`, the subscriber) connections on `server`.
    async fn client_kill(&mut self, server: &TestServer, pubsub: bool, at: u64) {
        let kind = if pubsub { "pubsub" } else { "normal" };
        if let Ok(mut c) = server.raw().get_multiplexed_async_connection().await {
            let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg(kind)
                .query_async(&mut c)
                .await;
        }
        if pubsub {
            // Subscriber connections only carry wake-ups: they cannot lose a hold.
            self.log("pubsub kill", None, at, false);
        } else {
            self.log(FaultClass::ClientKill.name(), None, at, true);
        }
    }

    /// Tells the holders to stop, waits for them and checks the histories.
    async fn finish(mut self, round: &Round, store: &TestServer, lock: &str) -> RoundOutcome {
        std::fs::write(&self.stop_file, b"stop").unwrap();
        let mut unclean = Vec::new();
        for h in &mut self.live {
            if !h.wait(Duration::from_secs(60)).await {
                unclean.push(h.pid());
            }
        }
        if let (Some((pid, since)), Some(rate)) = (self.skewed, self.clock) {
            // The skewed clock, over the holder's whole life.
            let class = FaultClass::Clock(rate);
            let outside = class.outside_model(round.topology());
            self.faults
                .push(Fault::new(class.name(), Some(pid), since, outside));
            *self.counts.entry(class.name()).or_default() += 1;
        }
        let paths: Vec<_> = self
            .live
            .iter()
            .chain(self.dead.iter())
            .map(|h| h.history.clone())
            .collect();
        let mut conn = store.conn().await;
        let report = check(&mut conn, lock, &paths, &self.open_ends).await;
        let mut outcome = RoundOutcome::new(
            round.clone(),
            report,
            self.faults,
            self.counts,
            self.langs,
            unclean,
        );
        if !self.faultless {
            outcome.violations.push(
                "libfaketime missing (apt-get install faketime): the clock was not skewed".into(),
            );
        }
        if !self.unstarted.is_empty() {
            let secs = STARTUP.as_secs();
            let who = self.unstarted.join("; ");
            outcome
                .violations
                .push(format!("not started within {secs} s: {who}"));
        }
        if self.startup > Duration::from_secs(5) {
            let secs = self.startup.as_secs_f64();
            outcome
                .notes
                .push(format!("the holders took {secs:.1} s to start"));
        }
        if self.brk != Break::None {
            outcome.notes.push(format!("break: {:?}", self.brk));
        }
        if !outcome.violations.is_empty() {
            let log: String = outcome.faults.iter().map(|f| format!("{f:?}\n")).collect();
            let _ = std::fs::write(self.dir.path().join("faults.log"), log);
            outcome.kept = Some(self.dir.keep());
        }
        outcome
    }
}

/// What `brk` changes in a holder's spec (a break meant for one language is applied by
/// [`Lang::apply`]).
fn apply_break(spec: &mut HolderSpec, brk: Break) {
    match brk {
        // A fixed lease shorter than the hold: what a watchdog that never renews leaves.
        Break::WatchdogOff => spec.lease_ms = LEASE_MS,
        Break::FenceEqual => spec.env.push(("HOLDER_FENCE_EQUAL".into(), "1".into())),
        Break::None | Break::JavaNoRenew | Break::AwarenessOff => {}
    }
}

/// [`FaultClass::Partition`]: the partition round of `partitions.rs` (each holder in its own
/// namespace, the lock server in another, cuts short and past the lease), its holders of the
/// round's lock kind and language.
async fn partition(round: &Round, brk: Break) -> RoundOutcome {
    let kind = round.kind.name();
    let langs: Vec<Lang> = (0..crate::partitions::ROUND_HOLDERS)
        .map(|i| round.lang_of(i))
        .collect();
    let tweak = |i: usize, spec: &mut HolderSpec| {
        spec.kind = kind;
        spec.fair_wait_ms = 1500;
        apply_break(spec, brk);
        langs[i].apply(spec, brk);
    };
    let (report, faults, pids) =
        crate::partitions::partition_round_with(round.seed, round.secs, tweak).await;
    let mut counts: HashMap<&'static str, u32> = HashMap::new();
    for f in &faults {
        *counts.entry(f.kind).or_default() += 1;
    }
    let langs = pids.iter().copied().zip(langs.iter().copied()).collect();
    let mut outcome = RoundOutcome::new(round.clone(), report, faults, counts, langs, Vec::new());
    if brk != Break::None {
        outcome.notes.push(format!("break: {brk:?}"));
    }
    outcome
}

/// [`FaultClass::SentinelFailover`] and [`FaultClass::ClusterFailover`]: a failover round of
/// `failovers.rs` with three groups of holders on their own locks: failover awareness on and
/// off (the "after" and "before" time-to-detect, measured on the same switches), replica sync
/// off (a hold wiped from the replica before each switch: outside the model); on Sentinel a
/// third group with replica sync on (its holds must survive every switch). On a cluster the
/// groups share one replica sync setting, drawn (on for a third of the rounds). Sentinel: both
/// faults (`SENTINEL FAILOVER`, the master killed) in a seeded order; Cluster: two of the four
/// (`CLUSTER FAILOVER`, `FORCE`, `TAKEOVER`, the master killed), drawn. A slot migration
/// round is a Cluster round whose two faults are atomic slot migrations.
async fn failover(round: &Round, brk: Break) -> RoundOutcome {
    use crate::failovers::{self, GroupSpec, CLUSTER_FAULTS, MIGRATE, SENTINEL_FAULTS};
    let mut rng = StdRng::seed_from_u64(round.seed);
    let sentinel = round.class() == FaultClass::SentinelFailover;
    // The group with failover awareness is Rust (Redisson has none); the others take the
    // round's languages: Java holders (Redisson following the switch with its connections
    // only), or a mixed fleet on one lock, holders alternating.
    let langs: Vec<&'static str> = (0..Lang::all().len())
        .map(|i| round.lang_of(i).name())
        .collect();
    let langs = if round.mixed { &langs[..] } else { &langs[..1] };
    let mut groups = if sentinel {
        vec![
            GroupSpec::new("cfo-aware", 2, true, false, "rust"),
            GroupSpec::new("cfo-blind", 2, false, false, "rust").with_langs(langs),
            // Awareness on a group whose holds all survive: it must never report one lost.
            GroupSpec::new(
                "cfo-synced",
                langs.len().min(2),
                langs == ["rust"],
                true,
                "rust",
            )
            .with_langs(langs),
        ]
    } else {
        let sync = rng.random_range(0..3u32) == 0;
        vec![
            GroupSpec::new("{cfo}aware", 2, true, sync, "rust"),
            GroupSpec::new("{cfo}blind", 2, false, sync, "rust").with_langs(langs),
        ]
    };
    for g in &mut groups {
        g.holders_blind = brk == Break::AwarenessOff;
    }
    let plan: Vec<&'static str> = if sentinel {
        failovers::plan(round.seed, &SENTINEL_FAULTS)
    } else if round.class() == FaultClass::SlotMigration {
        vec![MIGRATE, MIGRATE]
    } else {
        failovers::plan(round.seed, &CLUSTER_FAULTS)[..2].to_vec()
    };
    let (seed, owned) = (round.seed, groups.clone());
    // A round that cannot run (a switch that never promotes) is a failed round, not a crashed
    // campaign.
    let run = tokio::spawn(async move {
        if sentinel {
            failovers::sentinel_round(seed, &owned, &plan).await
        } else {
            failovers::cluster_round(seed, &owned, &plan).await
        }
    });
    let mut outcome = match run.await {
        Ok(out) => RoundOutcome::from_failover(round.clone(), &out),
        Err(e) => {
            let why = match e.try_into_panic() {
                Ok(p) => p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
                Err(e) => e.to_string(),
            };
            let mut o = RoundOutcome::new(
                round.clone(),
                Report::default(),
                Vec::new(),
                HashMap::new(),
                HashMap::new(),
                Vec::new(),
            );
            o.violations = vec![format!("the failover round did not run through: {why}")];
            o
        }
    };
    if brk != Break::None {
        outcome.notes.push(format!("break: {brk:?}"));
    }
    outcome
}
