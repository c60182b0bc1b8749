//! What this client holds: one [`Hold`] per (lock key, owner field), and in it one [`Grant`]
//! per acquisition that has not been released yet.
//!
//! The hold is the client's ground truth for its own holds. Its async mutex (the *gate*)
//! serialises every script that changes this owner's hold count, so after an ambiguous outcome
//! (a cancelled future or a lost reply) the client knows exactly which count Redis should hold
//! and can trim back to it (`lua/trim.lua`) instead of guessing. Without the gate a cancelled
//! re-entry could not be undone without risking someone else's hold.
//!
//! Each grant remembers its own lease (the watchdog's, or a fixed deadline), so whenever a
//! script sets the key's expiry, the client asks [`HoldState::expiry_ms`] for the expiry that
//! covers every grant still outstanding: re-entering with a shorter lease, releasing a watchdog
//! grant while a fixed one remains, or releasing one of two fixed grants never shortens the key
//! below what a guard believes (docs/locks.md, "Re-entry and leases").
//!
//! Holds that Redis loses (expiry, `force_unlock`, restart) end an *epoch*: guards remember the
//! epoch they were acquired in, and a guard from an ended epoch is lost and never touches the
//! hold count of a later acquisition by the same owner.
//!
//! Before that, a watched hold can be *at risk*: a renewal failed, or none was confirmed for
//! two renewal periods, while its lease is still valid ([`Hold::risk`]). The next confirmed
//! renewal clears it ([`Hold::renewed`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use tokio::sync::{Mutex, Notify, OwnedMutexGuard};

use crate::config::millis;
use crate::raw::Renewal;
use crate::scripts::Layout;

/// What a hold needs to be released without its lock handle ([`Client::shutdown`]): the lock
/// kind's channel prefix and hash layout, and whether its releases publish.
///
/// [`Client::shutdown`]: crate::Client::shutdown
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HoldKind {
    /// The kind's name (`KindSpec::name`: the metrics' `kind` label, `Client::holds`).
    pub(crate) name: &'static str,
    /// The kind's unlock channel prefix (`KindSpec::channel_prefix`).
    pub(crate) channel_prefix: &'static str,
    /// How `lua/trim.lua` reads the hash.
    pub(crate) layout: Layout,
    /// Whether releases publish (not the spin lock).
    pub(crate) publishes: bool,
}

/// How one grant's lease is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(Hash))]
pub(crate) enum Lease {
    /// Renewed by the watchdog (taken without an explicit lease).
    Watchdog,
    /// Fixed: the lock must not expire before `deadline` (acquire sent + `lease`).
    Fixed { lease: Duration, deadline: Instant },
}

impl Lease {
    /// Until when the grant's hold cannot have expired in Redis, by the same rule as
    /// `LockGuard::is_lost`: its lease (a fixed deadline, or the last confirmed renewal
    /// `renewed_at` plus the watchdog lease) less Redlock's drift allowance for a server clock
    /// that runs fast (`time::drift`). Before this instant the hold was certainly still there.
    pub(crate) fn valid_until(&self, renewed_at: Instant, watchdog: Duration) -> Instant {
        match *self {
            Lease::Fixed { lease, deadline } => deadline
                .checked_sub(crate::time::drift(lease))
                .unwrap_or(deadline),
            Lease::Watchdog => renewed_at + watchdog.saturating_sub(crate::time::drift(watchdog)),
        }
    }
}

/// Identifies one grant within its hold.
pub(crate) type GrantId = u64;

/// One acquisition not released yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(Hash))]
pub(crate) struct Grant {
    pub(crate) id: GrantId,
    pub(crate) lease: Lease,
}

/// The gate-protected state of one hold. Fields are private: every change goes through a
/// transition method, which keeps the invariants (grants in acquisition order, ids unique and
/// increasing, a count of zero means no grants).
#[derive(Debug, Default)]
// The model checker (`lock/model.rs`) keeps hold states in its explored states.
#[cfg_attr(test, derive(Clone, PartialEq, Eq, Hash))]
pub(crate) struct HoldState {
    /// Outstanding grants in `epoch`, oldest first (ids increase).
    grants: Vec<Grant>,
    /// Redis may hold more than the grants (an acquire with an unknown outcome) or more than
    /// it should (a release with an unknown outcome): trim before the next script.
    dirty: bool,
    /// The epoch the grants belong to.
    epoch: u64,
    next_id: GrantId,
}

