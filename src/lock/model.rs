//! A model of the client-side lock protocol, checked exhaustively with `stateright` (to a bound).
//!
//! Actors: Redis (one RLock hash: owner field -> hold count, and its expiry), applying
//! `lua/lock.lua`, `lua/unlock.lua` and `lua/trim.lua` atomically (mirrored below, one function
//! each), and two owners of one lock, each running one operation at a time under its gate (an
//! acquire, a release by a guard or owner-style, the background settle of an unknown outcome)
//! and a watchdog renewal beside it. A script call can be applied and answered, applied with the
//! reply lost, or lost before it runs (both seen as a connection error); time moves in steps and
//! a key whose expiry passed is gone.
//!
//! The client's side calls the crate's own code wherever it is pure: the gate's
//! [`HoldState`] transitions (`taken`, `take_grant`, `take_latest`, `unknown`, `settled`,
//! `catch_up`, `expiry_ms`), [`Lease::valid_until`], the release's `take_for_release`,
//! `retried` (what a retried release reports) and `ends_epoch`. The glue around them (the order
//! of the steps in `engine::attempt`/`record_taken`, `release`, `settle`, `Hold::lose`,
//! `set_watchdog`, the watchdog's renewal) is mirrored from those functions, step for step.
//! (`record_taken`'s confirmation of a grant whose reply came late is the watchdog's renewal
//! sent right after the booking: one of the interleavings explored.)
//!
//! Properties (each the rule a test against a real server asserts):
//! * at most one holder: the hash has at most one owner's field;
//! * no inflated count: an owner at rest (no operation, nothing unknown) never has more holds in
//!   Redis than the grants its gate knows;
//! * a release applied once: no release takes more than one hold away, and one that reports
//!   `Released`/`StillHeld` took exactly one;
//! * a lost hold is reported: a grant of the current epoch that the client still believes valid
//!   (its lease, as `LockGuard::is_lost` reads it) is in Redis, and an acquire that reports a
//!   grant leaves the gate's count equal to Redis's.
//!
//! Not modelled: a request that runs after the client saw its connection fail *and* after a
//! later request of the same owner (requests of one connection run in order; see
//! docs/reliability.md), pub/sub (the wake-ups are `pubsub`'s schedules), other lock kinds.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use stateright::{Checker, Model, Property};

use super::engine::{ends_epoch, next_try, retried, take_for_release, ReleaseTry as Try, Target};
use crate::holds::{Grant, HoldState, Lease};
use crate::raw::Release;
use crate::time::later;

/// One step of model time, in milliseconds.
const UNIT: u64 = 1_000;
/// The watchdog's lease.
const WD: u64 = 3 * UNIT;

/// The instant model time counts from.
static BASE: LazyLock<Instant> = LazyLock::new(Instant::now);

fn at(ms: u64) -> Instant {
    *BASE + Duration::from_millis(ms)
}

/// A script call on the wire and, once Redis ran it, its reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Req {
    script: Script,
    applied: Option<Reply>,
    /// Holds this call takes away count towards the release in progress.
    counts: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Script {
    Lock { lease_ms: u64 },
    Unlock { lease_ms: u64 },
    Trim { target: u32, lease_ms: u64 },
    Renew,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Reply {
    /// lock.lua: `{count}` taken, or the PTTL.
    Taken(u32),
    Held,
    /// unlock.lua: nil, 0, 1.
    Unlock(Option<bool>),
    /// trim.lua: the count found.
    Found(u32),
    /// renew.lua: 1 renewed, 0 gone.
    Renewed(bool),
}

/// How an acquire asks for its lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Ask {
    Watchdog,
    Fixed(u64),
}

