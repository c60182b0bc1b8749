//! Admission, before an acquire sends anything: a default owner's claim on the lock (what
//! refuses a second acquire by the same task, [`LockError::Reentry`], while letting a guard it
//! dropped count as released), and the read-write lock's writer preference. The read-write
//! policy is the kind's data: its layout and the write side's field suffix (`raw/rw.rs`).

use std::sync::Arc;
use std::time::Instant;

use super::{AcquireRequest, Engine};
use crate::error::{LockError, Result};
use crate::holds::claims::{Claim, Mode};
use crate::holds::writers::WriterWaits;
use crate::holds::Hold;
use crate::owner::LockOwner;
use crate::raw::{KindExt, LockKind};
use crate::scripts::Layout;

/// What an admitted acquisition holds for its whole life: a default owner's claim, if any.
pub(super) struct Admitted<'a>(#[allow(dead_code)] Option<Claim<'a>>);

impl<K: LockKind> Engine<K> {
    /// Admits an acquisition, or refuses it: a default owner (`checked`) of a re-entrant kind
    /// claims the lock ([`Self::claim`]); anyone else waits only for its own releases still
    /// running in the background; a reader then waits behind this client's waiting writers.
    /// `Ok(None)`: not admitted by `deadline`.
    pub(super) async fn admit(
        &self,
        req: &AcquireRequest,
        hold: &Arc<Hold>,
        deadline: Option<Instant>,
    ) -> Result<Option<Admitted<'_>>> {
        // A default owner may not take what it holds or is taking (another future of its task
        // would re-enter instead of waiting); given up however this ends.
        // This owner's releases still running in the background (a dropped guard's) are, as
        // far as it can tell, done: waited for within the wait bound, by a try-once acquire too
        // (bounded by the release's own retries), and never counted as held.
        let own = match req.wait {
            Some(w) if w.is_zero() => None,
            _ => deadline,
        };
        let claim = match req.checked && K::SPEC.reentrant {
            true => match self.claim(req.owner, hold, own).await? {
                Some(claim) => Some(claim),
                None => return Ok(None),
            },
            false if hold.releases_pending() && hold.live_grants(own).await.is_none() => {
                return Ok(None)
            }
            false => None,
        };
        // Writer preference: a new reader waits while a write acquire of this client waits.
        if !self.behind_writers(hold, deadline).await {
            return Ok(None);
        }
        Ok(Some(Admitted(claim)))
    }

    /// Claims this lock for a default owner's acquisition, or refuses it
    /// ([`LockError::Reentry`]) when the owner is already acquiring it (another claim) or holds
    /// it in this client (grants in its hold). Readers of a read-write lock share: a read is
    /// refused only by the owner's write side, a write by either side. Grants whose guard was
    /// dropped are not held: their background release is waited for (until `own`; `Ok(None)`
    /// once it passed). Local: no round trip.
    pub(super) async fn claim(
        &self,
        owner: LockOwner,
        hold: &Arc<Hold>,
        own: Option<Instant>,
    ) -> Result<Option<Claim<'_>>> {
        let refused = || LockError::Reentry {
            name: self.name().to_owned(),
            owner,
        };
        let holds = self.client().registry();
        let mode = match K::SPEC.layout {
            Layout::Read => Mode::Shared,
            _ => Mode::Exclusive,
        };
        // Claimed first, then the holds checked: a grant appears only under a claim (or for an
        // explicit owner), so once claimed, no grant of this owner can slip in unseen.
        let claim = holds
            .claims
            .claim(&self.name, owner.id(), mode)
            .ok_or_else(refused)?;
        if mode == Mode::Exclusive || hold.releases_pending() {
            match hold.live_grants(own).await {
                None => return Ok(None),
                Some(live) if live > 0 && mode == Mode::Exclusive => return Err(refused()),
                Some(_) => {}
            }
        }
        // The other side of a read-write lock, when this owner has its hold in this client.
        let other = self.kind.other_side(&hold.field);
        if let Some(other) = other.and_then(|f| holds.find(&self.name, &f)) {
            match other.live_grants(own).await {
                None => return Ok(None),
                Some(live) if live > 0 => return Err(refused()),
                Some(_) => {}
            }
        }
        Ok(Some(claim))
    }

    /// Waits for `owner`'s releases of this lock still running in the background (a dropped
    /// guard's), so that a question asked right after the drop (`is_locked`, `hold_count`, ...)
    /// sees the lock released, as the owner's next acquire does. One map lookup otherwise.
    pub(in crate::lock) async fn after_releases(&self, owner: LockOwner) {
        let holds = self.client().registry();
        if let Some(hold) = holds.find(&self.name, &self.field(owner)) {
            if hold.releases_pending() {
                hold.live_grants(None).await;
            }
        }
    }

    /// The read-write lock's writer preference ([`Config::with_writer_preference`]): a read
    /// acquire waits while a write acquire of this client waits on the name, unless its owner
    /// already holds the name's read or write side here (re-entry and downgrade pass, or they
    /// could wait for themselves). `false`: still held back at `deadline` (a `try_lock` at once).
    ///
    /// [`Config::with_writer_preference`]: crate::Config::with_writer_preference
    async fn behind_writers(&self, hold: &Arc<Hold>, deadline: Option<Instant>) -> bool {
        let client = self.client();
        let writers = &client.registry().writers;
        if K::SPEC.layout != Layout::Read
            || !client.config().writer_preference()
            || !writers.any(&self.name)
        {
            return true;
        }
        if hold.gate().await.count() > 0 {
            return true;
        }
        let write_field = self.kind.other_side(&hold.field);
        if let Some(w) = write_field.and_then(|f| client.registry().find(&self.name, &f)) {
            if w.gate().await.count() > 0 {
                return true;
            }
        }
        let deadline = deadline.map(tokio::time::Instant::from_std);
        tracing::trace!(lock = %self.name(), "reader held back behind a waiting writer");
        writers.clear(&self.name, deadline).await
    }

    /// While a write acquire of the read-write lock waits ([`Config::with_writer_preference`]),
    /// this client's new readers are held back ([`Self::behind_writers`]); `None` for every
    /// other kind.
    ///
    /// [`Config::with_writer_preference`]: crate::Config::with_writer_preference
    pub(super) fn writer_waits(&self) -> Option<WriterWaits<'_>> {
        (K::SPEC.layout == Layout::Write && self.client.config().writer_preference())
            .then(|| self.client.registry().writers.waiting(&self.name))
    }
}
