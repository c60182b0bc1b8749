//! The hold gauges, `redisson_lock_holds` and `redisson_lock_oldest_hold_seconds`, per kind.
//!
//! Each client's watchdog reports what its client holds on every tick (`watchdog.rs`); the
//! gauges show the whole process: the count summed over its clients, the oldest hold of any
//! of them. A process often has several clients (a RedLock over several servers), and a gauge
//! set by one client alone would hide the others' holds. Each client's part is kept here
//! until its next report, and removed when its watchdog ends.

use std::time::Instant;

/// One client's part of the hold gauges; dropping it (the watchdog's end) removes the part.
#[derive(Debug)]
pub(crate) struct HoldsReport {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    id: u64,
}

impl HoldsReport {
    pub(crate) fn new() -> HoldsReport {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        HoldsReport {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Reports the client's holds now: `held()` lists each one's kind and since when it is
    /// held (called only with the `metrics` feature).
    pub(crate) fn report(&self, held: impl FnOnce() -> Vec<(&'static str, Instant)>) {
        #[cfg(feature = "metrics")]
        table::report(self.id, held());
        #[cfg(not(feature = "metrics"))]
        let _ = held;
    }
}

impl Drop for HoldsReport {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        table::report(self.id, Vec::new());
    }
}

#[cfg(feature = "metrics")]
mod table {
    use std::sync::Mutex;
    use std::time::Instant;

    use crate::observe::{HOLDS, OLDEST_HOLD};

    /// Per (client, kind): how many holds, and the oldest one's start.
    struct Part {
        client: u64,
        kind: &'static str,
        count: u64,
        oldest: Instant,
    }

    static PARTS: Mutex<Vec<Part>> = Mutex::new(Vec::new());

    pub(super) fn report(client: u64, held: Vec<(&'static str, Instant)>) {
        let mut parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
        // Every kind this client reported before or reports now gets its gauges set, so a kind
        // whose last hold ended goes back to zero.
        let mut kinds: Vec<&'static str> = parts
            .iter()
            .filter(|p| p.client == client)
            .map(|p| p.kind)
            .collect();
        parts.retain(|p| p.client != client);
        for (kind, since) in held {
            match parts
                .iter_mut()
                .find(|p| p.client == client && p.kind == kind)
            {
                Some(p) => {
                    p.count += 1;
                    p.oldest = p.oldest.min(since);
                }
                None => {
                    parts.push(Part {
                        client,
                        kind,
                        count: 1,
                        oldest: since,
                    });
                    kinds.push(kind);
                }
            }
        }
        kinds.sort_unstable();
        kinds.dedup();
        let now = Instant::now();
        for kind in kinds {
            let of_kind = parts.iter().filter(|p| p.kind == kind);
            let count: u64 = of_kind.clone().map(|p| p.count).sum();
            let oldest = of_kind.map(|p| p.oldest).min();
            let age = oldest.map_or(0.0, |o| now.saturating_duration_since(o).as_secs_f64());
            metrics::gauge!(HOLDS, "kind" => kind).set(count as f64);
            metrics::gauge!(OLDEST_HOLD, "kind" => kind).set(age);
        }
    }
}
