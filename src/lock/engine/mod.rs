//! The engine: the one lock algorithm for every kind, behind the facade [`Lock`](super::Lock).
//! Read top to bottom, one acquire is:
//!
//! 1. [`Engine::acquire`] (this file): the owner's [`Hold`], then *admission* (`claim.rs`: a
//!    default owner's claim, re-entry refused; the read-write lock's writer preference);
//! 2. `Engine::take` (this file): the first try (`Engine::attempt`: the kind's acquire script
//!    under the owner's gate, after `settle.rs` trims an unknown outcome, inside `cleanup.rs`'s
//!    `InFlight`), then, if held, the kind's wait (`wait.rs`): pub/sub through the shared loop
//!    (`crate::wait`) or the spin kind's backoff;
//! 3. `Engine::record_taken` (this file): books the grant and returns [`Granted`].
//!
//! A release is `release.rs`. Every script that changes a hold count runs here, under the
//! owner's gate (`holds/`). A kind supplies data and scripts (`raw/`): its `KindSpec`, its
//! scripts and capabilities (queue cancel, backoff); the engine never names a kind.

mod claim;
mod cleanup;
mod release;
mod settle;
mod wait;

#[cfg(test)]
pub(super) use release::{ends_epoch, next_try, retried, take_for_release, Try as ReleaseTry};

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use crate::config::millis;
use crate::conn::Conn;
use crate::error::{from_script, is_connection_error, LockError, Result};
use crate::holds::{Gate, GrantId, Hold, HoldKind, HoldState, Lease};
use crate::keys::refusal;
use crate::observe;
use crate::owner::LockOwner;
use crate::raw::{Acquire, KindExt, LockKind, Op};
use crate::retry::Retry;
use crate::scripts::Layout;
use crate::shared::Client;
use crate::time::{epoch_ms, later, remaining};
use cleanup::{Forget, InFlight, QueueExit};

/// One lock (a name and a kind on a client) as the engine sees it: what every handle of it
/// shares. The facade [`Lock`](super::Lock) adds who acts (its owner binding).
pub(crate) struct Engine<K> {
    pub(super) client: Client,
    pub(super) name: Arc<str>,
    /// The last owner's field, built once while one owner keeps using the lock.
    last_field: parking_lot::Mutex<Option<(LockOwner, Arc<str>)>>,
    pub(super) channel: String,
    pub(super) kind: K,
    /// Why the name is refused (nothing is sent), if it is.
    refused: Option<&'static str>,
}

/// A grant the engine booked, for the facade to wrap in a guard.
#[derive(Debug)]
pub(super) struct Granted {
    pub(super) owner: LockOwner,
    pub(super) hold: Arc<Hold>,
    pub(super) epoch: u64,
    pub(super) grant: GrantId,
    /// The fixed lease and its deadline; `None`: watchdog.
    pub(super) lease: Option<(Duration, Instant)>,
    pub(super) token: Option<i64>,
}

enum Attempt {
    Taken(Granted),
    Held { ttl_ms: i64 },
}

/// One acquisition as the caller asked for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AcquireRequest {
    /// Who acquires.
    pub(crate) owner: LockOwner,
    /// `None` waits forever, `Some(ZERO)` tries once.
    pub(crate) wait: Option<Duration>,
    /// `None`: the watchdog's lease, renewed until released.
    pub(crate) lease: Option<Duration>,
    /// `owner` is the default one (the task or thread, not bound with `with_owner`): a second
    /// acquire of the lock by it, while it holds or acquires the lock, is refused
    /// ([`LockError::Reentry`]) instead of re-entering.
    pub(crate) checked: bool,
}

/// What every attempt of one acquisition sends.
#[derive(Clone, Copy)]
struct Try<'a> {
    owner: LockOwner,
    hold: &'a Arc<Hold>,
    lease: Option<Duration>,
    /// How long a queued waiter may be absent (fair lock).
    wait_ms: u64,
    /// The caller is prepared to wait (the fair lock queues it).
    enqueue: bool,
}

