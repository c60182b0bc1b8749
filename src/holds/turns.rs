//! Turns: how many times in a row this client took one lock name, so that after a streak it
//! lets a waiter elsewhere have a turn (issue 41 item 1). The exclusive kinds count (the RLock,
//! fenced, non-reentrant, and the read-write lock's write side, whose turn also lets this
//! client's own parked readers in); a read grant neither counts nor ends a turn.
//!
//! A task that releases and asks again at once, or whose first try lost by a hair and whose
//! second one is already on the connection, reaches the server before a parked waiter that a
//! release message has to wake first. Left alone, two such busy tasks hand the lock back and
//! forth while parked waiters (in this process or another) wait out dozens of handoffs. After
//! [`STREAK`] grants in a row, this client's next *first* tries (a new acquire, or the first
//! try after subscribing: tries no message woke) look before they take (`PTTL`, see
//! `lock/engine/mod.rs`), which hands the parked waiters that the release woke, here and
//! elsewhere, the next grant; the next grant to this client ends the turn.
//!
//! Only grants that followed contention count: a grant counts when a try of this client found
//! the name held since the client's last grant of it. A name one task takes alone (W1, W2's
//! distinct names) never gives a turn away and never pays the look.
//!
//! One counter per hash slot of a fixed table (no entry per name, nothing to clean up): two
//! names in one slot only share their streak, so a turn comes sooner, which costs one `PTTL`.

use std::sync::atomic::{AtomicU32, Ordering};

/// Grants in a row after which this client gives a turn away.
pub(crate) const STREAK: u32 = 8;

/// The slots of the table (a power of two).
const SLOTS: usize = 256;

/// Set in a slot while its names' first tries look before taking.
const YIELDING: u32 = 1 << 31;

/// Set when a try of this client found one of the slot's names held (since the last grant).
const CONTENDED: u32 = 1 << 30;

/// The streak's count.
const COUNT: u32 = CONTENDED - 1;

/// The per-client table of streaks.
pub(crate) struct Turns {
    slots: Box<[AtomicU32]>,
}

impl Default for Turns {
    fn default() -> Self {
        Turns {
            slots: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

impl Turns {
    fn slot(&self, name: &str) -> &AtomicU32 {
        // FNV-1a: cheap, and stable within a process.
        let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        &self.slots[hash as usize & (SLOTS - 1)]
    }

    /// Books that a try of this client found `name` held.
    pub(crate) fn held(&self, name: &str) {
        let slot = self.slot(name);
        if slot.load(Ordering::Acquire) & CONTENDED == 0 {
            slot.fetch_or(CONTENDED, Ordering::AcqRel);
        }
    }

    /// Books one grant of `name` to this client: ends a turn given away, or, when a try found
    /// the name held since the last grant, counts the streak and, at [`STREAK`], gives the
    /// next turn away. An uncontended grant changes nothing.
    pub(crate) fn granted(&self, name: &str) {
        let slot = self.slot(name);
        let _ = slot.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| match v {
            v if v & YIELDING != 0 => Some(1),
            v if v & CONTENDED != 0 && (v & COUNT) + 1 >= STREAK => Some(YIELDING),
            v if v & CONTENDED != 0 => Some((v & COUNT) + 1),
            _ => None,
        });
    }

    /// Whether this client's first tries of `name` look before they take.
    pub(crate) fn yielding(&self, name: &str) -> bool {
        self.slot(name).load(Ordering::Acquire) & YIELDING != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contended_streak_gives_one_turn_away_and_the_next_grant_ends_it() {
        let turns = Turns::default();
        let contended = |n: u32| {
            for _ in 0..n {
                turns.held("a");
                turns.granted("a");
            }
        };
        contended(STREAK - 1);
        assert!(!turns.yielding("a"));
        contended(1);
        assert!(turns.yielding("a"));
        // The next grant (whoever of this client took it) ends the turn and starts a streak.
        turns.granted("a");
        assert!(!turns.yielding("a"));
        contended(STREAK - 2);
        assert!(!turns.yielding("a"));
        contended(1);
        assert!(turns.yielding("a"));
    }

    #[test]
    fn uncontended_grants_never_give_a_turn_away() {
        let turns = Turns::default();
        for _ in 0..10 * STREAK {
            turns.granted("a");
        }
        assert!(!turns.yielding("a"));
        // Contention seen once counts one grant, not the uncontended ones around it.
        turns.held("a");
        for _ in 0..10 * STREAK {
            turns.granted("a");
        }
        assert!(!turns.yielding("a"));
    }
}
