//! Grants whose guard was dropped: their release runs in the background, and as far as their
//! owner can tell they are released already. The owner's next acquire (and its questions) wait
//! for those releases instead of counting the grants as held.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{GrantId, Hold, HoldState};

impl Hold {
    /// Marks grant `id` as being released in the background (a dropped guard's release); the
    /// mark goes when the returned token is dropped, the release done or abandoned.
    pub(crate) fn releasing(self: &Arc<Self>, id: GrantId) -> Releasing {
        self.releasing.lock().push(id);
        self.pending.fetch_add(1, Ordering::AcqRel);
        Releasing {
            hold: self.clone(),
            id,
        }
    }

    /// The grants this owner still holds here as far as it can tell: those whose release is not
    /// running in the background. While the owner has grants and every one of them is being
    /// released so, waits for those releases first (an acquire right after a dropped guard
    /// behaves as if the release had happened, and never counts the old hold as held); `None`
    /// when `deadline` passed first.
    pub(crate) async fn live_grants(self: &Arc<Self>, deadline: Option<Instant>) -> Option<u32> {
        loop {
            let done = self.ended.notified();
            tokio::pin!(done);
            // Registered before the check, so a release ending in between is not missed.
            done.as_mut().enable();
            let (count, live) = {
                let gate = self.gate().await;
                let marked = self.releasing.lock();
                (gate.count(), gate.count_except(&marked))
            };
            if count == 0 || live > 0 {
                return Some(live);
            }
            match deadline {
                Some(d) => tokio::time::timeout_at(d.into(), done).await.ok()?,
                None => done.await,
            }
        }
    }

    /// Whether a grant of this hold is being released in the background (one atomic load).
    pub(crate) fn releases_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    /// Gives up grant `id` of `epoch` without releasing it in Redis, when its background release
    /// failed for good or could not run (its runtime is gone): the hold is left dirty, so the
    /// owner's next acquire trims it back first, and it is no longer renewed (Redis expires it
    /// with its lease meanwhile). Nothing when the grant is gone already (released, or lost).
    pub(crate) fn abandon(&self, gate: &mut HoldState, epoch: u64, id: GrantId) {
        if gate.epoch == epoch && gate.take_grant(id).is_some() {
            gate.unknown();
            self.set_watchdog(gate);
        }
    }

    /// [`abandon`](Self::abandon) without waiting: skipped when the gate is busy.
    pub(crate) fn try_abandon(&self, epoch: u64, id: GrantId) {
        if let Ok(mut gate) = self.gate.try_lock() {
            gate.catch_up(self.epoch());
            self.abandon(&mut gate, epoch, id);
        }
    }
}

/// One grant's background release in progress ([`Hold::releasing`]); dropping it ends the mark
/// and wakes the owner's acquires waiting for it.
#[derive(Debug)]
pub(crate) struct Releasing {
    hold: Arc<Hold>,
    id: GrantId,
}

impl Drop for Releasing {
    fn drop(&mut self) {
        let mut marked = self.hold.releasing.lock();
        if let Some(at) = marked.iter().position(|&id| id == self.id) {
            marked.swap_remove(at);
        }
        drop(marked);
        self.hold.pending.fetch_sub(1, Ordering::AcqRel);
        self.hold.ended.notify_waiters();
    }
}