/// Where one owner's operation stands (each stage waits for the reply to `Owner::req`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Op {
    Idle,
    /// `settle` before an acquire's script (then `Locking`).
    AcquireSettling {
        ask: Ask,
    },
    /// The acquire script, sent at `sent`.
    Locking {
        ask: Ask,
        sent: u64,
        lease_ms: u64,
    },
    /// `record_taken` trimming holds it did not know of; the guard is handed out after.
    RecordTrim {
        id: u64,
    },
    /// `settle` before a release's script (then the release proper).
    ReleaseSettling {
        target: Target,
    },
    /// The release script or, after an unknown outcome, the trim to `after`.
    Releasing {
        grant: Option<Grant>,
        after: u32,
        lease_ms: u64,
        /// Retries left after an unknown outcome (`retry_attempts` less one).
        retries: u8,
    },
    /// The background settle (`spawn_settle`).
    Settling,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Owner {
    gate: HoldState,
    /// `Hold::epoch` (the atomic: the watchdog ends it without the gate).
    epoch: u64,
    /// `Hold::watchdog`.
    watching: bool,
    /// `Hold::renewed_at`, model ms.
    renewed_at: u64,
    /// Guards handed out and not released yet: (epoch, grant id).
    guards: Vec<(u64, u64)>,
    op: Op,
    req: Option<Req>,
    /// The watchdog's renewal in flight: the epoch it saw, when it was sent, the call.
    renew: Option<(u64, u64, Req)>,
    /// Operations this owner may still start (the bound).
    budget: u8,
    /// Holds the release in progress took away.
    taken_away: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    now: u64,
    /// The lock hash: owner index -> hold count.
    hash: BTreeMap<usize, u32>,
    /// When the key expires (model ms).
    expires: Option<u64>,
    owners: Vec<Owner>,
    /// A property broken by a transition (what a test asserts about an operation's result).
    broken: Option<&'static str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Action {
    Acquire(usize, Ask),
    /// Release by the owner's guard number `.1`.
    ReleaseGuard(usize, usize),
    /// Redisson-style `unlock()`: the owner's latest grant.
    ReleaseLatest(usize),
    /// The background settle of a dirty hold takes the gate.
    Settle(usize),
    /// Redis runs the owner's call.
    Apply(usize),
    /// The reply reaches the owner.
    Reply(usize),
    /// The connection fails: the call ran (reply lost) or never will.
    Fail(usize),
    RenewSend(usize),
    RenewApply(usize),
    RenewReply(usize),
    RenewFail(usize),
    /// Time moves on one step; expired keys go.
    Tick,
}

/// The model: how many owners and operations each, how far time goes, which leases.
pub(super) struct LockModel {
    /// How many operations each owner may start.
    pub(super) budgets: Vec<u8>,
    pub(super) max_time: u64,
    pub(super) asks: Vec<Ask>,
    /// Retries of a release after an unknown outcome (`retry_attempts` less one).
    pub(super) retries: u8,
}

impl Owner {
    fn new(budget: u8) -> Owner {
        Owner {
            gate: HoldState::default(),
            epoch: 0,
            watching: false,
            renewed_at: 0,
            guards: Vec::new(),
            op: Op::Idle,
            req: None,
            renew: None,
            budget,
            taken_away: 0,
        }
    }

    /// `Hold::gate`: the gate drops an ended epoch's grants.
    fn take_gate(&mut self) {
        self.gate.catch_up(self.epoch);
    }

    /// `Hold::lose`.
    fn lose(&mut self, seen: u64) -> bool {
        let ended = self.epoch == seen;
        if ended {
            self.epoch += 1;
            self.watching = false;
        }
        ended
    }

    /// `Hold::lose_gated`.
    fn lose_gated(&mut self) {
        self.lose(self.gate.epoch());
        self.gate.catch_up(self.epoch);
    }

    /// `Hold::set_watchdog`.
    fn set_watchdog(&mut self, now: u64) {
        let on = self.gate.watched();
        let was = std::mem::replace(&mut self.watching, on);
        if on && !was {
            self.renewed_at = now;
        }
    }

    /// `Lock::key_expiry`.
    fn key_expiry(&self, now: u64, extra: Option<u64>) -> u64 {
        self.gate.expiry_ms(at(now), WD, extra).unwrap_or(WD)
    }

