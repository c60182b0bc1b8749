//! Settling unknown outcomes: after a script whose outcome was never learned (a dropped
//! future, a lost reply), the owner's gate knows how many holds Redis *should* have, and
//! `lua/trim.lua` brings it back to that, now or in the background.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Engine;
use crate::error::{from_script, Result};
use crate::holds::{Gate, Hold};
use crate::raw::{KindExt, LockKind};
use crate::retry::{Retry, Transient};
use crate::time::later;

impl<K: LockKind> Engine<K> {
    /// Brings Redis back to the grants the gate knows when an earlier outcome was unknown.
    pub(super) async fn settle(&self, hold: &Hold, gate: &mut Gate) -> Result<()> {
        if !gate.is_dirty() {
            return Ok(());
        }
        let lease_ms = self.key_expiry(gate, Instant::now(), None);
        let mut conn = self.client().conn();
        let op = self.op(&hold.field, lease_ms, 0);
        let found: i64 = self
            .kind
            .trim_script(&op, gate.count())
            .invoke_async(&mut conn)
            .await
            .map_err(|e| from_script(K::SPEC.name, self.name(), e))?;
        gate.settled();
        if found < i64::from(gate.count()) {
            // Some holds we counted are gone from Redis.
            hold.lose_gated(gate);
        }
        // When the trim freed the lock, its message wakes the waiters.
        hold.set_watchdog(gate);
        Ok(())
    }

    /// Settles a dirty hold in the background (after a cancelled or failed script).
    pub(super) fn spawn_settle(self: &Arc<Self>, hold: Arc<Hold>, lease_ms: u64) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(lock = %self.name(), "no tokio runtime: the unknown hold is settled by the next operation or its lease");
            return;
        };
        let engine = self.clone();
        rt.spawn(async move {
            let config = engine.client().config().clone();
            // Retry while the unknown hold may still be alive in Redis: for its lease. Past
            // that, an owner left with no hold has nothing renewing it, so it has expired and
            // the hold can go (before, a hold dirtied during an outage longer than the retries
            // stayed in the client's map for good). Should the unknown acquire still run
            // later, the owner's next acquire finds more holds than it knows and trims them.
            let give_up = later(Instant::now(), Duration::from_millis(lease_ms));
            let mut retry = Retry::until(&config, give_up).op("settle").kind(K::SPEC.name);
            loop {
                let mut gate = hold.gate().await;
                match engine.settle(&hold, &mut gate).await {
                    Ok(()) => break,
                    Err(e) if e.is_transient() => match retry.pause_after(&e) {
                        Some(pause) => {
                            drop(gate);
                            tokio::time::sleep(pause).await;
                        }
                        None => {
                            if gate.count() == 0 {
                                gate.settled();
                            }
                            tracing::debug!(lock = %engine.name(), error = %e, "unknown hold not settled; its lease has run out");
                            break;
                        }
                    },
                    Err(e) => {
                        tracing::warn!(lock = %engine.name(), error = %e, "can't settle an unknown hold");
                        break;
                    }
                }
            }
            engine.client().registry().forget(&hold);
        });
    }
}