impl HoldState {
    /// Holds this client knows it has: what Redis's hold count should be.
    pub(crate) fn count(&self) -> u32 {
        u32::try_from(self.grants.len()).unwrap_or(u32::MAX)
    }

    /// The latest deadline of the outstanding fixed-lease grants, if any.
    pub(crate) fn fixed_deadline(&self) -> Option<Instant> {
        self.grants
            .iter()
            .filter_map(|g| match g.lease {
                Lease::Fixed { deadline, .. } => Some(deadline),
                Lease::Watchdog => None,
            })
            .max()
    }

    /// Whether any outstanding grant is renewed by the watchdog.
    pub(crate) fn watched(&self) -> bool {
        self.grants.iter().any(|g| g.lease == Lease::Watchdog)
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The `PEXPIRE` that covers every outstanding grant, sent at `now`, plus `extra_ms` for an
    /// acquisition in flight: a watchdog grant needs `watchdog_ms`, a fixed one what is left of
    /// its lease (rounded up: `millis` never falls short). `None` when there is nothing to cover. Never below 1 ms: a grant
    /// whose lease already ran out is reported lost by its guard anyway.
    pub(crate) fn expiry_ms(
        &self,
        now: Instant,
        watchdog_ms: u64,
        extra_ms: Option<u64>,
    ) -> Option<u64> {
        let grants = self.grants.iter().map(|g| match g.lease {
            Lease::Watchdog => watchdog_ms,
            Lease::Fixed { deadline, .. } => millis(deadline.saturating_duration_since(now)),
        });
        grants.chain(extra_ms).max().map(|ms| ms.max(1))
    }

    /// A grant was taken (the acquire script said so).
    pub(crate) fn taken(&mut self, lease: Lease) -> GrantId {
        let id = self.next_id;
        self.next_id += 1;
        self.grants.push(Grant { id, lease });
        id
    }

    /// Takes grant `id` out for release; `None` when it is not outstanding (released already,
    /// by owner-style unlock, or lost with its epoch).
    pub(crate) fn take_grant(&mut self, id: GrantId) -> Option<Grant> {
        let at = self.grants.iter().position(|g| g.id == id)?;
        Some(self.grants.remove(at))
    }

    /// Takes the latest grant out for an owner-style release (Redisson's `unlock()`, which
    /// releases "one hold"; re-entrant code releases the inner one first).
    pub(crate) fn take_latest(&mut self) -> Option<Grant> {
        self.grants.pop()
    }

    /// Puts back a grant taken out for a release that certainly did not run.
    pub(crate) fn restore(&mut self, grant: Grant) {
        let at = self.grants.partition_point(|g| g.id < grant.id);
        self.grants.insert(at, grant);
    }

    /// The outstanding grants whose id is not in `except`.
    pub(crate) fn count_except(&self, except: &[GrantId]) -> u32 {
        let n = self
            .grants
            .iter()
            .filter(|g| !except.contains(&g.id))
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Moves a fixed grant's deadline (its lease was re-applied from a later instant).
    pub(crate) fn set_deadline(&mut self, id: GrantId, deadline: Instant) {
        if let Some(g) = self.grants.iter_mut().find(|g| g.id == id) {
            if let Lease::Fixed { deadline: d, .. } = &mut g.lease {
                *d = deadline;
            }
        }
    }

    /// A script's outcome is unknown: Redis must be trimmed to [`count`](Self::count).
    pub(crate) fn unknown(&mut self) {
        self.dirty = true;
    }

    /// Redis was brought back to [`count`](Self::count).
    pub(crate) fn settled(&mut self) {
        self.dirty = false;
    }

    /// Every grant is gone (the epoch ended and `epoch` is the new one).
    fn clear(&mut self, epoch: u64) {
        self.grants.clear();
        self.epoch = epoch;
    }

    /// Drops the grants when the hold's epoch (`current`) has moved on from theirs: Redis lost
    /// them. Run whenever the gate is taken.
    pub(crate) fn catch_up(&mut self, current: u64) {
        if self.epoch != current {
            self.clear(current);
        }
    }

    /// The outstanding grants, oldest first (the model checker reads them).
    #[cfg(test)]
    pub(crate) fn grants(&self) -> &[Grant] {
        &self.grants
    }
}

pub(crate) type Gate = OwnedMutexGuard<HoldState>;

/// One owner's holds on one lock key.
pub(crate) struct Hold {
    pub(crate) key: Arc<str>,
    pub(crate) field: Arc<str>,
    /// How the watchdog renews this hold.
    pub(crate) renewal: Renewal,
    /// How to release it without its lock handle.
    pub(crate) kind: HoldKind,
    gate: Arc<Mutex<HoldState>>,
    /// The current epoch; `ended` wakes those waiting for it to move (`LockGuard::lost`), and
    /// those waiting for the hold to go at risk (`LockGuard::at_risk`), and the owner's acquires
    /// waiting for a background release (`Hold::live_grants`): each re-checks what it waits for. An atomic and a `Notify` rather than a `watch` channel: a hold exists per
    /// waiting owner too, and the channel's shared state (eight notifiers) was about 380 bytes
    /// of each.
    epoch: AtomicU64,
    ended: Notify,
    /// Mirrors "a watchdog grant is outstanding" so the watchdog can scan without taking gates.
    watchdog: AtomicBool,
    /// A renewal failed or is late while the lease is still valid; cleared by a confirmed
    /// renewal.
    at_risk: AtomicBool,
    /// The last confirmed renewal, as nanoseconds after [`CLOCK_BASE`] (an atomic of 8 bytes
    /// rather than a mutex around an `Instant` of 24: a hold exists per parked waiter too).
    renewed_at: AtomicU64,
    /// Grants whose guard was dropped (or whose `unlock()` failed) and whose release runs in the
    /// background, by id: as far as their owner can tell they are released, so its next acquire
    /// waits for them instead of counting them as held ([`Hold::live_grants`]). Read beside the
    /// gate's grants, so an id whose grant is already out counts for nothing. `pending` is their
    /// number, for the acquire's one-load check.
    releasing: parking_lot::Mutex<Vec<GrantId>>,
    pending: AtomicU32,
    /// Mirrors of the gate for `Client::holds` and the hold gauges (read without the gate):
    /// since when the owner holds the lock ([`stamp`] + 1; 0: no grant), and the latest
    /// deadline of its fixed-lease grants ([`stamp`] + 1; 0: none). Written with the watch
    /// flag ([`Hold::set_watchdog`]), under the gate.
    since: AtomicU64,
    fixed_until: AtomicU64,
}

/// The instant hold timestamps count from; set before the first hold is made, so every instant
/// a hold records is at or after it.
static CLOCK_BASE: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

fn stamp(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*CLOCK_BASE).as_nanos()).unwrap_or(u64::MAX)
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("key", &self.key)
            .field("field", &self.field)
            .field("epoch", &self.epoch())
            .finish()
    }
}