    /// The holds the client knows it has (none once the epoch ended).
    fn known(&self) -> u32 {
        if self.gate.epoch() == self.epoch {
            self.gate.count()
        } else {
            0
        }
    }

    fn send(&mut self, script: Script, counts: bool) {
        self.req = Some(Req {
            script,
            applied: None,
            counts,
        });
    }

    /// `settle`'s trim to the gate's count.
    fn send_settle(&mut self, now: u64) {
        let lease_ms = self.key_expiry(now, None);
        let target = self.gate.count();
        self.send(Script::Trim { target, lease_ms }, false);
    }

    /// `settle`'s booking of the count the trim found.
    fn settled(&mut self, found: u32, now: u64) {
        self.gate.settled();
        if found < self.gate.count() {
            self.lose_gated();
        }
        self.set_watchdog(now);
    }

    /// `attempt` after the settle: the acquire script.
    fn send_lock(&mut self, ask: Ask, now: u64) {
        let own = match ask {
            Ask::Watchdog => WD,
            Ask::Fixed(ms) => ms,
        };
        let lease_ms = self.key_expiry(now, Some(own));
        self.send(Script::Lock { lease_ms }, false);
        self.op = Op::Locking {
            ask,
            sent: now,
            lease_ms,
        };
    }

    /// `release` after the settle: take the grant out, send the release script.
    fn send_release(&mut self, target: Target, now: u64, retries: u8) -> Option<Release> {
        let grant = match take_for_release(&mut self.gate, target) {
            Ok(g) => g,
            Err(nothing) => return Some(nothing),
        };
        let after = self.gate.count();
        let lease_ms = self.key_expiry(now, None);
        self.taken_away = 0;
        self.send_release_try(false, after, lease_ms);
        self.op = Op::Releasing {
            grant,
            after,
            lease_ms,
            retries,
        };
        None
    }

    /// One try of `release`: what `next_try` says.
    fn send_release_try(&mut self, unknown: bool, after: u32, lease_ms: u64) {
        let script = match next_try(unknown, after) {
            Try::Release => Script::Unlock { lease_ms },
            Try::Trim { target } => Script::Trim { target, lease_ms },
        };
        self.send(script, true);
    }

    /// `InFlight`'s drop: the outcome is unknown, settled in the background.
    fn in_flight_dropped(&mut self, now: u64) {
        self.gate.unknown();
        self.set_watchdog(now);
    }
}

impl State {
    fn count(&self, o: usize) -> u32 {
        self.hash.get(&o).copied().unwrap_or(0)
    }

    fn break_(&mut self, why: &'static str) {
        self.broken.get_or_insert(why);
    }

    /// Redis runs `script` for owner `o`, atomically (the Lua scripts, mirrored).
    fn run(&mut self, o: usize, script: Script) -> Reply {
        let now = self.now;
        let before = self.count(o);
        let reply = match script {
            // lua/lock.lua
            Script::Lock { lease_ms } => {
                if self.hash.is_empty() || self.hash.contains_key(&o) {
                    let count = before + 1;
                    self.hash.insert(o, count);
                    self.expires = Some(now + lease_ms);
                    Reply::Taken(count)
                } else {
                    Reply::Held
                }
            }
            // lua/unlock.lua
            Script::Unlock { lease_ms } => match before {
                0 => Reply::Unlock(None),
                1 => {
                    self.hash.clear();
                    self.expires = None;
                    Reply::Unlock(Some(true))
                }
                n => {
                    self.hash.insert(o, n - 1);
                    self.expires = Some(now + lease_ms);
                    Reply::Unlock(Some(false))
                }
            },
            // lua/trim.lua (plain layout)
            Script::Trim { target, lease_ms } => {
                if before > target {
                    if target > 0 {
                        self.hash.insert(o, target);
                        self.expires = Some(now + lease_ms);
                    } else {
                        self.hash.remove(&o);
                        if self.hash.is_empty() {
                            self.expires = None;
                        }
                    }
                }
                Reply::Found(before)
            }
            // lua/renew.lua: never shortens the key.
            Script::Renew => {
                if before > 0 {
                    let until = now + WD;
                    if self.expires.is_some_and(|e| e < until) {
                        self.expires = Some(until);
                    }
                    Reply::Renewed(true)
                } else {
                    Reply::Renewed(false)
                }
            }
        };
        let after = self.count(o);
        let owner = &mut self.owners[o];
        if owner.req.as_ref().is_some_and(|r| r.counts) && after < before {
            owner.taken_away += u8::try_from(before - after).unwrap_or(u8::MAX);
            if owner.taken_away > 1 {
                self.break_("a release took more than one hold away");
            }
        }
        reply
    }

