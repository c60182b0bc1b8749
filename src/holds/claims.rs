//! Acquisitions in flight for default owners: what lets a second acquire by the same default
//! owner (another future of the same task) be refused instead of silently re-entering.
//!
//! A claim names a lock and an owner id, not a hash field, so both sides of a read-write lock
//! (fields `<uuid>:<id>` and `<uuid>:<id>:write`) share one. Readers share a claim; anything
//! else claims alone. A claim lives exactly as long as the acquisition that made it (its guard
//! is a field of the acquire future), so a dropped acquire leaves nothing behind.

use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;

/// How an acquisition claims its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A read lock: other reads by the same owner may be in flight too.
    Shared,
    /// Any other kind: nothing else by the same owner may be in flight.
    Exclusive,
}

/// What is in flight for one (lock, owner).
#[derive(Debug, Default)]
struct InFlight {
    shared: u32,
    exclusive: bool,
}

/// The claims of one client, keyed by (lock name, owner id).
#[derive(Debug, Default)]
pub(crate) struct Claims {
    map: DashMap<(Arc<str>, u64), InFlight>,
}

impl Claims {
    /// Claims `key` for `owner`; `None` when a claim that excludes this one is in flight.
    pub(crate) fn claim(&self, key: &Arc<str>, owner: u64, mode: Mode) -> Option<Claim<'_>> {
        let id = (key.clone(), owner);
        match self.map.entry(id.clone()) {
            Entry::Vacant(v) => {
                v.insert(match mode {
                    Mode::Shared => InFlight {
                        shared: 1,
                        exclusive: false,
                    },
                    Mode::Exclusive => InFlight {
                        shared: 0,
                        exclusive: true,
                    },
                });
            }
            Entry::Occupied(mut o) => {
                let f = o.get_mut();
                if mode == Mode::Exclusive || f.exclusive {
                    return None;
                }
                f.shared += 1;
            }
        }
        Some(Claim {
            claims: self,
            id,
            mode,
        })
    }

    /// Claims in flight (none may outlive their acquisitions).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// One acquisition's claim, given up when dropped.
#[derive(Debug)]
pub(crate) struct Claim<'a> {
    claims: &'a Claims,
    id: (Arc<str>, u64),
    mode: Mode,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.claims.map.remove_if_mut(&self.id, |_, f| {
            match self.mode {
                Mode::Shared => f.shared = f.shared.saturating_sub(1),
                Mode::Exclusive => f.exclusive = false,
            }
            f.shared == 0 && !f.exclusive
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_claims_exclude_everything_and_readers_share() {
        let claims = Claims::default();
        let a: Arc<str> = "a".into();
        let b: Arc<str> = "b".into();
        let w = claims.claim(&a, 1, Mode::Exclusive).expect("free");
        assert!(claims.claim(&a, 1, Mode::Exclusive).is_none());
        assert!(claims.claim(&a, 1, Mode::Shared).is_none());
        // Another owner, or another lock, is another claim.
        let other_owner = claims.claim(&a, 2, Mode::Exclusive).expect("other owner");
        let other_lock = claims.claim(&b, 1, Mode::Exclusive).expect("other lock");
        drop(w);
        let r1 = claims.claim(&a, 1, Mode::Shared).expect("free again");
        let r2 = claims.claim(&a, 1, Mode::Shared).expect("readers share");
        assert!(claims.claim(&a, 1, Mode::Exclusive).is_none());
        drop(r1);
        assert!(
            claims.claim(&a, 1, Mode::Exclusive).is_none(),
            "a reader is left"
        );
        drop(r2);
        drop((other_owner, other_lock));
        assert_eq!(claims.len(), 0, "every claim given up");
        assert!(claims.claim(&a, 1, Mode::Exclusive).is_some());
    }
}