impl Hold {
    fn new(key: Arc<str>, field: Arc<str>, renewal: Renewal, kind: HoldKind) -> Hold {
        std::sync::LazyLock::force(&CLOCK_BASE);
        Hold {
            key,
            field,
            renewal,
            kind,
            gate: Arc::new(Mutex::new(HoldState::default())),
            epoch: AtomicU64::new(0),
            ended: Notify::new(),
            watchdog: AtomicBool::new(false),
            at_risk: AtomicBool::new(false),
            renewed_at: AtomicU64::new(stamp(Instant::now())),
            releasing: parking_lot::Mutex::new(Vec::new()),
            pending: AtomicU32::new(0),
            since: AtomicU64::new(0),
            fixed_until: AtomicU64::new(0),
        }
    }

    /// Takes the gate, dropping the grants when Redis lost this epoch's holds.
    pub(crate) async fn gate(self: &Arc<Self>) -> Gate {
        crate::sched::point();
        let mut gate = self.gate.clone().lock_owned().await;
        gate.catch_up(self.epoch());
        gate
    }

    pub(crate) fn epoch(&self) -> u64 {
        let epoch = self.epoch.load(Ordering::Acquire);
        crate::sched::point();
        epoch
    }

    /// Resolves once the epoch is no longer `seen` (at once if it already moved on).
    pub(crate) async fn epoch_ended(&self, seen: u64) {
        loop {
            let notified = self.ended.notified();
            tokio::pin!(notified);
            // Registered before the check, so an end in between is not missed.
            notified.as_mut().enable();
            if self.epoch() != seen {
                return;
            }
            notified.await;
        }
    }