    /// An operation of owner `o` ended with a release outcome (or an error: `None`).
    fn released(&mut self, o: usize, outcome: Option<Release>) {
        let now = self.now;
        let owner = &mut self.owners[o];
        owner.op = Op::Idle;
        if let Some(outcome) = outcome {
            // `book_release`
            if ends_epoch(outcome, &owner.gate) {
                owner.lose_gated();
            }
            if matches!(outcome, Release::Released | Release::StillHeld) && owner.taken_away != 1 {
                self.break_("a release reported success without taking a hold away");
            }
        }
        self.owners[o].set_watchdog(now);
    }

    /// A release that found nothing to send (`take_for_release`'s `Err`): it returns at once,
    /// booking nothing.
    fn not_sent(&mut self, o: usize, nothing: Release) {
        self.owners[o].op = Op::Idle;
        if nothing != Release::NotHeld {
            self.break_("a release that sent nothing reported a release");
        }
    }

    /// Owner `o`'s call came back with `reply` (`None`: a connection error).
    fn on_reply(&mut self, o: usize, reply: Option<Reply>, retries: u8) {
        let now = self.now;
        let owner = &mut self.owners[o];
        owner.req = None;
        match (owner.op.clone(), reply) {
            (Op::AcquireSettling { ask }, Some(Reply::Found(found))) => {
                owner.settled(found, now);
                owner.send_lock(ask, now);
            }
            (Op::ReleaseSettling { target }, Some(Reply::Found(found))) => {
                owner.settled(found, now);
                if let Some(nothing) = owner.send_release(target, now, retries) {
                    self.not_sent(o, nothing);
                }
            }
            (Op::Settling, Some(Reply::Found(found))) => {
                owner.settled(found, now);
                owner.op = Op::Idle;
            }
            // A settle that failed: the operation fails, the hold stays dirty.
            (Op::AcquireSettling { .. } | Op::ReleaseSettling { .. } | Op::Settling, None) => {
                owner.op = Op::Idle;
            }
            (Op::Locking { .. }, None) => {
                owner.in_flight_dropped(now);
                owner.op = Op::Idle;
            }
            (Op::Locking { .. }, Some(Reply::Held)) => owner.op = Op::Idle,
            (Op::Locking { ask, sent, .. }, Some(Reply::Taken(count))) => {
                // `record_taken`
                if count <= owner.gate.count() {
                    owner.lose_gated();
                }
                let lease = match ask {
                    Ask::Watchdog => Lease::Watchdog,
                    Ask::Fixed(ms) => Lease::Fixed {
                        lease: Duration::from_millis(ms),
                        deadline: later(at(sent), Duration::from_millis(ms)),
                    },
                };
                let id = owner.gate.taken(lease);
                if ask == Ask::Watchdog {
                    owner.set_watchdog(now);
                    owner.renewed_at = sent;
                }
                if count > owner.gate.count() {
                    owner.gate.unknown();
                    owner.send_settle(now);
                    owner.op = Op::RecordTrim { id };
                    return;
                }
                owner.guards.push((owner.gate.epoch(), id));
                owner.op = Op::Idle;
                // The grants the gate knows are the holds Redis counted (earlier ones it lost
                // are lost with their epoch).
                if count != owner.gate.count() {
                    self.break_("an acquire left the gate's count different from Redis's");
                }
            }
            (Op::RecordTrim { id }, reply) => {
                if let Some(Reply::Found(found)) = reply {
                    owner.settled(found, now);
                }
                // A failed trim is retried in the background (the hold stays dirty).
                owner.guards.push((owner.gate.epoch(), id));
                owner.op = Op::Idle;
            }
            (
                Op::Releasing {
                    grant,
                    after,
                    lease_ms,
                    retries,
                },
                reply,
            ) => match reply {
                Some(Reply::Unlock(r)) => {
                    let outcome = match r {
                        None => Release::NotHeld,
                        Some(false) => Release::StillHeld,
                        Some(true) => Release::Released,
                    };
                    self.released(o, Some(outcome));
                }
                Some(Reply::Found(found)) => {
                    let valid = grant.map(|g| {
                        g.lease
                            .valid_until(at(owner.renewed_at), Duration::from_millis(WD))
                    });
                    let outcome = retried(i64::from(found), after, valid, at(now));
                    self.released(o, Some(outcome));
                }
                None if retries > 0 => {
                    // Retried: from an unknown outcome on, the trim to `after`.
                    owner.send_release_try(true, after, lease_ms);
                    owner.op = Op::Releasing {
                        grant,
                        after,
                        lease_ms,
                        retries: retries - 1,
                    };
                }
                None => {
                    // Retries spent: the outcome stays unknown, settled in the background.
                    owner.in_flight_dropped(now);
                    self.released(o, None);
                }
                Some(other) => unreachable!("a release got {other:?}"),
            },
            (op, reply) => unreachable!("{op:?} got {reply:?}"),
        }
    }
}