impl<'a> Try<'a> {
    fn new<K: LockKind>(engine: &Engine<K>, req: &AcquireRequest, hold: &'a Arc<Hold>) -> Self {
        // Redisson uses the wait budget when one is given, else the fair-lock wait timeout.
        let wait_ms = match req.wait {
            Some(w) if !w.is_zero() => millis(w),
            _ => millis(engine.client.config().fair_lock_wait_timeout()),
        };
        Try {
            owner: req.owner,
            hold,
            lease: req.lease,
            wait_ms,
            enqueue: req.wait != Some(Duration::ZERO),
        }
    }
}

/// Which hold a release gives back.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(test, derive(PartialEq, Eq, Hash))]
pub(crate) enum Target {
    /// A guard's own grant, taken in `epoch`.
    Grant { epoch: u64, id: GrantId },
    /// The owner's latest grant (Redisson-style `unlock()`).
    Latest,
}

impl<K: LockKind> Engine<K> {
    pub(super) fn new(client: Client, name: String, kind: K) -> Self {
        let channel = kind.channel(&name);
        let field = kind.field(format!("{}:1", client.id()));
        let related = crate::raw::related_keys(&kind, &name, &field);
        let refused = refusal(
            &name,
            client.is_cluster(),
            related.iter().map(String::as_str),
        );
        Engine {
            client,
            name: name.into(),
            last_field: parking_lot::Mutex::new(None),
            channel,
            kind,
            refused,
        }
    }