    /// Ends the current epoch if it is still `seen`: every hold in it is lost.
    /// Returns whether this call ended it.
    pub(crate) fn lose(&self, seen: u64) -> bool {
        crate::sched::point();
        let ended = self
            .epoch
            .compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if ended {
            self.watchdog.store(false, Ordering::Release);
            self.since.store(0, Ordering::Release);
            self.fixed_until.store(0, Ordering::Release);
            self.ended.notify_waiters();
        }
        ended
    }

    /// Ends the epoch under the gate and drops its grants.
    pub(crate) fn lose_gated(&self, gate: &mut Gate) {
        self.lose(gate.epoch);
        gate.clear(self.epoch());
    }

    /// Mirrors the gate's watchdog grants, and whether (since when) it has grants and their
    /// fixed deadline (`Client::holds`). The renewal clock starts when watching starts; it
    /// only moves on with confirmed renewals ([`Hold::renewed`]), never merely because a script
    /// ran. Called under the gate after every change of its grants.
    pub(crate) fn set_watchdog(&self, gate: &HoldState) {
        if gate.count() == 0 {
            self.since.store(0, Ordering::Release);
        } else if self.since.load(Ordering::Acquire) == 0 {
            // Grants without `held_from` (none is booked so now): held from now on.
            self.since
                .store(stamp(Instant::now()) + 1, Ordering::Release);
        }
        let fixed = gate.fixed_deadline().map_or(0, |d| stamp(d) + 1);
        if self.fixed_until.load(Ordering::Relaxed) != fixed {
            self.fixed_until.store(fixed, Ordering::Release);
        }
        let on = gate.watched();
        let was = self.watchdog.swap(on, Ordering::AcqRel);
        if on && !was {
            self.renewed(Instant::now());
        }
    }

    /// A grant taken by a script sent `at` was booked: the hold is held since then unless it
    /// already was (a re-entry does not move it). Call before [`Hold::set_watchdog`], under the
    /// gate; `at` is the acquire's own instant, so no clock is read for it.
    pub(crate) fn held_from(&self, at: Instant) {
        if self.since.load(Ordering::Acquire) == 0 {
            self.since.store(stamp(at) + 1, Ordering::Release);
        }
    }

    pub(crate) fn watchdog(&self) -> bool {
        let on = self.watchdog.load(Ordering::Acquire);
        crate::sched::point();
        on
    }

    /// Records a confirmed renewal (or watchdog acquisition) sent at `at`: the hold is no
    /// longer at risk.
    pub(crate) fn renewed(&self, at: Instant) {
        self.renewed_at.store(stamp(at), Ordering::Release);
        self.at_risk.store(false, Ordering::Release);
    }

    /// Marks the hold at risk (a renewal failed, or is late). Returns whether it was not at
    /// risk before; then those waiting for it are woken.
    pub(crate) fn risk(&self) -> bool {
        let was = self.at_risk.swap(true, Ordering::AcqRel);
        if !was {
            self.ended.notify_waiters();
        }
        !was
    }

    /// Whether a renewal failed or was found late since the last confirmed one.
    pub(crate) fn is_at_risk(&self) -> bool {
        self.at_risk.load(Ordering::Acquire)
    }

    /// Wakes at the next change a guard may wait for: the epoch ended or the hold went at risk.
    /// Enable it before checking, so a change in between is not missed.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.ended.notified()
    }

    pub(crate) fn renewed_at(&self) -> Instant {
        *CLOCK_BASE + Duration::from_nanos(self.renewed_at.load(Ordering::Acquire))
    }
}

