//! What a campaign runs: rounds of one topology, one lock kind, one holder language and a fault
//! mix, drawn from a seed. A new fault class is one arm of [`FaultClass`] (its name, whether it is
//! inside the model, where it applies) and one function in `nemesis.rs` that injects it.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::support::checker::{self, HolderSpec};

/// The language of a holder process: the Rust holder (`tests/holder`) or the Java one (the
/// Java peer's `io.redissonlock.peer.Holder`, real Redisson of a pinned version; the same
/// command line and history).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lang {
    Rust,
    /// Redisson 4.7.0.
    Java4,
    /// Redisson 3.52.0.
    Java3,
}

impl Lang {
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Java4 => "java-4.7.0",
            Lang::Java3 => "java-3.52.0",
        }
    }

    /// The language named `name` (as [`Lang::name`] writes it).
    pub fn from_name(name: &str) -> Option<Lang> {
        [Lang::Rust, Lang::Java4, Lang::Java3]
            .into_iter()
            .find(|l| l.name() == name)
    }

    /// Makes `spec` a holder of this language (and applies a break meant for it).
    pub fn apply(self, spec: &mut HolderSpec, brk: Break) {
        let version = match self {
            Lang::Rust => return,
            Lang::Java4 => "4.7.0",
            Lang::Java3 => "3.52.0",
        };
        spec.lang = checker::Lang::Java(version.to_owned());
        if brk == Break::JavaNoRenew {
            // A fixed lease shorter than the hold instead of the watchdog's renewals.
            spec.lease_ms = super::nemesis::LEASE_MS;
        }
    }

    /// The languages a schedule draws from: Rust and both Java versions, or Rust alone where
    /// `REDISSON_LOCK_NO_JAVA` is set (`scripts/test --no-java`: no JDK, no peer jars).
    pub fn all() -> &'static [Lang] {
        if std::env::var_os("REDISSON_LOCK_NO_JAVA").is_some() {
            &[Lang::Rust]
        } else {
            &[Lang::Rust, Lang::Java4, Lang::Java3]
        }
    }
}

/// Where the lock lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// One lock server (plus the never-faulted store of the counter and fenced resource).
    Single,
    /// Three independent nodes of a RedLock.
    RedLock3,
    /// Lock server, store and each holder in its own network namespace (`support/netns.rs`).
    Netns,
    /// A master, its replica and three sentinels.
    Sentinel,
    /// Three masters with a replica each.
    Cluster,
}

impl Topology {
    pub fn name(self) -> &'static str {
        match self {
            Topology::Single => "single",
            Topology::RedLock3 => "redlock-3",
            Topology::Netns => "netns",
            Topology::Sentinel => "sentinel",
            Topology::Cluster => "cluster",
        }
    }

    pub fn nodes(self) -> usize {
        match self {
            Topology::Single => 1,
            Topology::RedLock3 => 3,
            // The other topologies start their own servers.
            _ => 1,
        }
    }
}

/// The lock a round's holders contend for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Fenced,
    RLock,
    Fair,
    /// Writers and readers of one read-write lock, alternately.
    Rw,
    RedLock,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fenced => "fenced",
            Kind::RLock => "rlock",
            Kind::Fair => "fair",
            Kind::Rw => "rw",
            Kind::RedLock => "redlock",
        }
    }

    pub fn topology(self) -> Topology {
        match self {
            Kind::RedLock => Topology::RedLock3,
            _ => Topology::Single,
        }
    }

    pub fn all() -> &'static [Kind] {
        &[
            Kind::Fenced,
            Kind::RLock,
            Kind::Fair,
            Kind::Rw,
            Kind::RedLock,
        ]
    }
}

/// A client clock rate (libfaketime `x<rate>`, CLOCK_MONOTONIC included, so the holder's timers,
/// sleeps and leases run at that rate; its history stays on the true clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// 1 % fast: inside the model (the guard allows 1 % drift).
    Fast101,
    /// 25 % fast: outside the model, but a fast client only ends its own deadlines early.
    Fast125,
    /// 25 % slow (x0.8, the reciprocal of 1.25): outside the model; a fixed lease outlives itself
    /// in the holder's eyes.
    Slow080,
}

