//! What this client holds: one slot per (lock key, owner field).
//!
//! The slot is the client's ground truth for its own holds. Its async mutex (the *gate*)
//! serialises every script that changes this owner's hold count, so after an ambiguous outcome
//! (a cancelled future or a lost reply) the client knows exactly which count Redis should hold
//! and can trim back to it (`lua/trim.lua`) instead of guessing. Without the gate a cancelled
//! re-entry could not be undone without risking someone else's hold.
//!
//! Holds that Redis loses (expiry, `force_unlock`, restart) end an *epoch*: guards remember the
//! epoch they were acquired in, and a guard from an ended epoch is lost and never touches the
//! hold count of a later acquisition by the same owner.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use dashmap::DashMap;
use tokio::sync::{watch, Mutex, OwnedMutexGuard};

use crate::raw::Renewal;

#[derive(Debug, Default)]
pub(crate) struct SlotState {
    /// Holds this client knows it has in `epoch`.
    pub(crate) count: u32,
    /// How many of them were taken without an explicit lease (renewed by the watchdog).
    pub(crate) watchdog_holds: u32,
    /// Redis may hold more than `count` (an acquire with an unknown outcome) or more than it
    /// should (a release with an unknown outcome): trim before the next script.
    pub(crate) dirty: bool,
    /// The epoch `count` refers to.
    pub(crate) epoch: u64,
}

pub(crate) type Gate = OwnedMutexGuard<SlotState>;

pub(crate) struct Slot {
    pub(crate) key: Arc<str>,
    pub(crate) field: Arc<str>,
    /// How the watchdog renews this hold.
    pub(crate) renewal: Renewal,
    gate: Arc<Mutex<SlotState>>,
    epoch: watch::Sender<u64>,
    /// Mirrors `watchdog_holds > 0` so the watchdog can scan without taking gates.
    watchdog: AtomicBool,
    renewed_at: parking_lot::Mutex<Instant>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("key", &self.key)
            .field("field", &self.field)
            .field("epoch", &*self.epoch.borrow())
            .finish()
    }
}

impl Slot {
    /// Takes the gate, resetting the count when Redis lost this epoch's holds.
    pub(crate) async fn gate(self: &Arc<Self>) -> Gate {
        let mut gate = self.gate.clone().lock_owned().await;
        let current = self.epoch();
        if gate.epoch != current {
            gate.count = 0;
            gate.watchdog_holds = 0;
            gate.epoch = current;
        }
        gate
    }

    pub(crate) fn epoch(&self) -> u64 {
        *self.epoch.borrow()
    }

    pub(crate) fn epochs(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }

    /// Ends the current epoch if it is still `seen`: every hold in it is lost.
    /// Returns whether this call ended it.
    pub(crate) fn lose(&self, seen: u64) -> bool {
        let ended = self.epoch.send_if_modified(|e| {
            if *e == seen {
                *e += 1;
                true
            } else {
                false
            }
        });
        if ended {
            self.watchdog.store(false, Ordering::Release);
        }
        ended
    }

    /// Ends the epoch under the gate and resets the count.
    pub(crate) fn lose_gated(&self, gate: &mut Gate) {
        self.lose(gate.epoch);
        gate.epoch = self.epoch();
        gate.count = 0;
        gate.watchdog_holds = 0;
    }

    /// Mirrors the gate's watchdog holds. The renewal clock starts when watching starts; it only
    /// moves on with confirmed renewals ([`Slot::renewed`]), never merely because a script ran.
    pub(crate) fn set_watchdog(&self, gate: &Gate) {
        let on = gate.watchdog_holds > 0;
        let was = self.watchdog.swap(on, Ordering::AcqRel);
        if on && !was {
            *self.renewed_at.lock() = Instant::now();
        }
    }

    pub(crate) fn watchdog(&self) -> bool {
        self.watchdog.load(Ordering::Acquire)
    }

    /// Records a confirmed renewal (or watchdog acquisition) sent at `at`.
    pub(crate) fn renewed(&self, at: Instant) {
        *self.renewed_at.lock() = at;
    }

    pub(crate) fn renewed_at(&self) -> Instant {
        *self.renewed_at.lock()
    }
}

#[derive(Default)]
pub(crate) struct Holds {
    slots: DashMap<(Arc<str>, Arc<str>), Arc<Slot>>,
}

impl Holds {
    pub(crate) fn slot(&self, key: &str, field: &str, renewal: Renewal) -> Arc<Slot> {
        let k: (Arc<str>, Arc<str>) = (key.into(), field.into());
        self.slots
            .entry(k.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    key: k.0,
                    field: k.1,
                    renewal,
                    gate: Arc::new(Mutex::new(SlotState::default())),
                    epoch: watch::channel(0).0,
                    watchdog: AtomicBool::new(false),
                    renewed_at: parking_lot::Mutex::new(Instant::now()),
                })
            })
            .clone()
    }

    /// Drops the slot from the map when it holds nothing and the caller's reference is the
    /// only one besides the map's.
    pub(crate) fn release_slot(&self, slot: &Arc<Slot>) {
        let key = (slot.key.clone(), slot.field.clone());
        self.slots.remove_if(&key, |_, s| {
            Arc::ptr_eq(s, slot)
                && Arc::strong_count(s) == 2
                && s.gate
                    .try_lock()
                    .map(|g| g.count == 0 && !g.dirty)
                    .unwrap_or(false)
        });
    }

    /// Drops every slot that holds nothing and that nobody references any more (those a
    /// `release_slot` could not drop because another reference was alive at that moment).
    pub(crate) fn sweep(&self) {
        self.slots.retain(|_, s| {
            Arc::strong_count(s) > 1
                || s.gate
                    .try_lock()
                    .map(|g| g.count > 0 || g.dirty)
                    .unwrap_or(true)
        });
    }

    /// Slots whose holds the watchdog must renew.
    pub(crate) fn watched(&self) -> Vec<Arc<Slot>> {
        self.slots
            .iter()
            .filter(|e| e.value().watchdog())
            .map(|e| e.value().clone())
            .collect()
    }

    pub(crate) fn any_watched(&self) -> bool {
        self.slots.iter().any(|e| e.value().watchdog())
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}