#[derive(Default)]
pub(crate) struct Holds {
    holds: DashMap<(Arc<str>, Arc<str>), Arc<Hold>>,
    /// Permits of permit-expirable semaphores renewed by the watchdog (`PermitGuard`).
    pub(crate) permits: permits::Permits,
    /// Acquisitions in flight for default owners (a second one by the same owner is refused).
    pub(crate) claims: claims::Claims,
    /// Write acquires waiting, per lock name (the read-write lock's writer preference).
    pub(crate) writers: writers::Writers,
    /// Grants in a row per lock name (hashed), and the turns given away after a streak.
    pub(crate) turns: turns::Turns,
}

impl Holds {
    /// The hold of `field` on `key`, made when there is none. The names are shared with the
    /// lock handle that asks (no copy per acquisition).
    pub(crate) fn hold(
        &self,
        key: &Arc<str>,
        field: &Arc<str>,
        renewal: Renewal,
        kind: HoldKind,
    ) -> Arc<Hold> {
        crate::sched::point();
        self.holds
            .entry((key.clone(), field.clone()))
            .or_insert_with(|| Arc::new(Hold::new(key.clone(), field.clone(), renewal, kind)))
            .clone()
    }

    /// The hold of `field` on `key` if there is one (never makes one).
    pub(crate) fn find(&self, key: &Arc<str>, field: &str) -> Option<Arc<Hold>> {
        self.holds
            .get(&(key.clone(), Arc::from(field)))
            .map(|h| h.value().clone())
    }

    /// Every hold tracked now (held, waiting or being settled).
    pub(crate) fn all(&self) -> Vec<Arc<Hold>> {
        self.holds.iter().map(|e| e.value().clone()).collect()
    }

    /// Drops the hold from the map when it has no grants and the caller's reference is the
    /// only one besides the map's.
    pub(crate) fn forget(&self, hold: &Arc<Hold>) {
        crate::sched::point();
        let key = (hold.key.clone(), hold.field.clone());
        self.holds.remove_if(&key, |_, h| {
            Arc::ptr_eq(h, hold)
                && Arc::strong_count(h) == 2
                && h.gate
                    .try_lock()
                    .map(|g| g.count() == 0 && !g.dirty)
                    .unwrap_or(false)
        });
    }

    /// Drops every hold that has no grants and that nobody references any more (those a
    /// `forget` could not drop because another reference was alive at that moment).
    pub(crate) fn sweep(&self) {
        self.holds.retain(|_, h| {
            Arc::strong_count(h) > 1
                || h.gate
                    .try_lock()
                    .map(|g| g.count() > 0 || g.dirty)
                    .unwrap_or(true)
        });
    }

    /// Holds whose grants the watchdog must renew.
    /// Every hold with a watchdog grant, each with the epoch its renewal speaks for.
    ///
    /// The epoch is read *before* the watch flag: a renewal sent for this snapshot that finds
    /// the owner's field gone may then end only an epoch that was watched when the snapshot
    /// began. Read the other way round, a release that ends the epoch and an acquisition that
    /// starts the next one could both fall between the two reads; the renewal, run before that
    /// acquisition's script, would then report the new hold lost while Redis has it, and the
    /// lock would stay taken by nobody until its lease ran out (seen once in the fault
    /// campaign, a hold taken right after a stop; `schedules.rs` keeps the race).
    pub(crate) fn watched(&self) -> Vec<(Arc<Hold>, u64)> {
        self.holds
            .iter()
            .filter_map(|e| {
                let hold = e.value();
                let epoch = hold.epoch();
                hold.watchdog().then(|| (hold.clone(), epoch))
            })
            .collect()
    }

    /// Whether the watchdog has anything to renew: a watchdog hold or a watched permit.
    pub(crate) fn any_watched(&self) -> bool {
        self.holds.iter().any(|e| e.value().watchdog()) || self.permits.any()
    }

    pub(crate) fn len(&self) -> usize {
        self.holds.len()
    }
}

pub(crate) mod claims;
mod mirror;
mod releasing;
pub(crate) use releasing::Releasing;
pub(crate) mod permits;
pub(crate) mod turns;
pub(crate) mod writers;

#[cfg(test)]
mod schedules;
#[cfg(test)]
mod tests;
