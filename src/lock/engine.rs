//! The one lock algorithm behind [`Lock`]: owners' holds, the fast path, waiting on pub/sub,
//! leases, releases and the settling of unknown outcomes. Every script that changes a hold count
//! runs here, under the owner's gate (`holds/`); retries of the acquire and release scripts
//! live here too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::cleanup::{Forget, InFlight, QueueExit};
use super::Lock;
use crate::config::millis;
use crate::conn::Conn;
use crate::error::{from_script, is_connection_error, LockError, Result};
use crate::holds::{Gate, GrantId, Hold, HoldKind, HoldState, Lease};
use crate::observe::{self, Parked};
use crate::owner::LockOwner;
use crate::pubsub::Channel;
use crate::raw::{Acquire, Delays, KindExt, LockKind, Op, RawLock, Write};
use crate::retry::Retry;
use crate::scripts::Layout;
use crate::time::{epoch_ms, later, remaining};

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
    fn new<K: LockKind>(lock: &Lock<K>, req: &AcquireRequest, hold: &'a Arc<Hold>) -> Self {
        // Redisson uses the wait budget when one is given, else the fair-lock wait timeout.
        let wait_ms = match req.wait {
            Some(w) if !w.is_zero() => millis(w),
            _ => millis(lock.client().config().fair_lock_wait_timeout()),
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

/// What an acquire script reported when it took the lock.
struct Taken {
    /// The owner's hold count in Redis now.
    count: u32,
    token: Option<i64>,
    /// When the script was sent (leases count from then).
    sent: Instant,
    /// The expiry the script applied.
    lease_ms: u64,
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

impl<K: LockKind> Lock<K> {
    // === the algorithm ===

    pub(super) fn field(&self, owner: LockOwner) -> String {
        self.shared.kind.field(owner.field(self.client().id()))
    }

    pub(super) fn hold(&self, owner: LockOwner) -> Arc<Hold> {
        let field = self.shared_field(owner);
        let renewal = self.shared.kind.renewal(self.name(), &field);
        let kind = HoldKind {
            name: K::SPEC.name,
            channel_prefix: K::SPEC.channel_prefix,
            layout: K::SPEC.layout,
            publishes: self.shared.kind.uses_pubsub(),
        };
        self.client()
            .registry()
            .hold(&self.shared.name, &field, renewal, kind)
    }

    /// [`field`](Self::field) as shared text, built once per owner while one owner keeps
    /// using this handle.
    fn shared_field(&self, owner: LockOwner) -> Arc<str> {
        let mut last = self.shared.last_field.lock();
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
            key: &self.shared.name,
            channel: &self.shared.channel,
            field,
            lease_ms,
            // The spin lock publishes nothing: an empty command tells the scripts so.
            publish: match self.shared.kind.uses_pubsub() {
                true => self.client().publish_command(),
                false => "",
            },
            now_ms: epoch_ms(),
            wait_ms,
        }
    }

    pub(super) fn check_name(&self) -> Result<()> {
        match self.shared.refused {
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
        millis(self.client().config().watchdog_timeout())
    }

    /// Runs one acquisition: the fast path, then (when allowed to wait) the wait loop.
    pub(super) async fn acquire(&self, req: AcquireRequest) -> Result<Option<Granted>> {
        self.check_name()?;
        self.client().check_open()?;
        // A wait too long to represent is no deadline at all.
        let deadline = req.wait.and_then(|w| Instant::now().checked_add(w));
        let hold = self.hold(req.owner);
        // Forgets the hold when this ends without a grant, also when the future is dropped
        // (a hold that still has grants, or is shared, is kept).
        let _forget = Forget {
            lock: self,
            hold: &hold,
        };
        // A default owner may not take what it holds or is taking (another future of its task
        // would re-enter instead of waiting); given up however this ends.
        // This owner's releases still running in the background (a dropped guard's) are, as
        // far as it can tell, done: waited for within the wait bound, by a try-once acquire too
        // (bounded by the release's own retries), and never counted as held.
        let own = match req.wait {
            Some(w) if w.is_zero() => None,
            _ => deadline,
        };
        let _claim = match req.checked && K::SPEC.reentrant {
            true => match self.claim(req.owner, &hold, own).await? {
                Some(claim) => Some(claim),
                None => return Ok(None),
            },
            false if hold.releases_pending() && hold.live_grants(own).await.is_none() => {
                return Ok(None)
            }
            false => None,
        };
        let try_ = Try::new(self, &req, &hold);
        // Writer preference: a new reader waits while a write acquire of this client waits.
        if !self.behind_writers(&hold, deadline).await {
            return Ok(None);
        }
        // A wait that ends without the lock leaves the queue (fair lock), however it ends.
        let mut leave = try_.enqueue.then(|| QueueExit {
            lock: self,
            field: &hold.field,
            wait_ms: try_.wait_ms,
            armed: true,
        });
        // A per-waiter channel still subscribed from this owner's last wait (the fair lock's
        // linger): register on it before the first try, which then needs no second try.
        if let Some(channel) = self.lingering(&try_, deadline) {
            let taken = observe::waiting(self.wait_on(&try_, deadline, channel)).await?;
            if taken.is_some() {
                if let Some(e) = leave.as_mut() {
                    e.armed = false;
                }
            }
            return Ok(taken);
        }
        // Fast path: one script, no subscription.
        // Its own statement: a future awaited in a `match` scrutinee lives to the end of the
        // match, so it would sit beside the wait loop's in every parked waiter.
        let first = self.first_attempt(&try_).await?;
        let taken = match first {
            Attempt::Taken(guard) => Some(guard),
            Attempt::Held { ttl_ms } => match (remaining(deadline), self.shared.kind.backoff()) {
                (None, _) => None,
                (Some(left), None) => {
                    // A waiting writer holds this client's new readers back until it ends.
                    let _waits = (K::SPEC.layout == Layout::Write
                        && self.client().config().writer_preference())
                    .then(|| self.client().registry().writers.waiting(&self.shared.name));
                    observe::waiting(self.wait(&try_, deadline, left, ttl_ms)).await?
                }
                (Some(_), Some(backoff)) => {
                    observe::waiting(self.spin(&try_, deadline, backoff.delays())).await?
                }
            },
        };
        if taken.is_some() {
            if let Some(e) = leave.as_mut() {
                e.armed = false;
            }
        }
        Ok(taken)
    }

    /// The read-write lock's writer preference ([`Config::with_writer_preference`]): a read
    /// acquire waits while a write acquire of this client waits on the name, unless its owner
    /// already holds the name's read or write side here (re-entry and downgrade pass, or they
    /// could wait for themselves). `false`: still held back at `deadline` (a `try_lock` at once).
    ///
    /// [`Config::with_writer_preference`]: crate::Config::with_writer_preference
    async fn behind_writers(&self, hold: &Arc<Hold>, deadline: Option<Instant>) -> bool {
        let client = self.client();
        let writers = &client.registry().writers;
        if K::SPEC.layout != Layout::Read
            || !client.config().writer_preference()
            || !writers.any(&self.shared.name)
        {
            return true;
        }
        if hold.gate().await.count() > 0 {
            return true;
        }
        let write_field = format!("{}{}", hold.field, Write::SPEC.field_suffix);
        if let Some(w) = client.registry().find(&self.shared.name, &write_field) {
            if w.gate().await.count() > 0 {
                return true;
            }
        }
        let deadline = deadline.map(tokio::time::Instant::from_std);
        tracing::trace!(lock = %self.name(), "reader held back behind a waiting writer");
        writers.clear(&self.shared.name, deadline).await
    }

    /// The owner's per-waiter channel when a wait of it ended moments ago with a grant and the
    /// channel is still subscribed ([`LINGER`]); only for an acquire that may wait.
    fn lingering(&self, try_: &Try<'_>, deadline: Option<Instant>) -> Option<Arc<Channel>> {
        if !K::SPEC.per_waiter_channel
            || !try_.enqueue
            || self.shared.kind.backoff().is_some()
            || remaining(deadline).is_none()
        {
            return None;
        }
        let wait_channel = self
            .shared
            .kind
            .wait_channel(&self.shared.channel, &try_.hold.field);
        let channel = self.client().pubsub().confirmed(&wait_channel)?;
        {
            // A release message that reached the channel after this owner's last wait had
            // ended (it took the lock on a try, the message came after) left a stored wake-up:
            // stale, as this owner is not waiting now. Taken here (a wake-up consumed by
            // `enable` is not passed on), or the first try would be followed by a spurious one.
            let stale = channel.notify().notified();
            tokio::pin!(stale);
            let _ = stale.as_mut().enable();
        }
        Some(channel)
    }

    /// Subscribes to the kind's wait channel, then tries again each time a release message
    /// arrives or the holder's TTL (as last seen) runs out, until taken or `deadline`.
    async fn wait(
        &self,
        try_: &Try<'_>,
        deadline: Option<Instant>,
        left: Duration,
        ttl_ms: i64,
    ) -> Result<Option<Granted>> {
        let client = self.client();
        let wait_channel = self
            .shared
            .kind
            .wait_channel(&self.shared.channel, &try_.hold.field);
        let sub_timeout = client.config().subscription_timeout().min(left);
        let channel = match Box::pin(client.pubsub().subscribe(&wait_channel, sub_timeout)).await {
            Ok(c) => c,
            Err(e) if e.is_timeout() && remaining(deadline).is_none() => return Ok(None),
            Err(e) => return Err(e),
        };
        tracing::trace!(lock = %self.name(), ttl_ms, "waiter subscribed");
        self.wait_on(try_, deadline, channel).await
    }

    /// The wait loop on a subscribed `channel`: register for a wake-up, try, sleep until a
    /// message or the TTL; until taken or `deadline`. A per-waiter channel outlives a wait that
    /// ended with a grant by [`LINGER`], so the owner's next wait finds it subscribed.
    async fn wait_on(
        &self,
        try_: &Try<'_>,
        deadline: Option<Instant>,
        channel: Arc<Channel>,
    ) -> Result<Option<Granted>> {
        let _parked = Parked::new(K::SPEC.name);
        let client = self.client();
        let mut retry = Retry::attempts(client.config())
            .op("acquire")
            .kind(K::SPEC.name);
        let mut last_ttl = -1;
        loop {
            // Register for wake-ups *before* trying, so a release in between is not missed.
            let notified = channel.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Refused on a resubscription: no message can come (checked after registering, as
            // the refusal wakes the registered waiters).
            if let Some(e) = channel.refusal() {
                return Err(e);
            }
            let pause = match Box::pin(self.attempt(try_)).await {
                Ok(Attempt::Taken(guard)) => {
                    if K::SPEC.per_waiter_channel {
                        let channel = channel.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(LINGER).await;
                            drop(channel);
                        });
                    }
                    return Ok(Some(guard));
                }
                Ok(Attempt::Held { ttl_ms }) => {
                    retry.reset();
                    last_ttl = ttl_ms;
                    // A negative TTL (no expiry) waits for a message only.
                    (ttl_ms >= 0).then(|| Duration::from_millis(ttl_ms as u64))
                }
                Err(e) => match retry.pause_after(&e) {
                    Some(p) => {
                        tracing::debug!(lock = %self.name(), error = %e, "acquire failed; retrying");
                        Some(p)
                    }
                    None => return Err(e),
                },
            };
            let Some(left) = remaining(deadline) else {
                return Ok(None);
            };
            let pause = match (pause, deadline) {
                (Some(p), Some(_)) => Some(p.min(left)),
                (Some(p), None) => Some(p),
                (None, Some(_)) => Some(left),
                (None, None) => None,
            };
            match pause {
                Some(p) => {
                    let _ = tokio::time::timeout(p, notified).await;
                }
                None => notified.await,
            }
            tracing::trace!(lock = %self.name(), last_ttl, "waiter woke");
        }
    }

    /// The spin lock's wait: no subscription; sleep for the next backoff delay (never past the
    /// deadline), try again, until taken or `deadline`. Errors are retried as in [`Self::wait`].
    async fn spin(
        &self,
        try_: &Try<'_>,
        deadline: Option<Instant>,
        mut delays: Delays,
    ) -> Result<Option<Granted>> {
        let _parked = Parked::new(K::SPEC.name);
        let mut retry = Retry::attempts(self.client().config())
            .op("acquire")
            .kind(K::SPEC.name);
        let mut pause = delays.next().unwrap_or_default();
        loop {
            let Some(left) = remaining(deadline) else {
                return Ok(None);
            };
            tokio::time::sleep(pause.min(left)).await;
            pause = match Box::pin(self.attempt(try_)).await {
                Ok(Attempt::Taken(guard)) => return Ok(Some(guard)),
                Ok(Attempt::Held { .. }) => {
                    retry.reset();
                    delays.next().unwrap_or_default()
                }
                Err(e) => match retry.pause_after(&e) {
                    Some(p) => p,
                    None => return Err(e),
                },
            };
        }
    }

    /// The first try, with the same patience as the wait loop: a redirected script did not run
    /// (the slot map is being refreshed), and after a connection error the next try first trims
    /// away whatever the failed one may have taken, so both are tried again, up to
    /// `retry_attempts` times; anything else is reported at once.
    async fn first_attempt(&self, try_: &Try<'_>) -> Result<Attempt> {
        let mut retry = Retry::attempts(self.client().config())
            .op("acquire")
            .kind(K::SPEC.name);
        loop {
            // Attempts are boxed here and in the wait loops: their state (gate, script call)
            // lives only while a script is out, not in every parked waiter's future (`lock()`'s
            // future went from 4,032 to 320 bytes plus this box while it runs).
            match Box::pin(self.attempt(try_)).await {
                Err(e) if retry.again(&e).await => {}
                r => return r,
            }
        }
    }

    /// One acquire script, under the owner's gate.
    ///
    /// The key's expiry is set to cover this grant *and* every grant the owner still has: a
    /// re-entry with a shorter lease never shortens an outer hold (Redisson's script applies
    /// the last lease, which silently ends a longer outer hold early).
    async fn attempt(&self, try_: &Try<'_>) -> Result<Attempt> {
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
        let sent = Instant::now();
        let own_ms = lease.map_or(watchdog_ms, millis);
        let lease_ms = self.key_expiry(&gate, sent, Some(own_ms));
        let inv = self
            .shared
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
        match self.shared.kind.parse_acquire(&reply) {
            Some(Acquire::Taken { count, token }) => {
                let taken = Taken {
                    count,
                    token,
                    sent,
                    lease_ms,
                };
                let guard = self.record_taken(try_, gate, taken).await;
                Ok(Attempt::Taken(guard))
            }
            Some(Acquire::Held { ttl_ms }) => Ok(Attempt::Held { ttl_ms }),
            None => Err(LockError::UnexpectedReply {
                key: self.name().to_owned(),
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// Books a grant the acquire script reported, under the gate, and makes its guard.
    async fn record_taken(&self, try_: &Try<'_>, mut gate: Gate, taken: Taken) -> Granted {
        let Try {
            owner, hold, lease, ..
        } = *try_;
        let Taken {
            count,
            token,
            sent,
            lease_ms,
        } = taken;
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
}

impl<K: LockKind> Lock<K> {
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

/// How long a per-waiter channel (fair lock) stays subscribed after a wait that ended with a
/// grant: an owner that waits again within it skips the `SUBSCRIBE`/`UNSUBSCRIBE` pair and the
/// second try after subscribing (issue 24 item 3). Only this owner's queue turn is published
/// there, so the lingering subscription receives nothing meanwhile.
pub(crate) const LINGER: Duration = Duration::from_secs(1);
