//! A model of the fair lock (Redisson's `RFairLock` as this crate runs it), checked
//! exhaustively with `stateright` (to a bound).
//!
//! Redis: the lock hash (owner -> count) and its expiry, the queue `redisson_lock_queue:{name}`
//! and the deadlines `redisson_lock_timeout:{name}`, changed only by `lua/fair_lock.lua`,
//! `lua/fair_unlock.lua`, `lua/fair_cancel.lua` and `lua/trim.lua` (fair layout), each mirrored
//! below as one atomic function: the eviction of waiters whose deadline passed, the grant's and
//! the cancel's moving of later deadlines, the wait hint, and what each publishes to whom (the
//! head's own channel `redisson_lock__channel:{name}:<field>`).
//!
//! Clients: each runs one acquisition with a wait budget, mirrored from `lock/engine/`: the first
//! try, then (held) the subscription to its own channel, then the wait loop (register for a
//! wake-up, try, sleep until a message, the hint or the deadline; one last try at the deadline);
//! the retry of a failed try (`Retry::attempts`, with the settle's trim of an unknown outcome
//! before the next try, or in the background); a wait that ends without the lock sends
//! `fair_cancel.lua` (`QueueExit`). A client that got the lock holds it for its lease, then
//! releases it (`fair_unlock.lua`, retried as the trim of `release::next_try`) or dies holding
//! it. A waiter may die (never calls again, never cancels). A request can be lost before it
//! runs or run with its reply lost; a cancel can be lost. Time moves in steps; timers and
//! wake-ups fire before time moves on, and no time passes while an acquire script is out (its
//! `now` argument is the client clock when sent; so the hint it returns is exact).
//!
//! Properties:
//! * at most one holder: the hash has at most one field, and at most one client believes it
//!   holds the lock (its lease, counted from when it sent the script, still runs);
//! * FIFO, as Redisson defines it: the queue is in the order of joining, each deadline one wait
//!   time after the one ahead; a waiter leaves the queue only by its own grant or cancel, or by
//!   eviction once its deadline passed; the lock goes only to the head (or anyone when the queue
//!   is empty: the script's own rule);
//! * the queue and the deadlines agree, and a waiter whose wait ended has left both once its
//!   cancel ran;
//! * liveness as safety: when the lock is free and the queue's live head (its deadline not
//!   passed) sleeps in its wait loop, it has a wake-up on its channel or its timer is due, so a
//!   free lock never waits on a sleeping head. One exception, by design: a lease that ran out
//!   (nobody publishes an expiry) while the head slept on a hint taken before that grant; the
//!   head then wakes by the hint (at most the deadline of the waiter that was ahead of it).
//!
//! Bound: three clients with a wait of 2 s and a lease of 1 s, three time steps of 1 s, one
//! fault in a run (a lost call, a death or a dropped acquisition): about 1.7 million states.
//! Equal waits, as Redisson's deadline arithmetic assumes (a grant moves those behind by the
//! taker's wait). Not a property: that a live waiter stays queued until its own wait ends.
//! Redisson's deadlines are turns, not waits: one who joined behind a head with little time
//! left ends up, after the head's grant, with the head's old deadline, and can be evicted
//! while still waiting (it joins the tail again on its next try), as in Redisson.
//!
//! Not modelled: re-entry (the RLock model has it), the watchdog (fixed leases), the channel's
//! linger after a grant (each client acquires once), a message's delivery delay (a publish
//! reaches a subscribed channel at once; one that is not subscribed is lost), retry backoff
//! (a retry comes at once).

use std::collections::BTreeMap;

use stateright::{Checker, Model, Property};

use super::engine::{next_try, ReleaseTry as Try};

