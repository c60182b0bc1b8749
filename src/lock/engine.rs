//! The one lock algorithm behind [`Lock`]: owners' holds, the fast path, waiting on pub/sub,
//! leases, releases and the settling of unknown outcomes. Every script that changes a hold count
//! runs here, under the owner's gate (`holds.rs`); retries of the acquire and release scripts
//! live here too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use super::Lock;
use crate::config::millis;
use crate::error::{from_script, is_connection_error, is_redirect, LockError, Result};
use crate::guard::LockGuard;
use crate::holds::{Gate, GrantId, Hold, Lease};
use crate::keys;
use crate::owner::LockOwner;
use crate::raw::{Acquire, LockKind, Op, Release};
use crate::scripts;
use crate::time::later;

enum Attempt<K: LockKind> {
    Taken(LockGuard<K>),
    Held { ttl_ms: i64 },
}

/// Which hold a release gives back.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    /// A guard's own grant, taken in `epoch`.
    Grant { epoch: u64, id: GrantId },
    /// The owner's latest grant (Redisson-style `unlock()`).
    Latest,
}

/// Marks a hold count uncertain if the script in flight never reports back (the future is
/// dropped, or the connection fails): the hold becomes dirty (Redis must be trimmed to the
/// grants the gate knows) and a background task trims it.
struct InFlight<'g, K: LockKind> {
    gate: &'g mut Gate,
    lock: &'g Lock<K>,
    hold: &'g Arc<Hold>,
    lease_ms: u64,
    armed: bool,
}

impl<K: LockKind> InFlight<'_, K> {
    fn settled(mut self) {
        self.armed = false;
    }
}

impl<K: LockKind> Drop for InFlight<'_, K> {
    fn drop(&mut self) {
        if self.armed {
            self.gate.unknown();
            self.hold.set_watchdog(self.gate);
            self.lock.spawn_settle(self.hold.clone(), self.lease_ms);
        }
    }
}

impl<K: LockKind> Lock<K> {
    // === the algorithm ===

    pub(super) fn field(&self, owner: LockOwner) -> String {
        self.shared.kind.field(owner.field(&self.client().inner.id))
    }

    pub(super) fn hold(&self, owner: LockOwner) -> Arc<Hold> {
        let field = self.field(owner);
        let renewal = self.shared.kind.renewal(self.name(), &field);
        self.client().inner.holds.hold(self.name(), &field, renewal)
    }

    /// The arguments of one script on `field`.
    pub(super) fn op<'a>(&'a self, field: &'a str, lease_ms: u64, wait_ms: u64) -> Op<'a> {
        Op {
            key: &self.shared.name,
            channel: &self.shared.channel,
            field,
            lease_ms,
            publish: self.client().inner.publish,
            now_ms: epoch_ms(),
            wait_ms,
        }
    }

    pub(super) fn check_name(&self) -> Result<()> {
        if self.shared.name.is_empty() {
            Err(LockError::InvalidArgument("lock name must not be empty"))
        } else {
            Ok(())
        }
    }

    pub(super) fn watchdog_ms(&self) -> u64 {
        millis(self.client().inner.config.watchdog_timeout())
    }

    /// `wait`: `None` waits forever, `Some(ZERO)` tries once. `lease`: `None` = watchdog.
    pub(super) async fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard<K>>> {
        self.check_name()?;
        let start = Instant::now();
        // A wait too long to represent is no deadline at all.
        let deadline = wait.and_then(|w| start.checked_add(w));
        let owner = self.owner();
        let hold = self.hold(owner);
        // Forgets the hold when this ends without a grant, also when the future is dropped
        // (a hold that still has grants, or is shared, is kept).
        let _forget = Forget {
            lock: self,
            hold: &hold,
        };
        self.acquire_hold(owner, &hold, deadline, wait, lease).await
    }

