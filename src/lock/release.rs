//! Releasing: one grant given back (a guard's own, or the owner's latest) by the kind's release
//! script with its unlock latch, and a lease re-applied (MultiLock).

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::cleanup::InFlight;
use super::engine::Target;
use super::Lock;
use crate::config::millis;
use crate::error::{from_script, is_connection_error, LockError, Result};
use crate::holds::{Gate, Grant, GrantId, Hold};
use crate::keys;
use crate::raw::{KindExt, LockKind, Release};
use crate::retry::Retry;
use crate::scripts::{self, Latch};
use crate::time::later;

impl<K: LockKind> Lock<K> {
    /// Releases one grant: a guard's own, or the owner's latest. The key's expiry is set to
    /// cover the grants that remain (not the released one's lease, and not the watchdog's
    /// when only fixed leases remain). `pending` is cleared once the release script is about
    /// to be sent: from then on a dropped future completes the release in the background;
    /// before that, nothing was released.
    pub(crate) async fn release(
        &self,
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
        let lease_ms = self.key_expiry(&gate, Instant::now(), None);
        let request_id = keys::request_id();
        let latch = keys::unlock_latch(self.name(), &request_id);
        let latch_ttl = millis(client.config().latch_ttl());
        let flight = InFlight::new(&mut gate, self, hold, lease_ms);
        *pending = false;
        let mut retry = Retry::attempts(client.config());
        let reply = loop {
            let op = self.op(&hold.field, lease_ms, 0);
            let latch = Latch {
                key: &latch,
                ttl_ms: latch_ttl,
            };
            let inv = self.shared.kind.release_script(&op, &latch);
            let mut conn = client.conn_synced();
            match inv.invoke_async::<Value>(&mut conn).await {
                Ok(v) => break v,
                // Same request id on every try: the latch makes a repeat return the first result.
                Err(e) if retry.again(&e).await => {}
                // Unknown outcome: stays in flight, settled in the background.
                Err(e) if is_connection_error(&e) => return Err(self.write_error(&mut conn, e)),
                Err(e) => {
                    flight.settled();
                    // The script failed before changing anything (e.g. WRONGTYPE).
                    if let Some(g) = grant {
                        gate.restore(g);
                    }
                    return Err(from_script(self.name(), e));
                }
            }
        };
        flight.settled();
        let outcome = self.shared.kind.parse_release(&reply);
        if let Some(outcome) = outcome {
            book_release(hold, &mut gate, outcome);
        }
        hold.set_watchdog(&gate);
        drop(gate);
        if matches!(outcome, Some(Release::Released | Release::StillHeld)) {
            self.delete_latch(latch);
        }
        match outcome {
            // The release's own message wakes one waiter per client, ours included: waking a
            // local waiter directly as well cost a wasted try per release, and waking only
            // directly let the releasing task win its lock back in ~45 % of handoffs against
            // ~15 % when the message wakes (docs/benchmarks.md, experiments C and D).
            Some(r) => Ok(r),
            None => Err(LockError::UnexpectedReply {
                key: self.name().to_owned(),
                reply: format!("{reply:?}"),
            }),
        }
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
            .map_err(|e| from_script(self.name(), e))?;
        if set == 0 {
            hold.lose_gated(&mut gate);
        } else if lease.is_none() {
            hold.renewed(sent);
        }
        Ok(set == 1)
    }

    /// The latch only matters while the unlock might be retried: it is deleted shortly after,
    /// in a batch (Redisson sends one `DEL` per unlock); its PX bounds it if that is lost.
    fn delete_latch(&self, latch: String) {
        self.client().delete_latch(latch);
    }
}

/// The grant a release gives back, taken out of the gate (`Ok(None)`: an owner-style release
/// with no grant known, which still asks Redis); `Err(NotHeld)` when a guard's grant is gone
/// (lost with its epoch, or released owner-style): nothing is sent.
fn take_for_release(
    gate: &mut Gate,
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

/// Books what a release script reported.
fn book_release(hold: &Hold, gate: &mut Gate, outcome: Release) {
    match outcome {
        Release::NotHeld => hold.lose_gated(gate),
        Release::StillHeld if gate.count() > 0 => {}
        // The last hold is gone: end the epoch, so a stale guard of this owner (one that was
        // detached and released owner-style) can never release a later hold. (A read release
        // says "still held" when other readers keep the lock.)
        Release::StillHeld | Release::Released => hold.lose_gated(gate),
    }
}