impl Rate {
    pub fn faketime(self) -> &'static str {
        match self {
            Rate::Fast101 => "+0 x1.01",
            Rate::Fast125 => "+0 x1.25",
            Rate::Slow080 => "+0 x0.8",
        }
    }
}

/// One kind of fault. Each has a name (the fault log's `kind`), says whether it is inside the
/// model, and where it applies; `nemesis::inject` has one function per arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultClass {
    /// Nothing this time (the schedule's pacing).
    Idle,
    /// A holder killed (`kill -9`) and replaced.
    Kill9,
    /// A holder stopped (SIGSTOP/SIGCONT) for less than a renewal period.
    ShortStop,
    /// A holder inside a hold stopped past its lease (Kleppmann's pause): outside the model.
    LongStop,
    /// The lock server (one RedLock node) stopped briefly.
    ServerPause,
    /// The lock server stopped past the lease: its holds expire as it resumes. Outside the model
    /// on one server; a minority of a RedLock, inside.
    ServerLongPause,
    /// `CLIENT KILL TYPE normal` (and `pubsub`) on the lock server.
    ClientKill,
    /// The lock server killed and restarted empty: every hold and the token counter forgotten.
    /// Outside the model (one server only; a RedLock node restarted empty is pinned elsewhere).
    ServerRestart,
    /// The lock server under memory pressure (`maxmemory`, `volatile-lru`): junk keys written
    /// until a lock key is evicted, without a word to anyone. Inside the model: its holder is
    /// told at its next renewal (Redisson's at its release), and the token counter, which has
    /// no TTL, survives, so the fenced resource still orders the writes.
    Eviction,
    /// One holder's clock runs at a rate, with a fixed lease (see [`Rate`]).
    Clock(Rate),
    /// Real partitions (`partitions::partition_round_with`): a holder's link, the link between
    /// a holder and the lock server, or the lock server's link taken down and brought back,
    /// short (inside the model) or past the lease. Every cut may lose holds; none is outside
    /// the model (a fenced resource orders what a cut-off holder writes).
    Partition,
    /// `SENTINEL FAILOVER` and the master killed (`failovers::sentinel_round`), with groups of
    /// holders with failover awareness on and off, replica sync on and off.
    SentinelFailover,
    /// `CLUSTER FAILOVER`, `FORCE`, `TAKEOVER` and the shard's master killed
    /// (`failovers::cluster_round`), awareness on and off, replica sync on or off.
    ClusterFailover,
    /// The locks' slot moved to another master and on again with Valkey 9's atomic slot
    /// migration (`CLUSTER MIGRATESLOTS`; always the pinned Valkey 9.1.2 cluster, whatever the
    /// server under test) while a holder of each lock renews and another waits on the lock's
    /// sharded channel (`failovers::cluster_round`). Inside the model: the keys move with their
    /// TTLs, so no hold may be lost and every waiter must be woken.
    SlotMigration,
}

