//! Releasing: one grant given back (a guard's own, or the owner's latest) by the kind's release
//! script, and a lease re-applied (MultiLock).
//!
//! A release writes no unlock latch (Redisson's `redisson_unlock_latch:...`, which only the
//! unlocking client itself would ever read). A try whose outcome is unknown (a lost reply, a
//! broken connection) is retried as a trim to the count the owner's gate knows Redis must have
//! after the release (`lua/trim.lua`): it releases only what is still there to release, so a
//! repeat cannot release twice, and the hold count it found tells what happened ([`retried`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::cleanup::InFlight;
use super::Engine;
use super::Target;
use crate::error::{from_script, is_connection_error, LockError, Result};
use crate::holds::{Gate, Grant, GrantId, Hold, HoldState};
use crate::raw::{KindExt, LockKind, Release};
use crate::retry::Retry;
use crate::scripts;
use crate::time::later;

impl<K: LockKind> Engine<K> {
    /// Releases one grant: a guard's own, or the owner's latest. The key's expiry is set to
    /// cover the grants that remain (not the released one's lease, and not the watchdog's
    /// when only fixed leases remain). `pending` is cleared once the release script is about
    /// to be sent: from then on a dropped future completes the release in the background;
    /// before that, nothing was released. It is set again when the script failed before
    /// changing anything: the grant is restored, still the caller's to release.
    pub(crate) async fn release(
        self: &Arc<Self>,
        hold: &Arc<Hold>,
        target: Target,
        pending: &mut bool,
    ) -> Result<Release> {
        let client = self.client();
        let mut gate = hold.gate().await;
        self.settle(hold, &mut gate).await?;
        let grant = match take_for_release(&mut gate, target) {
            Ok(grant) => grant,
            Err(nothing) => return Ok(nothing),
        };
        // What Redis must hold once this release is done: the grants that remain.
        let after = gate.count();
        let lease_ms = self.key_expiry(&gate, Instant::now(), None);
        let flight = InFlight::new(&mut gate, self, hold, lease_ms);
        *pending = false;
        let mut retry = Retry::attempts(client.config())
            .op("release")
            .kind(K::SPEC.name);
        // Whether a try may have run without us learning its outcome (a connection error): from
        // then on, tries bring the count to `after` instead of releasing one more hold.
        let mut unknown = false;
        let outcome = loop {
            let op = self.op(&hold.field, lease_ms, 0);
            let mut conn = client.conn_synced();
            let tried = if let Try::Trim { target } = next_try(unknown, after) {
                self.kind
                    .trim_script(&op, target)
                    .invoke_async::<i64>(&mut conn)
                    .await
                    .map(|found| {
                        let valid = grant.map(|g| self.valid_until(hold, g));
                        Ok(retried(found, after, valid, Instant::now()))
                    })
            } else {
                self.kind
                    .release_script(&op)
                    .invoke_async::<Value>(&mut conn)
                    .await
                    .map(|reply| self.kind.parse_release(&reply).ok_or(reply))
            };
            match tried {
                Ok(outcome) => break outcome,
                Err(e) if retry.again(&e).await => unknown |= is_connection_error(&e),
                // Unknown outcome: stays in flight, settled in the background.
                Err(e) if unknown || is_connection_error(&e) => {
                    return Err(self.write_error(&mut conn, e))
                }
                Err(e) => {
                    flight.settled();
                    // The script failed before changing anything (e.g. WRONGTYPE): the grant is
                    // still held, and still the caller's to release (a guard's drop does).
                    if let Some(g) = grant {
                        gate.restore(g);
                        *pending = true;
                    }
                    return Err(from_script(K::SPEC.name, self.name(), e));
                }
            }
        };
        flight.settled();
        if let Ok(outcome) = outcome {
            book_release(hold, &mut gate, outcome);
        }
        hold.set_watchdog(&gate);
        drop(gate);
        match outcome {
            // The release's own message wakes one waiter per client, ours included: waking a
            // local waiter directly as well cost a wasted try per release, and waking only
            // directly let the releasing task win its lock back in ~45 % of handoffs against
            // ~15 % when the message wakes (benches/results/HISTORY.md, experiments C and D).
            Ok(r) => Ok(r),
            Err(reply) => Err(LockError::UnexpectedReply {
                key: self.name().to_owned(),
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// Until when the hold `grant` belongs to certainly still existed in Redis (see
    /// [`Lease::valid_until`](crate::holds::Lease::valid_until)).
    fn valid_until(&self, hold: &Hold, grant: Grant) -> Instant {
        grant
            .lease
            .valid_until(hold.renewed_at(), self.client().config().watchdog_timeout())
    }

    /// Re-applies a grant's lease from now (MultiLock, once every member is taken): a fixed
    /// grant's deadline moves to now + `lease`, and the key gets the expiry that covers every
    /// grant the owner still has, by an owner-checked `PEXPIRE`. `Ok(false)`: the hold is gone.
    pub(crate) async fn reapply_lease(
        &self,
        hold: &Arc<Hold>,
        epoch: u64,
        id: GrantId,
        lease: Option<Duration>,
    ) -> Result<bool> {
        let mut gate = hold.gate().await;
        if gate.epoch() != epoch {
            return Ok(false);
        }
        let sent = Instant::now();
        if let Some(l) = lease {
            gate.set_deadline(id, later(sent, l));
        }
        let expiry_ms = self.key_expiry(&gate, sent, None);
        let mut conn = self.client().conn_synced();
        let set: i64 = scripts::expire(self.name(), &hold.field, expiry_ms)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| from_script(K::SPEC.name, self.name(), e))?;
        if set == 0 {
            hold.lose_gated(&mut gate);
        } else if lease.is_none() {
            hold.renewed(sent);
        }
        Ok(set == 1)
    }
}

/// What one try of a release sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::lock) enum Try {
    /// The kind's release script: releases one hold.
    Release,
    /// `lua/trim.lua` to `target`: releases only what is still there to release.
    Trim { target: u32 },
}

/// The next try of a release that leaves `after` holds: the release script, or, once an earlier
/// try may have run without us learning its outcome (`unknown`), the trim to `after`, which
/// cannot release twice.
pub(in crate::lock) fn next_try(unknown: bool, after: u32) -> Try {
    if unknown {
        Try::Trim { target: after }
    } else {
        Try::Release
    }
}

/// The grant a release gives back, taken out of the gate (`Ok(None)`: an owner-style release
/// with no grant known, which still asks Redis); `Err(NotHeld)` when a guard's grant is gone
/// (lost with its epoch, or released owner-style): nothing is sent.
pub(in crate::lock) fn take_for_release(
    gate: &mut HoldState,
    target: Target,
) -> std::result::Result<Option<Grant>, Release> {
    match target {
        Target::Grant { epoch, id } if epoch == gate.epoch() => {
            gate.take_grant(id).map(Some).ok_or(Release::NotHeld)
        }
        Target::Grant { .. } => Err(Release::NotHeld),
        Target::Latest => Ok(gate.take_latest()),
    }
}

/// What a release retried after an unknown outcome reports, from the hold count the trim to
/// `after` found (`lua/trim.lua`, which never lowers a count below `after`):
///
/// * more than `after`: the earlier try never ran, the trim released now;
/// * exactly `after`: the earlier try released, unless the hold was gone before it ran. With
///   holds left (`after > 0`) the key is still there, so it was not. With none left, the lease
///   tells: `valid` is when the hold could first have expired (`None`: no grant known, so no
///   lease to vouch for it). The earlier try ran before the trim replied (`replied`), so before
///   `valid` the hold was there when it ran: released. At or past it, the lease may have run out
///   first: reported lost, never a success that may not have happened;
/// * fewer than `after`: holds the owner counted are gone, lost.
pub(in crate::lock) fn retried(
    found: i64,
    after: u32,
    valid: Option<Instant>,
    replied: Instant,
) -> Release {
    let after = i64::from(after);
    match found.cmp(&after) {
        std::cmp::Ordering::Greater if after > 0 => Release::StillHeld,
        std::cmp::Ordering::Greater => Release::Released,
        std::cmp::Ordering::Equal if after > 0 => Release::StillHeld,
        std::cmp::Ordering::Equal if valid.is_some_and(|v| replied < v) => Release::Released,
        std::cmp::Ordering::Equal | std::cmp::Ordering::Less => Release::NotHeld,
    }
}

/// Books what a release script reported.
fn book_release(hold: &Hold, gate: &mut Gate, outcome: Release) {
    if ends_epoch(outcome, gate) {
        hold.lose_gated(gate);
    }
}

/// Whether a release that reported `outcome` ends the hold's epoch, `gate` holding the grants
/// that remain.
pub(in crate::lock) fn ends_epoch(outcome: Release, gate: &HoldState) -> bool {
    match outcome {
        Release::NotHeld => true,
        Release::StillHeld if gate.count() > 0 => false,
        // The last hold is gone: end the epoch, so a stale guard of this owner (one that was
        // detached and released owner-style) can never release a later hold. (A read release
        // says "still held" when other readers keep the lock.)
        Release::StillHeld | Release::Released => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retried_release_reports_what_the_trim_found() {
        let now = Instant::now();
        let valid = Some(now + Duration::from_secs(1));
        let expired = Some(now - Duration::from_millis(1));
        // The earlier try never ran: the trim released now.
        assert_eq!(retried(3, 2, valid, now), Release::StillHeld);
        assert_eq!(retried(1, 0, valid, now), Release::Released);
        assert_eq!(retried(1, 0, expired, now), Release::Released);
        // The earlier try released: holds left, or none left while the lease could not have
        // run out.
        assert_eq!(retried(2, 2, expired, now), Release::StillHeld);
        assert_eq!(retried(0, 0, valid, now), Release::Released);
        // None left and the lease may have run out before the earlier try ran (or no grant
        // known to vouch for it): lost, never a success that may not have happened.
        assert_eq!(retried(0, 0, expired, now), Release::NotHeld);
        assert_eq!(retried(0, 0, Some(now), now), Release::NotHeld);
        assert_eq!(retried(0, 0, None, now), Release::NotHeld);
        // Holds the owner counted are gone.
        assert_eq!(retried(1, 2, valid, now), Release::NotHeld);
        assert_eq!(retried(0, 2, valid, now), Release::NotHeld);
    }
}
