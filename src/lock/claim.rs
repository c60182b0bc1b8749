//! A default owner's claim on a lock it acquires: what refuses a second acquire by the same
//! task ([`LockError::Reentry`]) while letting a guard it dropped count as released.

use std::sync::Arc;
use std::time::Instant;

use super::Lock;
use crate::error::{LockError, Result};
use crate::holds::claims::{Claim, Mode};
use crate::holds::Hold;
use crate::owner::LockOwner;
use crate::raw::{LockKind, RawLock, Write};
use crate::scripts::Layout;

impl<K: LockKind> Lock<K> {
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
            .claim(&self.shared.name, owner.id(), mode)
            .ok_or_else(refused)?;
        if mode == Mode::Exclusive || hold.releases_pending() {
            match hold.live_grants(own).await {
                None => return Ok(None),
                Some(live) if live > 0 && mode == Mode::Exclusive => return Err(refused()),
                Some(_) => {}
            }
        }
        // The other side of a read-write lock, when this owner has its hold in this client.
        let other = match K::SPEC.layout {
            Layout::Read => Some(format!("{}{}", hold.field, Write::SPEC.field_suffix)),
            Layout::Write => hold
                .field
                .strip_suffix(Write::SPEC.field_suffix)
                .map(str::to_owned),
            _ => None,
        };
        if let Some(other) = other.and_then(|f| holds.find(&self.shared.name, &f)) {
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
    pub(super) async fn after_releases(&self, owner: LockOwner) {
        let holds = self.client().registry();
        if let Some(hold) = holds.find(&self.shared.name, &self.field(owner)) {
            if hold.releases_pending() {
                hold.live_grants(None).await;
            }
        }
    }
}