/// One step of model time, in milliseconds.
const UNIT: i64 = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Script {
    /// fair_lock.lua, with the client's clock when sent.
    Lock { now: i64 },
    /// fair_unlock.lua.
    Unlock { now: i64 },
    /// trim.lua (fair layout) to 0.
    Trim,
    /// fair_cancel.lua.
    Cancel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Reply {
    Taken,
    /// The wait hint (ms).
    Held(i64),
    /// unlock, trim, cancel: nothing the client acts on.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Req {
    script: Script,
    applied: Option<Reply>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// A try (`first`: `first_attempt`'s) under the gate: its settle's trim (when the gate is
    /// dirty) or its script is out.
    Trying {
        first: bool,
    },
    /// Held on the first try: `wait` subscribes next.
    Subscribing,
    /// `wait_on` sleeping until a wake-up or `wake_at`.
    Asleep {
        wake_at: i64,
    },
    /// Got the lock; its lease (from when the script was sent) runs until `until`.
    Holding {
        until: i64,
    },
    /// The release's script or (`unknown`: after a lost call) its trim is out.
    Releasing {
        unknown: bool,
    },
    Done,
    Dead,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Client {
    phase: Phase,
    /// The wait budget (ms); also the fair lock's "thread wait time" (`Try::wait_ms`).
    wait: i64,
    /// When the wait ends (client clock).
    deadline: i64,
    subscribed: bool,
    /// A message reached the channel (`notify_one`'s stored permit or a registered waiter).
    woken: bool,
    /// The gate's count is unknown (`InFlight` dropped): the next gate holder trims.
    dirty: bool,
    /// `Retry`'s failures in this loop.
    failures: u8,
    /// The try's or the release's call.
    main: Option<Req>,
    /// `QueueExit`'s spawned cancel.
    cancel: Option<Req>,
    /// The cancel ran.
    left: bool,
    /// When this client joined the queue, in order of joining (ghost).
    joined: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    now: i64,
    hash: BTreeMap<usize, u32>,
    expires: Option<i64>,
    queue: Vec<usize>,
    deadlines: BTreeMap<usize, i64>,
    clients: Vec<Client>,
    joins: u32,
    /// The effective head when the lease last ran out (ghost): it may sleep on a hint taken
    /// before the grant whose lease ran out (see the liveness property).
    expiry_head: Option<usize>,
    /// Faults left (lost calls, deaths, dropped acquisitions).
    faults: u8,
    broken: Option<&'static str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Action {
    Start(usize),
    /// Redis runs the client's main call.
    Apply(usize),
    Reply(usize),
    /// The main call fails: ran with its reply lost, or lost before it ran.
    Fail(usize),
    Subscribe(usize),
    Wake(usize),
    Release(usize),
    /// The background settle (`spawn_settle`) trims a dirty hold, gate free.
    Settle(usize),
    ApplyCancel(usize),
    LoseCancel(usize),
    Die(usize),
    /// The caller drops the acquire's future (a timeout around it, a `select!`): `QueueExit`.
    Abandon(usize),
    Tick,
}

/// A bug planted in a script, to see the checker find it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plant {
    None,
    /// fair_cancel.lua wakes nobody when the head leaves a free lock.
    CancelWakesNobody,
    /// fair_unlock.lua wakes the queue's tail instead of its head.
    UnlockWakesTail,
    /// fair_cancel.lua takes the queue's head out instead of the leaver.
    CancelPopsHead,
    /// trim.lua (the settle of a lost acquire) frees the lock without waking the head.
    TrimWakesNobody,
}

impl Plant {
    /// `FAIR_MODEL_PLANT=<variant>` runs the model with that bug planted (to see it found).
    fn from_env() -> Plant {
        match std::env::var("FAIR_MODEL_PLANT").as_deref() {
            Ok("CancelWakesNobody") => Plant::CancelWakesNobody,
            Ok("UnlockWakesTail") => Plant::UnlockWakesTail,
            Ok("CancelPopsHead") => Plant::CancelPopsHead,
            Ok("TrimWakesNobody") => Plant::TrimWakesNobody,
            _ => Plant::None,
        }
    }
}

pub(super) struct FairModel {
    /// Each client's wait budget (ms).
    pub(super) waits: Vec<i64>,
    pub(super) lease: i64,
    pub(super) max_time: i64,
    /// `retry_attempts` (tries of one loop before it gives up).
    pub(super) attempts: u8,
    /// Faults in a run: lost requests and replies, deaths, acquisitions dropped by their
    /// caller.
    pub(super) faults: u8,
    pub(super) plant: Plant,
}

impl State {
    fn break_(&mut self, why: &'static str) {
        self.broken.get_or_insert(why);
    }

    /// A message on client `c`'s own channel.
    fn publish(&mut self, c: usize) {
        let client = &mut self.clients[c];
        if client.subscribed {
            client.woken = true;
        }
    }

    /// `o` leaves the queue and the deadlines; `why`: its own grant or cancel, or eviction.
    fn dequeue(&mut self, o: usize, own: bool, now: i64) {
        if !own && self.deadlines.get(&o).is_some_and(|&d| d > now) {
            self.break_("a waiter left the queue before its deadline, not by itself");
        }
        self.queue.retain(|&q| q != o);
        self.deadlines.remove(&o);
        self.clients[o].joined = None;
    }

    /// The first loop of fair_lock.lua and fair_unlock.lua.
    fn evict(&mut self, now: i64) {
        while let Some(&head) = self.queue.first() {
            match self.deadlines.get(&head) {
                Some(&d) if d <= now => self.dequeue(head, false, now),
                _ => break,
            }
        }
    }

    fn pttl(&self) -> i64 {
        match self.expires {
            Some(e) if !self.hash.is_empty() => e - self.now,
            _ => -2,
        }
    }

    /// lua/fair_lock.lua for `o` (enqueue: `1`, reentrant).
    fn fair_lock(&mut self, o: usize, now: i64, lease: i64) -> Reply {
        let wait = self.clients[o].wait;
        self.evict(now);
        if self.hash.is_empty() && (self.queue.is_empty() || self.queue[0] == o) {
            if self.queue.first() == Some(&o) {
                self.queue.remove(0);
            }
            self.deadlines.remove(&o);
            self.clients[o].joined = None;
            for d in self.deadlines.values_mut() {
                *d -= wait;
            }
            self.hash.insert(o, 1);
            self.expires = Some(self.now + lease);
            self.expiry_head = None;
            return Reply::Taken;
        }
        if let Some(n) = self.hash.get_mut(&o) {
            *n += 1;
            self.expires = Some(self.now + lease);
            return Reply::Taken;
        }
        if !self.deadlines.contains_key(&o) {
            // Join the tail.
            let ttl = match self.queue.last() {
                Some(&last) if last != o => self.deadlines[&last] - now,
                _ => self.pttl(),
            };
            self.deadlines.insert(o, ttl + wait + now);
            self.queue.push(o);
            self.joins += 1;
            self.clients[o].joined = Some(self.joins);
        }
        // wait_hint
        let ttl = self.pttl();
        if let Some(&head) = self.queue.first() {
            if head != o {
                let until_head = (self.deadlines[&head] - now).max(1);
                if ttl < 0 || until_head < ttl {
                    return Reply::Held(until_head);
                }
            }
        }
        Reply::Held(if ttl != -2 { ttl } else { 1 })
    }

    /// lua/fair_unlock.lua.
    fn fair_unlock(&mut self, o: usize, now: i64, plant: Plant) {
        self.evict(now);
        if !self.hash.is_empty() && self.hash.get(&o) == Some(&1) {
            self.hash.clear();
            self.expires = None;
        } else if !self.hash.is_empty() {
            // Not ours (the count is never above 1 here).
            return;
        }
        let to = match plant {
            Plant::UnlockWakesTail => self.queue.last(),
            _ => self.queue.first(),
        };
        if let Some(&head) = to {
            self.publish(head);
        }
    }

    /// lua/trim.lua, fair layout, target 0.
    fn trim(&mut self, o: usize, plant: Plant) {
        if self.hash.remove(&o).is_some() && self.hash.is_empty() && plant != Plant::TrimWakesNobody
        {
            self.expires = None;
            if let Some(&head) = self.queue.first() {
                self.publish(head);
            }
        }
    }

    /// lua/fair_cancel.lua.
    fn fair_cancel(&mut self, o: usize, plant: Plant) {
        let wait = self.clients[o].wait;
        let queue = self.queue.clone();
        let pos = queue.iter().position(|&q| q == o);
        let moved: Vec<usize> = match pos {
            Some(p) => queue[p + 1..].to_vec(),
            None => Vec::new(),
        };
        for q in moved {
            if let Some(d) = self.deadlines.get_mut(&q) {
                *d -= wait;
            }
        }
        let now = self.now;
        match (plant, queue.first()) {
            (Plant::CancelPopsHead, Some(&head)) if head != o => self.dequeue(head, false, now),
            _ => self.dequeue(o, true, now),
        }
        if pos == Some(0)
            && queue.len() > 1
            && self.hash.is_empty()
            && plant != Plant::CancelWakesNobody
        {
            self.publish(queue[1]);
        }
        self.clients[o].left = true;
    }

    fn run(&mut self, o: usize, script: Script, m: &FairModel) -> Reply {
        match script {
            Script::Lock { now } => self.fair_lock(o, now, m.lease),
            Script::Unlock { now } => {
                self.fair_unlock(o, now, m.plant);
                Reply::Done
            }
            Script::Trim => {
                self.trim(o, m.plant);
                Reply::Done
            }
            Script::Cancel => {
                self.fair_cancel(o, m.plant);
                Reply::Done
            }
        }
    }

    /// `attempt`: under the gate, the settle's trim first when dirty, else the script.
    fn send_try(&mut self, c: usize, first: bool) {
        let now = self.now;
        let client = &mut self.clients[c];
        let script = if client.dirty {
            Script::Trim
        } else {
            Script::Lock { now }
        };
        client.main = Some(Req {
            script,
            applied: None,
        });
        client.phase = Phase::Trying { first };
    }

    /// The acquisition ends without the lock: `QueueExit` sends the cancel.
    fn exit(&mut self, c: usize) {
        let client = &mut self.clients[c];
        client.phase = Phase::Done;
        client.subscribed = false;
        client.woken = false;
        client.cancel = Some(Req {
            script: Script::Cancel,
            applied: None,
        });
    }

    /// A try failed (connection error): `retry.again` / `retry.pause_after`.
    fn try_failed(&mut self, c: usize, first: bool, m: &FairModel) {
        let now = self.now;
        let client = &mut self.clients[c];
        let again = client.failures.saturating_add(1) < m.attempts;
        if !again {
            return self.exit(c);
        }
        client.failures += 1;
        if first {
            return self.send_try(c, true);
        }
        if now >= client.deadline {
            return self.exit(c);
        }
        // The pause (no backoff in the model), then the loop's next try.
        client.phase = Phase::Asleep { wake_at: now };
    }

    fn on_reply(&mut self, c: usize, reply: Option<Reply>, m: &FairModel) {
        let now = self.now;
        let client = &mut self.clients[c];
        let Some(req) = client.main.take() else {
            return;
        };
        match (client.phase, req.script, reply) {
            (Phase::Trying { first }, Script::Trim, Some(_)) => {
                client.dirty = false;
                self.send_try(c, first);
            }
            (Phase::Trying { first }, Script::Trim, None) => self.try_failed(c, first, m),
            (Phase::Trying { first }, Script::Lock { .. }, None) => {
                // `InFlight`'s drop: unknown, settled by the next try or in the background.
                client.dirty = true;
                self.try_failed(c, first, m);
            }
            (Phase::Trying { .. }, Script::Lock { now: sent }, Some(Reply::Taken)) => {
                client.phase = Phase::Holding {
                    until: sent + m.lease,
                };
                client.subscribed = false;
                client.woken = false;
            }
            (Phase::Trying { first }, Script::Lock { .. }, Some(Reply::Held(ttl))) => {
                client.failures = 0;
                let left = client.deadline - now;
                if left <= 0 {
                    return self.exit(c);
                }
                if first {
                    client.phase = Phase::Subscribing;
                } else {
                    let pause = if ttl >= 0 { ttl.min(left) } else { left };
                    client.phase = Phase::Asleep {
                        wake_at: now + pause,
                    };
                }
            }
            (Phase::Releasing { .. }, _, Some(_)) => client.phase = Phase::Done,
            (Phase::Releasing { .. }, _, None) => {
                // Retried: from an unknown outcome on, the trim (`next_try`).
                let script = match next_try(true, 0) {
                    Try::Trim { target: 0 } => Script::Trim,
                    _ => Script::Unlock { now },
                };
                client.main = Some(Req {
                    script,
                    applied: None,
                });
                client.phase = Phase::Releasing { unknown: true };
            }
            (phase, script, reply) => unreachable!("{phase:?} {script:?} got {reply:?}"),
        }
    }

    fn effective_head(&self) -> Option<usize> {
        self.queue
            .iter()
            .copied()
            .find(|q| self.deadlines.get(q).is_some_and(|&d| d > self.now))
    }
}

impl FairModel {
    /// Whether time may move on: no acquire script out, no timer or wake-up due, no
    /// subscription pending.
    fn time_may_move(&self, s: &State) -> bool {
        s.now < self.max_time
            && s.clients.iter().all(|c| match c.phase {
                Phase::Dead | Phase::Done => true,
                Phase::Subscribing => false,
                Phase::Trying { .. } => !c
                    .main
                    .is_some_and(|r| matches!(r.script, Script::Lock { .. })),
                Phase::Asleep { wake_at } => !c.woken && wake_at > s.now,
                _ => true,
            })
    }
}

impl Model for FairModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            hash: BTreeMap::new(),
            expires: None,
            queue: Vec::new(),
            deadlines: BTreeMap::new(),
            clients: self
                .waits
                .iter()
                .map(|&wait| Client {
                    phase: Phase::Idle,
                    wait,
                    deadline: 0,
                    subscribed: false,
                    woken: false,
                    dirty: false,
                    failures: 0,
                    main: None,
                    cancel: None,
                    left: false,
                    joined: None,
                })
                .collect(),
            joins: 0,
            expiry_head: None,
            faults: self.faults,
            broken: None,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.broken.is_some() {
            return;
        }
        for (c, client) in s.clients.iter().enumerate() {
            match client.phase {
                Phase::Idle => actions.push(Action::Start(c)),
                Phase::Subscribing => actions.push(Action::Subscribe(c)),
                Phase::Asleep { wake_at } if client.woken || wake_at <= s.now => {
                    actions.push(Action::Wake(c))
                }
                Phase::Holding { .. } => actions.push(Action::Release(c)),
                _ => {}
            }
            if let Some(req) = client.main {
                match req.applied {
                    None => actions.push(Action::Apply(c)),
                    Some(_) => actions.push(Action::Reply(c)),
                }
                if s.faults > 0 {
                    actions.push(Action::Fail(c));
                }
            }
            if client.dirty
                && client.main.is_none()
                && !matches!(client.phase, Phase::Dead | Phase::Trying { .. })
            {
                actions.push(Action::Settle(c));
            }
            if client.cancel.is_some() {
                actions.push(Action::ApplyCancel(c));
                if s.faults > 0 {
                    actions.push(Action::LoseCancel(c));
                }
            }
            if s.faults > 0 && matches!(client.phase, Phase::Asleep { .. } | Phase::Holding { .. })
            {
                actions.push(Action::Die(c));
            }
            // Dropped while no call is out, or after its call ran (its reply is then lost).
            if s.faults > 0
                && (matches!(client.phase, Phase::Asleep { .. } | Phase::Subscribing)
                    || matches!(client.phase, Phase::Trying { .. })
                        && client.main.is_some_and(|r| r.applied.is_some()))
            {
                actions.push(Action::Abandon(c));
            }
        }
        if self.time_may_move(s) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut s = s.clone();
        let now = s.now;
        match action {
            Action::Start(c) => {
                let client = &mut s.clients[c];
                client.deadline = now + client.wait;
                s.send_try(c, true);
            }
            Action::Apply(c) => {
                let script = s.clients[c].main?.script;
                let reply = s.run(c, script, self);
                s.clients[c].main.as_mut()?.applied = Some(reply);
            }
            Action::Reply(c) => {
                let reply = s.clients[c].main?.applied;
                s.on_reply(c, reply, self);
            }
            Action::Fail(c) => {
                s.faults -= 1;
                s.on_reply(c, None, self);
            }
            Action::Subscribe(c) => {
                s.clients[c].subscribed = true;
                s.send_try(c, false);
            }
            Action::Wake(c) => {
                s.clients[c].woken = false;
                s.send_try(c, false);
            }
            Action::Release(c) => {
                let script = match next_try(false, 0) {
                    Try::Release => Script::Unlock { now },
                    Try::Trim { .. } => Script::Trim,
                };
                let client = &mut s.clients[c];
                client.main = Some(Req {
                    script,
                    applied: None,
                });
                client.phase = Phase::Releasing { unknown: false };
            }
            Action::Settle(c) => {
                s.trim(c, self.plant);
                s.clients[c].dirty = false;
            }
            Action::ApplyCancel(c) => {
                s.clients[c].cancel = None;
                s.fair_cancel(c, self.plant);
            }
            Action::LoseCancel(c) => {
                s.faults -= 1;
                s.clients[c].cancel = None;
            }
            Action::Die(c) => {
                s.faults -= 1;
                let client = &mut s.clients[c];
                client.phase = Phase::Dead;
                client.subscribed = false;
                client.woken = false;
            }
            Action::Abandon(c) => {
                s.faults -= 1;
                let client = &mut s.clients[c];
                if let Some(req) = client.main.take() {
                    // `InFlight`'s drop: unknown, settled in the background.
                    if matches!(req.script, Script::Lock { .. }) {
                        client.dirty = true;
                    }
                }
                s.exit(c);
            }
            Action::Tick => {
                s.now += UNIT;
                if s.expires.is_some_and(|e| e <= s.now) {
                    s.hash.clear();
                    s.expires = None;
                    s.expiry_head = s.effective_head();
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one holder", |_, s: &State| {
                let believe = s
                    .clients
                    .iter()
                    .filter(|c| matches!(c.phase, Phase::Holding { until } if until > s.now))
                    .count();
                s.hash.len() <= 1 && believe <= 1
            }),
            // Redisson's order: the queue in the order of joining, each deadline one wait time
            // after the one ahead (so the head's turn ends first), and nobody leaving it but
            // by its own grant or cancel or once its deadline passed (`broken`).
            Property::always("FIFO", |_, s: &State| {
                s.broken.is_none()
                    && s.queue.windows(2).all(|w| {
                        let (p, q) = (w[0], w[1]);
                        s.clients[p].joined < s.clients[q].joined
                            && s.deadlines
                                .get(&q)
                                .zip(s.deadlines.get(&p))
                                .map(|(q_, p_)| q_ - p_)
                                == Some(s.clients[q].wait)
                    })
            }),
            Property::always("queue and deadlines agree", |_, s: &State| {
                s.queue.len() == s.deadlines.len()
                    && s.queue.iter().all(|q| s.deadlines.contains_key(q))
            }),
            Property::always("a waiter that left is gone", |_, s: &State| {
                s.clients.iter().enumerate().all(|(c, cl)| {
                    !(cl.left && cl.phase == Phase::Done)
                        || (!s.queue.contains(&c) && !s.deadlines.contains_key(&c))
                })
            }),
            Property::always("a free lock's head is woken", |_, s: &State| {
                if !s.hash.is_empty() {
                    return true;
                }
                let Some(h) = s.effective_head() else {
                    return true;
                };
                match s.clients[h].phase {
                    Phase::Asleep { wake_at } => {
                        s.clients[h].woken || wake_at <= s.now || s.expiry_head == Some(h)
                    }
                    _ => true,
                }
            }),
        ]
    }
}

/// Checks the model to its bound; panics with the path to a broken property.
pub(super) fn check(model: FairModel) -> usize {
    let checker = model
        .checker()
        .threads(2)
        .target_state_count(5_000_000)
        .spawn_bfs()
        .join();
    eprintln!(
        "fair model: {} unique states, depth {}, done {}",
        checker.unique_state_count(),
        checker.max_depth(),
        checker.is_done()
    );
    checker.assert_properties();
    checker.unique_state_count()
}

fn model(plant: Plant) -> FairModel {
    FairModel {
        waits: vec![2 * UNIT; 3],
        lease: UNIT,
        max_time: 3 * UNIT,
        attempts: 2,
        faults: 1,
        plant,
    }
}

#[test]
fn the_fair_lock_keeps_its_properties() {
    let states = check(model(Plant::from_env()));
    assert!(states > 1_000, "explored only {states} states");
}