impl FaultClass {
    pub fn name(self) -> &'static str {
        match self {
            FaultClass::Idle => "idle",
            FaultClass::Kill9 => "kill9",
            FaultClass::ShortStop => "short stop",
            FaultClass::LongStop => "long stop",
            FaultClass::ServerPause => "server stop",
            FaultClass::ServerLongPause => "server long stop",
            FaultClass::ClientKill => "client kill",
            FaultClass::ServerRestart => "server restart",
            FaultClass::Eviction => "eviction",
            FaultClass::Clock(Rate::Fast101) => "clock x1.01",
            FaultClass::Clock(Rate::Fast125) => "clock x1.25",
            FaultClass::Clock(Rate::Slow080) => "clock x0.8",
            FaultClass::Partition => "partition",
            FaultClass::SentinelFailover => "sentinel-failover",
            FaultClass::ClusterFailover => "cluster-failover",
            FaultClass::SlotMigration => "slot-migration",
        }
    }

    /// Whether the fault is outside the model on `topology` (it may then explain an overlap
    /// nobody was told about).
    pub fn outside_model(self, topology: Topology) -> bool {
        match self {
            FaultClass::LongStop
            | FaultClass::ServerRestart
            | FaultClass::Clock(Rate::Fast125 | Rate::Slow080) => true,
            FaultClass::ServerLongPause => topology == Topology::Single,
            _ => false,
        }
    }

    /// Whether a schedule may give this class to a round of `kind`.
    pub fn applies_to(self, kind: Kind) -> bool {
        match self {
            // What an empty restart tests is the token counter starting again: fenced holds.
            FaultClass::ServerRestart => kind == Kind::Fenced,
            // A fixed-lease hold on a skewed clock: the kinds whose holder takes a lease.
            FaultClass::Clock(_) => matches!(kind, Kind::Fenced | Kind::RLock),
            // A hash evicted under a single-server hold; fenced: the counter survives it.
            FaultClass::Eviction => matches!(kind, Kind::Fenced | Kind::RLock),
            // One lock server in a namespace: the single-server kinds.
            FaultClass::Partition => matches!(kind, Kind::Fenced | Kind::RLock | Kind::Fair),
            // The failover holders hold fenced locks.
            FaultClass::SentinelFailover
            | FaultClass::ClusterFailover
            | FaultClass::SlotMigration => kind == Kind::Fenced,
            _ => true,
        }
    }

    /// The classes a campaign schedule deals out.
    pub fn all() -> &'static [FaultClass] {
        &[
            FaultClass::Kill9,
            FaultClass::ShortStop,
            FaultClass::LongStop,
            FaultClass::ServerPause,
            FaultClass::ServerLongPause,
            FaultClass::ClientKill,
            FaultClass::ServerRestart,
            FaultClass::Eviction,
            FaultClass::Clock(Rate::Fast101),
            FaultClass::Clock(Rate::Fast125),
            FaultClass::Clock(Rate::Slow080),
            FaultClass::Partition,
            FaultClass::SentinelFailover,
            FaultClass::ClusterFailover,
            FaultClass::SlotMigration,
        ]
    }

    /// Where a round of this class runs its lock, for a lock of `kind`.
    pub fn topology(self, kind: Kind) -> Topology {
        match self {
            FaultClass::Partition => Topology::Netns,
            FaultClass::SentinelFailover => Topology::Sentinel,
            FaultClass::ClusterFailover | FaultClass::SlotMigration => Topology::Cluster,
            _ => kind.topology(),
        }
    }

    /// The class logged under `name` on `topology`, for reading a fault log back.
    pub fn by_name(name: &str) -> Option<FaultClass> {
        FaultClass::all().iter().copied().find(|c| c.name() == name)
    }
}

/// A break of the system under test, on purpose, to watch the campaign go red
/// (`CAMPAIGN_BREAK=watchdog-off|fence-equal|awareness-off|java-no-renew`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Break {
    None,
    /// Holders take a fixed lease shorter than their hold instead of the watchdog's.
    WatchdogOff,
    /// The fenced resource accepts a token equal to the highest it has seen.
    FenceEqual,
    /// Java holders do not renew (read by the Java holder; Rust holders ignore it).
    JavaNoRenew,
    /// Failover rounds' holders run without failover awareness while the checks expect it.
    AwarenessOff,
}

impl Break {
    pub fn from_env() -> Break {
        match std::env::var("CAMPAIGN_BREAK").as_deref() {
            Ok("watchdog-off") => Break::WatchdogOff,
            Ok("fence-equal") => Break::FenceEqual,
            Ok("java-no-renew") => Break::JavaNoRenew,
            Ok("awareness-off") => Break::AwarenessOff,
            Ok("") | Err(_) => Break::None,
            Ok(other) => panic!(
                "CAMPAIGN_BREAK={other}: expected watchdog-off, fence-equal, awareness-off or \
                 java-no-renew"
            ),
        }
    }
}

/// One round: a topology and a lock kind, holders of one language, and the faults to inject.
#[derive(Clone, Debug)]
pub struct Round {
    pub index: usize,
    pub seed: u64,
    pub kind: Kind,
    /// The language of the round's first holder.
    pub lang: Lang,
    /// Holders alternate between the languages (starting with `lang`): a mixed fleet on one
    /// lock.
    pub mixed: bool,
    pub holders: usize,
    pub secs: u64,
    /// Fault classes with weights; one is drawn every few hundred milliseconds.
    pub mix: Vec<(FaultClass, u32)>,
}

impl Round {
    pub fn topology(&self) -> Topology {
        self.class().topology(self.kind)
    }

