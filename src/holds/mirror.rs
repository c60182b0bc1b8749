//! Reading a hold without its gate: the mirrors [`Hold::set_watchdog`] keeps (the watch flag,
//! since when the owner holds the lock, its fixed deadline) for `Client::holds` and the hold
//! gauges, which must show a hold even while a slow script keeps its gate.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Hold, Holds, CLOCK_BASE};

/// One hold as `Client::holds` shows it (read from the mirrors, without the gate).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    /// Since when the owner holds the lock.
    pub(crate) since: Instant,
    /// The last known expiry: the last confirmed renewal plus the watchdog lease, or the
    /// latest fixed deadline, whichever is later.
    pub(crate) expires: Instant,
    pub(crate) watchdog: bool,
    pub(crate) at_risk: bool,
}

impl Hold {
    /// This hold as far as the mirrors tell, `None` when it has no grant; `watchdog` the
    /// client's watchdog lease.
    pub(crate) fn held(&self, watchdog: Duration) -> Option<Held> {
        let since = self.since.load(Ordering::Acquire).checked_sub(1)?;
        let watched = self.watchdog();
        let fixed = self.fixed_until.load(Ordering::Acquire).checked_sub(1);
        let renewed = watched.then(|| self.renewed_at() + watchdog);
        let fixed = fixed.map(|f| *CLOCK_BASE + Duration::from_nanos(f));
        let since = *CLOCK_BASE + Duration::from_nanos(since);
        Some(Held {
            since,
            expires: renewed.max(fixed).unwrap_or(since),
            watchdog: watched,
            at_risk: self.is_at_risk(),
        })
    }
}

impl Holds {
    /// Every hold with a grant now, as its mirrors tell (`Client::holds`); `watchdog` the
    /// client's watchdog lease.
    pub(crate) fn held(&self, watchdog: Duration) -> Vec<(Arc<Hold>, Held)> {
        self.holds
            .iter()
            .filter_map(|e| Some((e.value().clone(), e.value().held(watchdog)?)))
            .collect()
    }

    /// The kind of every hold with a grant now and since when it is held (the hold gauges).
    pub(crate) fn held_since(&self) -> Vec<(&'static str, Instant)> {
        self.holds
            .iter()
            .filter_map(|e| {
                let h = e.value();
                Some((h.kind.name, h.held(Duration::ZERO)?.since))
            })
            .collect()
    }
}