    /// Runs one acquisition, top to bottom: the owner's hold, admission, the first try, the
    /// kind's wait (when allowed to wait), the grant booked.
    pub(super) async fn acquire(self: &Arc<Self>, req: AcquireRequest) -> Result<Option<Granted>> {
        self.check_name()?;
        self.client.check_open()?;
        // A wait too long to represent is no deadline at all.
        let deadline = req.wait.and_then(|w| Instant::now().checked_add(w));
        let hold = self.hold(req.owner);
        // Forgets the hold when this ends without a grant, also when the future is dropped
        // (a hold that still has grants, or is shared, is kept).
        let _forget = Forget {
            engine: self,
            hold: &hold,
        };
        // Held however this ends (a default owner's claim; `None`: not admitted in time).
        let Some(_admitted) = self.admit(&req, &hold, deadline).await? else {
            return Ok(None);
        };
        let try_ = Try::new(self, &req, &hold);
        // A wait that ends without the lock leaves the queue (fair lock), however it ends.
        let mut leave = try_.enqueue.then(|| QueueExit {
            engine: self,
            field: &hold.field,
            wait_ms: try_.wait_ms,
            armed: true,
        });
        let taken = self.take(&try_, deadline).await?;
        if let (Some(_), Some(e)) = (&taken, leave.as_mut()) {
            e.armed = false;
        }
        Ok(taken)
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    pub(super) fn field(&self, owner: LockOwner) -> String {
        self.kind.field(owner.field(self.client.id()))
    }

    pub(super) fn hold(&self, owner: LockOwner) -> Arc<Hold> {
        let field = self.shared_field(owner);
        let renewal = self.kind.renewal(self.name(), &field);
        let kind = HoldKind {
            name: K::SPEC.name,
            channel_prefix: K::SPEC.channel_prefix,
            layout: K::SPEC.layout,
            publishes: self.kind.uses_pubsub(),
        };
        self.client
            .registry()
            .hold(&self.name, &field, renewal, kind)
    }

    /// [`field`](Self::field) as shared text, built once per owner while one owner keeps
    /// using this lock.
    fn shared_field(&self, owner: LockOwner) -> Arc<str> {
        let mut last = self.last_field.lock();
        match &*last {
            Some((o, field)) if *o == owner => field.clone(),
            _ => {
                let field: Arc<str> = self.field(owner).into();
                *last = Some((owner, field.clone()));
                field
            }
        }
    }

    /// The arguments of one script on `field`.
    pub(super) fn op<'a>(&'a self, field: &'a str, lease_ms: u64, wait_ms: u64) -> Op<'a> {
        Op {
            key: &self.name,
            channel: &self.channel,
            field,
            lease_ms,
            // The spin lock publishes nothing: an empty command tells the scripts so.
            publish: match self.kind.uses_pubsub() {
                true => self.client.publish_command(),
                false => "",
            },
            now_ms: epoch_ms(),
            wait_ms,
        }
    }

    pub(super) fn check_name(&self) -> Result<()> {
        match self.refused {
            Some(why) => Err(LockError::InvalidArgument(why)),
            None => Ok(()),
        }
    }

    /// The `PEXPIRE` to send at `now`: it covers every grant the owner still has, plus
    /// `new_grant_ms` for an acquisition in flight (the watchdog lease when nothing is left to
    /// cover, e.g. an owner-style release of a hold the client did not know of).
    pub(super) fn key_expiry(
        &self,
        gate: &HoldState,
        now: Instant,
        new_grant_ms: Option<u64>,
    ) -> u64 {
        let watchdog_ms = self.watchdog_ms();
        gate.expiry_ms(now, watchdog_ms, new_grant_ms)
            .unwrap_or(watchdog_ms)
    }

    pub(super) fn watchdog_ms(&self) -> u64 {
        millis(self.client.config().watchdog_timeout())
    }

    /// Whether this kind takes turns between clients (`holds/turns.rs`): the exclusive,
    /// unqueued kinds that wake their waiters by pub/sub (the RLock, the fenced and the
    /// non-reentrant lock, and the write side of the read-write lock, whose turn goes to the
    /// readers and writers its release woke). The fair lock has its queue; readers share (a
    /// read never looks); the spin lock polls.
    pub(super) fn takes_turns(&self) -> bool {
        matches!(K::SPEC.layout, Layout::Plain | Layout::Write)
            && !K::SPEC.per_waiter_channel
            && self.kind.uses_pubsub()
    }

    /// While this client gives a turn away (a streak of grants in a row, `holds/turns.rs`), a
    /// try that no release message woke looks first (`PTTL`, read-only): held, it waits as a
    /// held try does (`Some(ttl)`), without the acquire script; free (`None`), it takes it, one
    /// round trip after the waiters the release woke, here and in other processes, could.
    /// Called only by an owner with no grant here (a re-entry never waits on itself).
    pub(super) async fn gives_way(&self) -> Result<Option<i64>> {
        if !self.takes_turns() || !self.client.registry().turns.yielding(self.name()) {
            return Ok(None);
        }
        let mut conn = self.client.conn();
        let ttl_ms: i64 = redis::cmd("PTTL")
            .arg(self.name())
            .query_async(&mut conn)
            .await?;
        // -2: no key (free); -1: held without expiry (a message only); else the holder's TTL.
        Ok((ttl_ms != -2).then_some(ttl_ms))
    }

    /// The first try, then, while the lock is held and time is left, the kind's wait: on
    /// pub/sub ([`Self::wait`], the shared loop) or, for a kind with a backoff, by polling
    /// ([`Self::spin`]). A per-waiter channel still subscribed from this owner's last wait (the
    /// fair lock's linger) is registered on before the first try, which then needs no second.
    async fn take(
        self: &Arc<Self>,
        try_: &Try<'_>,
        deadline: Option<Instant>,
    ) -> Result<Option<Granted>> {
        if let Some(channel) = self.lingering(try_, deadline) {
            return observe::waiting(self.wait_on(try_, deadline, channel)).await;
        }
        // Fast path: one script, no subscription.
        // Its own statement: a future awaited in a `match` scrutinee lives to the end of the
        // match, so it would sit beside the wait loop's in every parked waiter.
        let first = self.first_attempt(try_).await?;
        if let Attempt::Taken(granted) = first {
            return Ok(Some(granted));
        }
        if remaining(deadline).is_none() {
            return Ok(None);
        }
        match self.kind.backoff() {
            Some(backoff) => observe::waiting(self.spin(try_, deadline, backoff.delays())).await,
            None => observe::waiting(self.wait(try_, deadline)).await,
        }
    }

    /// The first try, with the same patience as the wait loop: a redirected script did not run
    /// (the slot map is being refreshed), and after a connection error the next try first trims
    /// away whatever the failed one may have taken, so both are tried again, up to
    /// `retry_attempts` times; anything else is reported at once.
    async fn first_attempt(self: &Arc<Self>, try_: &Try<'_>) -> Result<Attempt> {
        let mut retry = self.retry();
        loop {
            // Attempts are boxed here and in the wait loops: their state (gate, script call)
            // lives only while a script is out, not in every parked waiter's future (`lock()`'s
            // future went from 4,032 to 320 bytes plus this box while it runs).
            match Box::pin(self.attempt(try_, true)).await {
                Err(e) if retry.again(&e).await => {}
                r => return r,
            }
        }
    }

    /// The retry policy of an acquire's tries.
    fn retry(&self) -> Retry<'_> {
        Retry::attempts(self.client().config())
            .op("acquire")
            .kind(K::SPEC.name)
    }

