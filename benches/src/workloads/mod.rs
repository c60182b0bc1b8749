//! The workloads W0-W3w of `shared/reference/peer-bench.md`, plus the watchdog and many-waiters
//! workloads. Each returns figures (name -> value) for one run; the caller takes medians over
//! runs and prints the table. One file per family: `w0` (the server's ceiling), `throughput`
//! (W1, W2 and the timed loop WC shares), `two_procs` (W3, W3w and the contended kinds, two child
//! processes), `scale` (watchdog holds, parked waiters), `redlock`.

use std::collections::BTreeMap;
use std::time::Duration;

mod redlock;
mod scale;
mod throughput;
mod two_procs;
mod w0;

pub use redlock::redlock;
pub use scale::{dbsize, many_waiters, many_waiters_n, used_memory, watchdog, watchdog_n};
pub use throughput::{record_w1, record_w2, w1, w2, Cycles};
pub use two_procs::{analyze_w3w, child, record_w3, record_w3w, w3, w3_as, w3w, ChildArgs, Hold};
pub use w0::w0;

/// One run's figures and notes.
#[derive(Default, Debug)]
pub struct Run {
    pub f: BTreeMap<String, f64>,
    pub notes: BTreeMap<String, String>,
}

impl Run {
    pub fn set(&mut self, key: impl Into<String>, v: f64) {
        self.f.insert(key.into(), v);
    }
    pub fn get(&self, key: &str) -> Option<f64> {
        self.f.get(key).copied()
    }
    pub fn note(&mut self, key: impl Into<String>, v: impl Into<String>) {
        self.notes.insert(key.into(), v.into());
    }
}

/// Sizes of one run (quick or full).
#[derive(Clone, Debug)]
pub struct Plan {
    pub w0_p16: u64,
    pub w0_p1: u64,
    pub w0_c1: u64,
    pub w0_cold: usize,
    pub w1_cycles: usize,
    pub w2_secs: f64,
    pub w2_tasks: Vec<usize>,
    pub w3_secs: f64,
    pub w3w_secs: f64,
    pub wd_locks: usize,
    pub wd_window: Duration,
    pub mw_waiters: usize,
    pub mw_names: usize,
    pub rl_cycles: usize,
}

impl Plan {
    pub fn quick() -> Plan {
        Plan {
            w0_p16: 300_000,
            w0_p1: 100_000,
            w0_c1: 10_000,
            w0_cold: 20,
            w1_cycles: 2_000,
            w2_secs: 2.0,
            w2_tasks: vec![1, 16, 64, 256],
            w3_secs: 5.0,
            w3w_secs: 5.0,
            wd_locks: 10_000,
            wd_window: Duration::from_millis(3_500),
            mw_waiters: 10_000,
            mw_names: 100,
            rl_cycles: 500,
        }
    }
    pub fn full() -> Plan {
        Plan {
            w0_p16: 500_000,
            w0_p1: 200_000,
            w0_c1: 20_000,
            w0_cold: 40,
            w1_cycles: 5_000,
            w2_secs: 5.0,
            w3w_secs: 12.0,
            wd_window: Duration::from_millis(6_500),
            rl_cycles: 2_000,
            ..Plan::quick()
        }
    }
}
