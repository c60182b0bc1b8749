//! Drop guards of the engine: what happens when an operation ends early, however it ends
//! (an error, a timeout, or a dropped future).

use std::sync::Arc;

use redis::Value;

use super::Engine;
use crate::holds::{Gate, Hold};
use crate::raw::LockKind;

/// Marks a hold count uncertain if the script in flight never reports back (the future is
/// dropped, or the connection fails): the hold becomes dirty (Redis must be trimmed to the
/// grants the gate knows) and a background task trims it.
pub(super) struct InFlight<'g, K: LockKind> {
    gate: &'g mut Gate,
    engine: &'g Arc<Engine<K>>,
    hold: &'g Arc<Hold>,
    lease_ms: u64,
    armed: bool,
}

impl<'g, K: LockKind> InFlight<'g, K> {
    pub(super) fn new(
        gate: &'g mut Gate,
        engine: &'g Arc<Engine<K>>,
        hold: &'g Arc<Hold>,
        lease_ms: u64,
    ) -> Self {
        InFlight {
            gate,
            engine,
            hold,
            lease_ms,
            armed: true,
        }
    }

    pub(super) fn settled(mut self) {
        self.armed = false;
    }
}

impl<K: LockKind> Drop for InFlight<'_, K> {
    fn drop(&mut self) {
        if self.armed {
            self.gate.unknown();
            self.hold.set_watchdog(self.gate);
            self.engine.spawn_settle(self.hold.clone(), self.lease_ms);
        }
    }
}

/// Forgets an acquisition's hold in the client's map when the acquisition ends, however it
/// ends; [`Holds::forget`](crate::holds::Holds::forget) keeps holds still in use.
pub(super) struct Forget<'a, K: LockKind> {
    pub(super) engine: &'a Engine<K>,
    pub(super) hold: &'a Arc<Hold>,
}

impl<K: LockKind> Drop for Forget<'_, K> {
    fn drop(&mut self) {
        self.engine.client().registry().forget(self.hold);
    }
}

/// Leaves the wait queue (fair lock) when a wait ends without the lock, however it ends:
/// timeout, error or a dropped future. Kinds without a queue have no cancel script.
pub(super) struct QueueExit<'a, K: LockKind> {
    pub(super) engine: &'a Engine<K>,
    pub(super) field: &'a str,
    pub(super) wait_ms: u64,
    pub(super) armed: bool,
}

impl<K: LockKind> Drop for QueueExit<'_, K> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let op = self.engine.op(self.field, 0, self.wait_ms);
        let Some(inv) = self.engine.kind.cancel_script(&op) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut conn = self.engine.client().conn_synced();
        let name = self.engine.name().to_owned();
        rt.spawn(async move {
            if let Err(e) = inv.invoke_async::<Value>(&mut conn).await {
                // The waiter's deadline evicts it from the queue anyway.
                tracing::warn!(lock = %name, error = %e, "can't leave the fair-lock queue");
            }
        });
    }
}
