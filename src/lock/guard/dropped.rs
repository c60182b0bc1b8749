//! A guard dropped while armed: its release, run in the background, and what the owner's next
//! acquire sees meanwhile (`Hold::releasing`).

use super::LockGuard;
use crate::raw::LockKind;

impl<K: LockKind> Drop for LockGuard<K> {
    fn drop(&mut self) {
        if !self.armed {
            self.lock.client().registry().forget(&self.hold);
            return;
        }
        self.armed = false;
        // Marked before the release is spawned: the owner's next acquire, even one made before
        // the background task runs, waits for this release instead of counting the hold.
        let dropped = Dropped {
            mark: Some(self.hold.releasing(self.grant)),
            guard: LockGuard {
                lock: self.lock.clone(),
                hold: self.hold.clone(),
                epoch: self.epoch,
                grant: self.grant,
                lease: self.lease,
                token: self.token,
                armed: false,
                taken: self.taken,
            },
        };
        self.lock.client().spawn(dropped.run());
    }
}

/// A dropped guard's release, run in the background. A release that fails for good (not a
/// connection error, which leaves the hold to be settled), or that never runs (its runtime shut
/// down first), abandons the grant: the owner's next acquire trims the hold back first, and
/// Redis expires it with its lease meanwhile. Never left counted as held.
struct Dropped<K: LockKind> {
    guard: LockGuard<K>,
    /// Ends (waking the owner's acquires waiting for it) once the outcome is booked.
    mark: Option<crate::holds::Releasing>,
}

impl<K: LockKind> Dropped<K> {
    async fn run(mut self) {
        let g = &self.guard;
        if let Err(e) = g.release().await {
            tracing::warn!(lock = %g.lock.name(), error = %e, "release of a dropped guard failed");
            g.hold.abandon(&mut *g.hold.gate().await, g.epoch, g.grant);
        }
        self.mark.take();
    }
}

impl<K: LockKind> Drop for Dropped<K> {
    fn drop(&mut self) {
        if self.mark.is_some() {
            tracing::warn!(
                lock = %self.guard.lock.name(),
                "a dropped guard's release never ran (its runtime shut down): the hold expires with its lease"
            );
            self.guard
                .hold
                .try_abandon(self.guard.epoch, self.guard.grant);
        }
    }
}