    /// The round's main fault class (its first non-idle one), for the report.
    pub fn class(&self) -> FaultClass {
        self.mix
            .iter()
            .map(|&(c, _)| c)
            .find(|&c| c != FaultClass::Idle)
            .unwrap_or(FaultClass::Idle)
    }

    /// The language of the round's `i`th holder (counting replacements).
    pub fn lang_of(&self, i: usize) -> Lang {
        let all = Lang::all();
        if !self.mixed {
            return self.lang;
        }
        let first = all.iter().position(|&l| l == self.lang).unwrap_or(0);
        all[(first + i) % all.len()]
    }

    /// The languages' names, `rust` or `rust+java` for a mixed fleet.
    pub fn langs_name(&self) -> String {
        if self.mixed && Lang::all().len() > 1 {
            let mut v: Vec<&str> = Lang::all().iter().map(|l| l.name()).collect();
            v.sort_unstable();
            v.join("+")
        } else {
            self.lang.name().to_owned()
        }
    }

    /// The clock rate of the round's first holder, if its class is a clock.
    pub fn clock(&self) -> Option<Rate> {
        self.mix.iter().find_map(|&(c, _)| match c {
            FaultClass::Clock(r) => Some(r),
            _ => None,
        })
    }

    pub fn label(&self) -> String {
        format!(
            "round {} ({} {} {} x{}, {}, {} s, seed {})",
            self.index,
            self.topology().name(),
            self.kind.name(),
            self.langs_name(),
            self.holders,
            self.class().name(),
            self.secs,
            self.seed
        )
    }
}

/// A seeded schedule of `n` rounds of `secs` each. Fault classes are dealt like cards from a
/// shuffled deck (every class once before any repeats), so any `FaultClass::all().len()`
/// consecutive rounds cover every class; each round gets a lock kind its class applies to.
pub fn schedule(seed: u64, n: usize, secs: u64) -> Vec<Round> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut deck: Vec<FaultClass> = Vec::new();
    (0..n)
        .map(|index| {
            if deck.is_empty() {
                deck = FaultClass::all().to_vec();
                // Fisher-Yates with the schedule's own generator.
                for i in (1..deck.len()).rev() {
                    deck.swap(i, rng.random_range(0..=i));
                }
            }
            let class = deck.pop().unwrap();
            let kinds: Vec<Kind> = Kind::all()
                .iter()
                .copied()
                .filter(|&k| class.applies_to(k))
                .collect();
            let kind = kinds[rng.random_range(0..kinds.len())];
            let langs = Lang::all();
            // Rust for half the rounds, a Java version for the rest.
            let mut lang = if langs.len() > 1 && rng.random_bool(0.5) {
                langs[rng.random_range(1..langs.len())]
            } else {
                Lang::Rust
            };
            // Half the rounds mix the languages on one lock (where there are two).
            let mixed = langs.len() > 1 && rng.random_bool(0.5);
            // The skewed holder (the first) may be a Java one where a JDK 22+ reads the true
            // clock for its history (`TrueClock`); else a Rust one (a JVM under libfaketime
            // would write its history on the faked clock).
            if let (FaultClass::Clock(_), false) = (class, checker::java_true_clock()) {
                lang = Lang::Rust;
            }
            let holders = rng.random_range(3..=4);
            // The rounds with their own topology have their own fleet sizes.
            let holders = match class {
                FaultClass::Partition => crate::partitions::ROUND_HOLDERS,
                FaultClass::SentinelFailover => 5,
                FaultClass::ClusterFailover | FaultClass::SlotMigration => 4,
                _ => holders,
            };
            Round {
                index,
                seed: rng.random(),
                kind,
                lang,
                mixed,
                holders,
                // A failover round runs its switches, not a clock: about a minute.
                secs: match class {
                    FaultClass::SentinelFailover
                    | FaultClass::ClusterFailover
                    | FaultClass::SlotMigration => secs.max(60),
                    // JVMs starting in namespaces while links go down: give the holders time
                    // to take a few holds (a 7 s round of Java holders took 2 under load).
                    FaultClass::Partition => secs.max(12),
                    _ => secs,
                },
                // Mostly the class, with idle gaps between.
                mix: vec![(class, 4), (FaultClass::Idle, 1)],
            }
        })
        .collect()
}