impl LockModel {
    pub(super) fn checker(self) -> stateright::CheckerBuilder<Self> {
        Model::checker(self)
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            hash: BTreeMap::new(),
            expires: None,
            owners: self.budgets.iter().map(|&b| Owner::new(b)).collect(),
            broken: None,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.broken.is_some() {
            return;
        }
        for (o, owner) in s.owners.iter().enumerate() {
            if owner.op == Op::Idle {
                if owner.budget > 0 {
                    for &ask in &self.asks {
                        actions.push(Action::Acquire(o, ask));
                    }
                    for g in 0..owner.guards.len() {
                        actions.push(Action::ReleaseGuard(o, g));
                    }
                    actions.push(Action::ReleaseLatest(o));
                }
                if owner.gate.is_dirty() {
                    actions.push(Action::Settle(o));
                }
            }
            if let Some(req) = &owner.req {
                if req.applied.is_none() {
                    actions.push(Action::Apply(o));
                } else {
                    actions.push(Action::Reply(o));
                }
                actions.push(Action::Fail(o));
            }
            match &owner.renew {
                None if owner.watching => actions.push(Action::RenewSend(o)),
                None => {}
                Some((_, _, req)) => {
                    if req.applied.is_none() {
                        actions.push(Action::RenewApply(o));
                    } else {
                        actions.push(Action::RenewReply(o));
                    }
                    actions.push(Action::RenewFail(o));
                }
            }
        }
        if s.now < self.max_time {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut s = s.clone();
        let now = s.now;
        match action {
            Action::Acquire(o, ask) => {
                let owner = &mut s.owners[o];
                owner.budget -= 1;
                owner.take_gate();
                if owner.gate.is_dirty() {
                    owner.send_settle(now);
                    owner.op = Op::AcquireSettling { ask };
                } else {
                    owner.send_lock(ask, now);
                }
            }
            Action::ReleaseGuard(o, _) | Action::ReleaseLatest(o) => {
                let owner = &mut s.owners[o];
                owner.budget -= 1;
                let target = match action {
                    Action::ReleaseGuard(_, g) => {
                        let (epoch, id) = owner.guards.remove(g);
                        Target::Grant { epoch, id }
                    }
                    _ => Target::Latest,
                };
                owner.take_gate();
                if owner.gate.is_dirty() {
                    owner.send_settle(now);
                    owner.op = Op::ReleaseSettling { target };
                } else if let Some(nothing) = owner.send_release(target, now, self.retries) {
                    s.not_sent(o, nothing);
                }
            }
            Action::Settle(o) => {
                let owner = &mut s.owners[o];
                owner.take_gate();
                if !owner.gate.is_dirty() {
                    return None;
                }
                owner.send_settle(now);
                owner.op = Op::Settling;
            }
            Action::Apply(o) => {
                let script = s.owners[o].req.as_ref()?.script;
                let reply = s.run(o, script);
                s.owners[o].req.as_mut()?.applied = Some(reply);
            }
            Action::Reply(o) => {
                let reply = s.owners[o].req.as_ref()?.applied;
                s.on_reply(o, reply, self.retries);
            }
            Action::Fail(o) => s.on_reply(o, None, self.retries),
            Action::RenewSend(o) => {
                let owner = &mut s.owners[o];
                owner.renew = Some((
                    owner.epoch,
                    now,
                    Req {
                        script: Script::Renew,
                        applied: None,
                        counts: false,
                    },
                ));
            }
            Action::RenewApply(o) => {
                let reply = s.run(o, Script::Renew);
                s.owners[o].renew.as_mut()?.2.applied = Some(reply);
            }
            Action::RenewReply(o) => {
                let owner = &mut s.owners[o];
                let (epoch, started, req) = owner.renew.take()?;
                match req.applied {
                    Some(Reply::Renewed(true)) => owner.renewed_at = started,
                    _ => {
                        owner.lose(epoch);
                    }
                }
            }
            Action::RenewFail(o) => {
                // `expire_unrenewed`
                let owner = &mut s.owners[o];
                let (epoch, _, _) = owner.renew.take()?;
                if now.saturating_sub(owner.renewed_at) >= WD {
                    owner.lose(epoch);
                }
            }
            Action::Tick => {
                s.now += UNIT;
                if s.expires.is_some_and(|e| e <= s.now) {
                    s.hash.clear();
                    s.expires = None;
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one holder", |_, s: &State| s.hash.len() <= 1),
            Property::always("no inflated count", |_, s: &State| {
                s.owners.iter().enumerate().all(|(o, owner)| {
                    owner.op != Op::Idle
                        || owner.req.is_some()
                        || owner.gate.is_dirty()
                        || s.count(o) <= owner.known()
                })
            }),
            Property::always("a lost hold is reported", |_, s: &State| {
                s.owners.iter().enumerate().all(|(o, owner)| {
                    owner.gate.epoch() != owner.epoch
                        || s.count(o) > 0
                        || owner.gate.grants().iter().all(|g| {
                            let valid = g
                                .lease
                                .valid_until(at(owner.renewed_at), Duration::from_millis(WD));
                            valid <= at(s.now)
                        })
                })
            }),
            Property::always("operations report the truth", |_, s: &State| {
                s.broken.is_none()
            }),
        ]
    }
}

/// Checks the model to its bound; panics with the path to a broken property.
pub(super) fn check(model: LockModel) -> usize {
    let checker = model
        .checker()
        .threads(2)
        .target_state_count(3_000_000)
        .spawn_bfs()
        .join();
    eprintln!(
        "model: {} unique states, depth {}",
        checker.unique_state_count(),
        checker.max_depth()
    );
    checker.assert_properties();
    checker.unique_state_count()
}

#[test]
fn the_lock_protocol_keeps_its_properties() {
    let states = check(LockModel {
        budgets: vec![3, 2],
        max_time: 2 * UNIT,
        asks: vec![Ask::Watchdog, Ask::Fixed(UNIT)],
        retries: 1,
    });
    assert!(states > 1_000, "explored only {states} states");
}