    async fn acquire_hold(
        &self,
        owner: LockOwner,
        hold: &Arc<Hold>,
        deadline: Option<Instant>,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard<K>>> {
        let inner = &self.client().inner;
        let enqueue = wait != Some(Duration::ZERO);
        // How long a queued waiter may be absent (fair lock): Redisson uses the wait budget when
        // one is given, else the fair-lock wait timeout.
        let wait_ms = match wait {
            Some(w) if !w.is_zero() => millis(w),
            _ => millis(inner.config.fair_lock_wait_timeout()),
        };
        // A wait that ends without the lock leaves the queue (fair lock), however it ends.
        let mut leave = enqueue.then(|| QueueExit {
            lock: self,
            field: &hold.field,
            wait_ms,
            armed: true,
        });
        // Fast path: one script, no subscription.
        let ttl_ms = match self
            .first_attempt(owner, hold, lease, wait_ms, enqueue)
            .await?
        {
            Attempt::Taken(guard) => return Ok(Some(disarm(&mut leave, guard))),
            Attempt::Held { ttl_ms } => ttl_ms,
        };
        let Some(mut left) = remaining(deadline) else {
            return Ok(None);
        };
        let wait_channel = self
            .shared
            .kind
            .wait_channel(&self.shared.channel, &hold.field);
        let sub_timeout = inner.config.subscription_timeout().min(left);
        let channel = match inner.pubsub.subscribe(&wait_channel, sub_timeout).await {
            Ok(c) => c,
            Err(e) if e.is_timeout() && remaining(deadline).is_none() => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut failures = 0u32;
        let mut last_ttl = ttl_ms;
        loop {
            // Register for wake-ups *before* trying, so a release in between is not missed.
            let notified = channel.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let pause = match self.attempt(owner, hold, lease, wait_ms, enqueue).await {
                Ok(Attempt::Taken(guard)) => return Ok(Some(disarm(&mut leave, guard))),
                Ok(Attempt::Held { ttl_ms }) => {
                    failures = 0;
                    last_ttl = ttl_ms;
                    // A negative TTL (no expiry) waits for a message only.
                    (ttl_ms >= 0).then(|| Duration::from_millis(ttl_ms as u64))
                }
                Err(e)
                    if (e.is_connection_error() || e.is_redirect())
                        && failures + 1 < inner.config.retry_attempts() =>
                {
                    tracing::debug!(lock = %self.name(), error = %e, "acquire failed; retrying");
                    failures += 1;
                    Some(inner.config.backoff(failures - 1))
                }
                Err(e) => return Err(e),
            };
            left = match remaining(deadline) {
                Some(l) => l,
                None => return Ok(None),
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

    /// The first try, with the same patience as the wait loop: a redirected script did not run
    /// (the slot map is being refreshed), and after a connection error the next try first trims
    /// away whatever the failed one may have taken, so both are tried again, up to
    /// `retry_attempts` times; anything else is reported at once.
    async fn first_attempt(
        &self,
        owner: LockOwner,
        hold: &Arc<Hold>,
        lease: Option<Duration>,
        wait_ms: u64,
        enqueue: bool,
    ) -> Result<Attempt<K>> {
        let config = &self.client().inner.config;
        let mut tries = 0;
        loop {
            match self.attempt(owner, hold, lease, wait_ms, enqueue).await {
                Err(e)
                    if (e.is_redirect() || e.is_connection_error())
                        && tries + 1 < config.retry_attempts() =>
                {
                    tokio::time::sleep(config.backoff(tries)).await;
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    /// One acquire script, under the owner's gate.
    ///
    /// The key's expiry is set to cover this grant *and* every grant the owner still has: a
    /// re-entry with a shorter lease never shortens an outer hold (Redisson's script applies
    /// the last lease, which silently ends a longer outer hold early).
    async fn attempt(
        &self,
        owner: LockOwner,
        hold: &Arc<Hold>,
        lease: Option<Duration>,
        wait_ms: u64,
        enqueue: bool,
    ) -> Result<Attempt<K>> {
        let inner = &self.client().inner;
        let watchdog_ms = self.watchdog_ms();
        let mut gate = hold.gate().await;
        self.settle(hold, &mut gate).await?;
        let sent = Instant::now();
        let own_ms = lease.map_or(watchdog_ms, millis);
        let lease_ms = gate
            .expiry_ms(sent, watchdog_ms, Some(own_ms))
            .unwrap_or(own_ms);
        let inv = self
            .shared
            .kind
            .acquire_script(&self.op(&hold.field, lease_ms, wait_ms), enqueue);
        let mut conn = inner.conn.clone();
        let flight = InFlight {
            gate: &mut gate,
            lock: self,
            hold,
            lease_ms,
            armed: true,
        };
        let reply: redis::RedisResult<Value> = inv.invoke_async(&mut conn).await;
        let reply = match reply {
            Ok(v) => v,
            Err(e) if is_connection_error(&e) => return Err(e.into()), // stays in flight: trimmed
            Err(e) => {
                flight.settled();
                return Err(from_script(self.name(), e));
            }
        };
        flight.settled();
        match self.shared.kind.parse_acquire(&reply) {
            Some(Acquire::Taken { count, token }) => {
                if count <= gate.count() {
                    // Redis forgot earlier holds (expired, force-unlocked, restarted): they are
                    // lost, and their guards must not release this new hold.
                    hold.lose_gated(&mut gate);
                }
                let grant_lease = match lease {
                    Some(l) => Lease::Fixed {
                        deadline: later(sent, l),
                    },
                    None => Lease::Watchdog,
                };
                let id = gate.taken(grant_lease);
                if lease.is_none() {
                    hold.set_watchdog(&gate);
                    // The lease was (re)applied no earlier than the script was sent.
                    hold.renewed(sent);
                    inner.watchdog_wake.notify_one();
                }
                if count > gate.count() {
                    // Holds this client does not know of: an acquire whose outcome was never
                    // learned ran late (after its settle gave up). Adopting them would leave
                    // the key held after the owner's last unlock; trim them now.
                    tracing::debug!(lock = %self.name(), found = count, known = gate.count(), "trimming holds of an unknown acquire");
                    gate.unknown();
                    if let Err(e) = self.settle(hold, &mut gate).await {
                        tracing::debug!(lock = %self.name(), error = %e, "trim failed; retried later");
                        self.spawn_settle(hold.clone(), lease_ms);
                    }
                }
                let epoch = gate.epoch();
                drop(gate);
                Ok(Attempt::Taken(LockGuard::new(
                    self.with_owner(owner),
                    hold.clone(),
                    epoch,
                    id,
                    lease.map(|l| (l, later(sent, l))),
                    token,
                )))
            }
            Some(Acquire::Held { ttl_ms }) => Ok(Attempt::Held { ttl_ms }),
            None => Err(LockError::UnexpectedReply {
                key: self.name().to_owned(),
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// Releases one grant: a guard's own, or the owner's latest. The key's expiry is set to
    /// cover the grants that remain (not the released one's lease, and not the watchdog's
    /// when only fixed leases remain). `pending` is cleared once the release script is about
    /// to be sent: from then on a dropped future completes the release in the background;
    /// before that, nothing was released.
    pub(crate) async fn release(
        &self,
        hold: &Arc<Hold>,
        target: Target,
        pending: &mut bool,
    ) -> Result<Release> {
        let inner = &self.client().inner;
        let mut gate = hold.gate().await;
        self.settle(hold, &mut gate).await?;
        let grant = match target {
            Target::Grant { epoch, id } => {
                if epoch != gate.epoch() {
                    return Ok(Release::NotHeld);
                }
                match gate.take_grant(id) {
                    Some(g) => Some(g),
                    // Released already by an owner-style unlock.
                    None => return Ok(Release::NotHeld),
                }
            }
            Target::Latest => gate.take_latest(),
        };
        let lease_ms = gate
            .expiry_ms(Instant::now(), self.watchdog_ms(), None)
            .unwrap_or_else(|| self.watchdog_ms());
        let request_id = keys::request_id();
        let latch = keys::unlock_latch(self.name(), &request_id);
        let latch_ttl = millis(inner.config.latch_ttl());
        let flight = InFlight {
            gate: &mut gate,
            lock: self,
            hold,
            lease_ms,
            armed: true,
        };
        *pending = false;
        let mut attempt = 0;
        let reply = loop {
            let op = self.op(&hold.field, lease_ms, 0);
            let inv = self.shared.kind.release_script(&op, &latch, latch_ttl);
            let mut conn = inner.conn.clone();
            match inv.invoke_async::<Value>(&mut conn).await {
                Ok(v) => break v,
                // Same request id on every try: the latch makes a repeat return the first result.
                Err(e)
                    if (is_connection_error(&e) || is_redirect(&e))
                        && attempt + 1 < inner.config.retry_attempts() =>
                {
                    tokio::time::sleep(inner.config.backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) if is_connection_error(&e) => return Err(e.into()),
                Err(e) => {
                    flight.settled();
                    // The script failed before changing anything (e.g. WRONGTYPE).
                    if let Some(g) = grant {
                        gate.restore(g);
                    }
                    return Err(from_script(self.name(), e));
                }
            }
        };
        flight.settled();
        let outcome = self.shared.kind.parse_release(&reply);
        match outcome {
            Some(Release::NotHeld) => hold.lose_gated(&mut gate),
            Some(Release::StillHeld) if gate.count() > 0 => {}
            // The last hold is gone: end the epoch, so a stale guard of this owner (one that
            // was detached and released owner-style) can never release a later hold. (A read
            // release says "still held" when other readers keep the lock.)
            Some(Release::StillHeld | Release::Released) => hold.lose_gated(&mut gate),
            None => {}
        }
        hold.set_watchdog(&gate);
        drop(gate);
        if matches!(outcome, Some(Release::Released | Release::StillHeld)) {
            self.delete_latch(latch);
        }
        match outcome {
            // The release's own message wakes one waiter per client, ours included: waking a
            // local waiter directly as well cost a wasted try per release, and waking only
            // directly let the releasing task win its lock back in ~45 % of handoffs against
            // ~15 % when the message wakes (docs/benchmarks.md, experiments C and D).
            Some(r) => Ok(r),
            None => Err(LockError::UnexpectedReply {
                key: self.name().to_owned(),
                reply: format!("{reply:?}"),
            }),
        }
    }

    /// Re-applies a grant's lease from now (MultiLock, once every member is taken): a fixed
    /// grant's deadline moves to now + `lease`, and the key gets the expiry that covers every
    /// grant the owner still has, by an owner-checked `PEXPIRE`. `Ok(false)`: the hold is gone.
    pub(crate) async fn reapply_lease(
        &self,
        hold: &Arc<Hold>,
        epoch: u64,
        id: GrantId,
        lease: Option<Duration>,
    ) -> Result<bool> {
        let mut gate = hold.gate().await;
        if gate.epoch() != epoch {
            return Ok(false);
        }
        let sent = Instant::now();
        if let Some(l) = lease {
            gate.set_deadline(id, later(sent, l));
        }
        let watchdog_ms = self.watchdog_ms();
        let expiry_ms = gate
            .expiry_ms(sent, watchdog_ms, None)
            .unwrap_or(watchdog_ms);
        let mut conn = self.client().inner.conn.clone();
        let set: i64 = scripts::expire(self.name(), &hold.field, expiry_ms)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| from_script(self.name(), e))?;
        if set == 0 {
            hold.lose_gated(&mut gate);
        } else if lease.is_none() {
            hold.renewed(sent);
        }
        Ok(set == 1)
    }

    /// The latch only matters while the unlock might be retried: it is deleted shortly after,
    /// in a batch (Redisson sends one `DEL` per unlock); its PX bounds it if that is lost.
    fn delete_latch(&self, latch: String) {
        self.client().inner.latches.delete(latch);
    }

    /// Brings Redis back to the grants the gate knows when an earlier outcome was unknown.
    async fn settle(&self, hold: &Hold, gate: &mut Gate) -> Result<()> {
        if !gate.is_dirty() {
            return Ok(());
        }
        let watchdog_ms = self.watchdog_ms();
        let lease_ms = gate
            .expiry_ms(Instant::now(), watchdog_ms, None)
            .unwrap_or(watchdog_ms);
        let mut conn = self.client().inner.conn.clone();
        let op = self.op(&hold.field, lease_ms, 0);
        let found: i64 = self
            .shared
            .kind
            .trim_script(&op, gate.count())
            .invoke_async(&mut conn)
            .await
            .map_err(|e| from_script(self.name(), e))?;
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
    fn spawn_settle(&self, hold: Arc<Hold>, lease_ms: u64) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(lock = %self.name(), "no tokio runtime: the unknown hold is settled by the next operation or its lease");
            return;
        };
        let lock = self.clone();
        rt.spawn(async move {
            let config = lock.client().config().clone();
            // Retry while the unknown hold may still be alive in Redis: for its lease. Past
            // that, an owner left with no hold has nothing renewing it, so it has expired and
            // the hold can go (before, a hold dirtied during an outage longer than the retries
            // stayed in the client's map for good). Should the unknown acquire still run
            // later, the owner's next acquire finds more holds than it knows and trims them.
            let give_up = Instant::now() + Duration::from_millis(lease_ms);
            let mut attempt = 0;
            loop {
                let mut gate = hold.gate().await;
                match lock.settle(&hold, &mut gate).await {
                    Ok(()) => break,
                    Err(e) if e.is_connection_error() => {
                        if Instant::now() >= give_up {
                            if gate.count() == 0 {
                                gate.settled();
                            }
                            tracing::debug!(lock = %lock.name(), error = %e, "unknown hold not settled; its lease has run out");
                            break;
                        }
                        drop(gate);
                        tokio::time::sleep(config.backoff(attempt)).await;
                        attempt = attempt.saturating_add(1);
                    }
                    Err(e) => {
                        tracing::warn!(lock = %lock.name(), error = %e, "can't settle an unknown hold");
                        break;
                    }
                }
            }
            lock.client().inner.holds.forget(&hold);
        });
    }
}

/// Forgets an acquisition's hold in the client's map when the acquisition ends, however it
/// ends; [`Holds::forget`](crate::holds::Holds::forget) keeps holds still in use.
struct Forget<'a, K: LockKind> {
    lock: &'a Lock<K>,
    hold: &'a Arc<Hold>,
}

impl<K: LockKind> Drop for Forget<'_, K> {
    fn drop(&mut self) {
        self.lock.client().inner.holds.forget(self.hold);
    }
}

/// Leaves the wait queue (fair lock) when a wait ends without the lock, however it ends:
/// timeout, error or a dropped future. Kinds without a queue have no cancel script.
struct QueueExit<'a, K: LockKind> {
    lock: &'a Lock<K>,
    field: &'a str,
    wait_ms: u64,
    armed: bool,
}

fn disarm<K: LockKind>(exit: &mut Option<QueueExit<'_, K>>, guard: LockGuard<K>) -> LockGuard<K> {
    if let Some(e) = exit.as_mut() {
        e.armed = false;
    }
    guard
}

impl<K: LockKind> Drop for QueueExit<'_, K> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let op = self.lock.op(self.field, 0, self.wait_ms);
        let Some(inv) = self.lock.shared.kind.cancel_script(&op) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut conn = self.lock.client().inner.conn.clone();
        let name = self.lock.name().to_owned();
        rt.spawn(async move {
            if let Err(e) = inv.invoke_async::<Value>(&mut conn).await {
                // The waiter's deadline evicts it from the queue anyway.
                tracing::warn!(lock = %name, error = %e, "can't leave the fair-lock queue");
            }
        });
    }
}

/// Milliseconds since the Unix epoch (the fair lock's deadlines use client clocks, as Redisson).
fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Time left before `deadline`; `None` once it has passed. No deadline: forever.
fn remaining(deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        None => Some(Duration::MAX),
        Some(d) => d
            .checked_duration_since(Instant::now())
            .filter(|l| !l.is_zero()),
    }
}