    /// One acquire script, under the owner's gate. `first`: no release message woke this try
    /// (a new acquire, or the first try after subscribing); while this client gives a turn away
    /// it looks before it takes ([`Engine::gives_way`]).
    ///
    /// The key's expiry is set to cover this grant *and* every grant the owner still has: a
    /// re-entry with a shorter lease never shortens an outer hold (Redisson's script applies
    /// the last lease, which silently ends a longer outer hold early).
    async fn attempt(self: &Arc<Self>, try_: &Try<'_>, first: bool) -> Result<Attempt> {
        let Try {
            hold,
            lease,
            wait_ms,
            enqueue,
            ..
        } = *try_;
        let client = self.client();
        let watchdog_ms = self.watchdog_ms();
        let mut gate = hold.gate().await;
        // Checked under the gate: `Client::shutdown` takes every gate after closing, so an
        // acquire either sees the client closed or is released by the shutdown after it.
        client.check_open()?;
        self.settle(hold, &mut gate).await?;
        if first && gate.count() == 0 {
            if let Some(ttl_ms) = self.gives_way().await? {
                return Ok(Attempt::Held { ttl_ms });
            }
        }
        let sent = Instant::now();
        let own_ms = lease.map_or(watchdog_ms, millis);
        let lease_ms = self.key_expiry(&gate, sent, Some(own_ms));
        let inv = self
            .kind
            .acquire_script(&self.op(&hold.field, lease_ms, wait_ms), enqueue);
        let mut conn = client.conn_synced();
        let flight = InFlight::new(&mut gate, self, hold, lease_ms);
        let reply: redis::RedisResult<Value> = inv.invoke_async(&mut conn).await;
        let reply = match reply {
            Ok(v) => v,
            // Unknown outcome (or no replica confirmed it): stays in flight, trimmed.
            Err(e) if is_connection_error(&e) => return Err(self.write_error(&mut conn, e)),
            // A non-reentrant kind refused its holder: nothing changed.
            Err(e) if crate::scripts::is_reentry_refusal(&e) => {
                flight.settled();
                return Err(LockError::AlreadyHeld {
                    name: self.name().to_owned(),
                    field: hold.field.to_string(),
                });
            }
            Err(e) => {
                flight.settled();
                return Err(from_script(K::SPEC.name, self.name(), e));
            }
        };
        flight.settled();
        match self.kind.parse_acquire(&reply) {
            Some(Acquire::Taken { count, token }) => {
                let guard = self.record_taken(try_, gate, (count, token), sent, lease_ms);
                Ok(Attempt::Taken(guard.await))
            }
            Some(Acquire::Held { ttl_ms }) => {
                if self.takes_turns() {
                    client.registry().turns.held(self.name());
                }
                Ok(Attempt::Held { ttl_ms })
            }
            None => Err(LockError::UnexpectedReply {
                key: self.name().to_owned(),
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// Books a grant the acquire script reported (the owner's hold count in Redis now, the
    /// fencing token; `sent`: when the script left, `lease_ms`: the expiry it applied), under
    /// the gate, and makes its guard.
    async fn record_taken(
        self: &Arc<Self>,
        try_: &Try<'_>,
        mut gate: Gate,
        (count, token): (u32, Option<i64>),
        sent: Instant,
        lease_ms: u64,
    ) -> Granted {
        let Try {
            owner, hold, lease, ..
        } = *try_;
        if count <= gate.count() {
            // Redis forgot earlier holds (expired, force-unlocked, restarted): they are lost,
            // and their guards must not release this new hold.
            hold.lose_gated(&mut gate);
        }
        let grant_lease = match lease {
            Some(l) => Lease::Fixed {
                lease: l,
                deadline: later(sent, l),
            },
            None => Lease::Watchdog,
        };
        let id = gate.taken(grant_lease);
        if self.takes_turns() {
            self.client.registry().turns.granted(self.name());
        }
        // Mirrors the grants (since when it is held, for `Client::holds`, and the watch flag).
        hold.held_from(sent);
        hold.set_watchdog(&gate);
        if lease.is_none() {
            // The lease was (re)applied no earlier than the script was sent.
            hold.renewed(sent);
            if sent.elapsed() >= Duration::from_millis(self.watchdog_ms()) / 3 {
                self.confirm_late_grant(hold).await;
            }
            self.client().wake_watchdog();
        }
        if count > gate.count() {
            // Holds this client does not know of: an acquire whose outcome was never learned
            // ran late (after its settle gave up). Adopting them would leave the key held after
            // the owner's last unlock; trim them now.
            tracing::debug!(lock = %self.name(), found = count, known = gate.count(), "trimming holds of an unknown acquire");
            gate.unknown();
            if let Err(e) = self.settle(hold, &mut gate).await {
                tracing::debug!(lock = %self.name(), error = %e, "trim failed; retried later");
                self.spawn_settle(hold.clone(), lease_ms);
            }
        }
        let epoch = gate.epoch();
        drop(gate);
        Granted {
            owner,
            hold: hold.clone(),
            epoch,
            grant: id,
            lease: lease.map(|l| (l, later(sent, l))),
            token,
        }
    }

    /// A watchdog grant whose reply took longer than a renewal period (a stalled server, a
    /// queue behind a pause): its validity counts from when the script was *sent*, so little or
    /// none is left, though the server applied the lease when it ran the script, later. Without
    /// more, its guard would read lost at once, and a lost guard is neither renewed nor
    /// released: the lock would stay taken by nobody until the lease ran out. One renewal now
    /// settles it: confirmed, the validity counts from its sending; gone or unanswered, the
    /// guard reads lost by its validity and the watchdog finds out as for any hold.
    async fn confirm_late_grant(&self, hold: &Hold) {
        let at = Instant::now();
        let inv = crate::raw::Renewal::script(
            self.watchdog_ms(),
            std::iter::once((&*hold.key, &*hold.field, &hold.renewal)),
        );
        let mut conn = self.client().conn_synced();
        match inv.invoke_async::<Value>(&mut conn).await {
            Ok(Value::Array(r)) if matches!(r.first(), Some(Value::Int(1))) => hold.renewed(at),
            other => {
                tracing::debug!(lock = %self.name(), reply = ?other, "a late grant's renewal did not confirm it");
            }
        }
    }

    /// The error of a lock write whose outcome is unknown: [`LockError::ReplicaSync`] when it
    /// ran but no replica confirmed it, else the connection error.
    pub(super) fn write_error(&self, conn: &mut Conn, e: redis::RedisError) -> LockError {
        observe::script_error(K::SPEC.name);
        match conn.take_shortfall() {
            Some(s) => s.error(self.name()),
            None => e.into(),
        }
    }
}
