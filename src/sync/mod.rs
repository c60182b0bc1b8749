//! Redisson's synchronizers: [`Semaphore`] (`RSemaphore`), [`CountDownLatch`]
//! (`RCountDownLatch`), [`PermitExpirableSemaphore`] (`RPermitExpirableSemaphore`) and
//! [`RateLimiter`] (`RRateLimiter`, which waits by sleeping the delay its script answers, not
//! on a channel, as Redisson's).
//!
//! They share one wait loop with the locks ([`crate::wait`]): try once without a subscription;
//! if that fails, subscribe to the object's channel, then loop: register for a wake-up *before*
//! trying, try, sleep until a message, a bounded re-check or the deadline. The per-channel wake
//! policy (`pubsub::Wake`) says how many local waiters one message wakes.

mod count_down_latch;
mod permit_extras;
mod permit_guard;
mod permit_semaphore;
mod rate_limiter;
mod semaphore;
mod semaphore_guard;
mod ttl;

pub use count_down_latch::CountDownLatch;
pub use permit_guard::PermitGuard;
pub use permit_semaphore::{PermitExpirableSemaphore, PermitId};
pub use rate_limiter::{RateLimiter, RateLimiterConfig, RateType};
pub use semaphore::Semaphore;
pub use semaphore_guard::SemaphoreGuard;

use std::future::Future;
use std::time::{Duration, Instant};

use crate::conn::Conn;
use crate::error::{from_script, is_connection_error, LockError, Result};
use crate::keys::refusal;
use crate::observe;
use crate::pubsub::Wake;
use crate::retry::Retry;
use crate::scripts::Call;
use crate::shared::Client;
pub(crate) use crate::time::{epoch_ms, remaining};
use crate::wait;
pub(crate) use crate::wait::Step;

/// The longest a waiter sleeps without a message before it tries again: a bound, not a poll,
/// for the case where a message was published where this client could not hear it (e.g. by a
/// client using the other publish command). Reconnects of the subscriber wake every waiter.
const RECHECK: Duration = Duration::from_secs(30);

/// Runs `attempt` until it is done or `deadline` passes, sleeping on `channel` in between (see
/// the module docs; a parked waiter counts in the `kind`'s waiters gauge). `Ok(None)`: the
/// deadline passed first.
pub(crate) async fn wait_for<T, F, Fut>(
    kind: &'static str,
    client: &Client,
    channel: &str,
    wake: Wake,
    deadline: Option<Instant>,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
{
    let config = client.config();
    client.check_open()?;
    // Fast path: one try, no subscription (transient failures tried again, as the locks do).
    let mut retry = Retry::attempts(config).op("acquire").kind(kind);
    loop {
        match attempt().await {
            Ok(Step::Done(v)) => return Ok(Some(v)),
            Ok(Step::Wait(_)) => break,
            Err(e) if retry.again(&e).await => {}
            Err(e) => return Err(e),
        }
    }
    // Parked (the operation's `redisson_lock.wait` span): subscribed to `channel`, tries on
    // each wake-up in the shared loop until done or `deadline`, sleeping at most [`RECHECK`].
    let parked = async {
        let subscribed = wait::subscribe(config, deadline, |timeout| {
            client.pubsub().subscribe_with(channel, timeout, wake)
        });
        let Some(sub) = subscribed.await? else {
            return Ok(None);
        };
        let retry = Retry::attempts(config).op("acquire").kind(kind);
        let open = || client.check_open();
        wait::wait_on(kind, channel, Some(&sub), deadline, retry, open, || {
            let tried = attempt();
            async move {
                Ok(match tried.await? {
                    Step::Wait(hint) => Step::Wait(Some(hint.map_or(RECHECK, |h| h.min(RECHECK)))),
                    done => done,
                })
            }
        })
        .await
    };
    observe::waiting(parked).await
}

/// A wait budget as a deadline (`None`: a wait too long to represent is no deadline at all).
pub(crate) fn deadline(wait: Duration) -> Option<Instant> {
    Instant::now().checked_add(wait)
}

/// What every synchronizer handle holds: its client, its name (the count key), its channel,
/// and why the name is refused, if it is ([`refusal`]), checked by [`Named::check`] before
/// anything is sent. Each synchronizer's own state derefs to it.
#[derive(Debug)]
pub(crate) struct Named {
    pub(crate) client: Client,
    pub(crate) name: String,
    pub(crate) channel: String,
    /// The metrics' `kind` label (`semaphore`, `permit_semaphore`, `latch`, `rate_limiter`).
    pub(crate) kind: &'static str,
    refused: Option<&'static str>,
}

impl Named {
    /// `related`: the keys besides the name and the channel that must share its hash slot.
    pub(crate) fn new(
        kind: &'static str,
        client: Client,
        name: String,
        channel: String,
        related: &[&str],
    ) -> Named {
        let keys = std::iter::once(channel.as_str()).chain(related.iter().copied());
        let refused = refusal(&name, client.is_cluster(), keys);
        Named {
            client,
            name,
            channel,
            kind,
            refused,
        }
    }

    /// The integer stored at the name (a semaphore's permits, a latch's count): 0 when the key
    /// does not exist.
    pub(crate) async fn read_count(&self) -> Result<i64> {
        self.check()?;
        let mut conn = self.client.conn();
        let v: Option<i64> = redis::cmd("GET")
            .arg(&self.name)
            .query_async(&mut conn)
            .await
            .map_err(|e| from_script(self.kind, &self.name, e))?;
        Ok(v.unwrap_or(0))
    }

    /// Sets (`Some`) or removes (`None`) the time to live of `keys` (the object's keys, the name
    /// first): whether any key's TTL changed. A TTL of zero or over 100 years is refused before
    /// anything is sent.
    pub(crate) async fn expire_keys(&self, keys: &[&str], ttl: Option<Duration>) -> Result<bool> {
        self.check()?;
        if let Some(ttl) = ttl {
            check_ttl(ttl)?;
        }
        let inv = crate::scripts::sync_expire(keys, ttl.map(crate::config::millis));
        Ok(run_repeatable::<i64>(&self.client, self.kind, &self.name, &inv).await? == 1)
    }

    /// The name's time to live (`PTTL`; Redisson's `remainTimeToLive`).
    pub(crate) async fn key_ttl(&self) -> Result<KeyTtl> {
        self.check()?;
        let mut conn = self.client.conn();
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&self.name)
            .query_async(&mut conn)
            .await?;
        Ok(match ttl {
            -2 => KeyTtl::NoKey,
            t if t < 0 => KeyTtl::NoExpiry,
            t => KeyTtl::Expires(Duration::from_millis(t.unsigned_abs())),
        })
    }

    /// Runs a script on this object that is safe to repeat ([`run_repeatable`]).
    pub(crate) async fn repeatable<T: redis::FromRedisValue>(&self, inv: &Call) -> Result<T> {
        run_repeatable(&self.client, self.kind, &self.name, inv).await
    }

    /// Runs a script on this object once ([`run_once`]).
    pub(crate) async fn once<T: redis::FromRedisValue>(&self, inv: &Call) -> Result<T> {
        run_once(&self.client, self.kind, &self.name, inv).await
    }

    /// `op` on this object of `kind`, for its span and metrics.
    pub(crate) fn observe_as(&self, op: &'static str, kind: &'static str) -> observe::Op<'_> {
        observe::Op::new(op, kind, &self.name)
    }

    /// The error for a refused name (nothing is sent).
    pub(crate) fn check(&self) -> Result<()> {
        match self.refused {
            Some(why) => Err(LockError::InvalidArgument(why)),
            None => Ok(()),
        }
    }
}

/// Runs `work` on a task of its own, so that a write completes even when the caller's future
/// is dropped (see "Cancel safety" on each synchronizer); `what` names it in the error when the
/// task ends without a reply.
pub(crate) async fn detached<T: Send + 'static>(
    what: &'static str,
    work: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    tokio::spawn(work)
        .await
        .unwrap_or_else(|_| Err(no_reply(what)))
}

/// A detached task that ended without a reply (its runtime is shutting down).
pub(crate) fn no_reply(what: &'static str) -> LockError {
    LockError::Redis(redis::RedisError::from(std::io::Error::other(format!(
        "the {what} task ended without a reply"
    ))))
}

/// The time to live of a synchronizer's key, from `remain_time_to_live` (Redisson's
/// `remainTimeToLive`: `-2`, `-1` or the milliseconds left).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyTtl {
    /// The key does not exist (`PTTL` -2).
    NoKey,
    /// The key exists without a time to live (`PTTL` -1).
    NoExpiry,
    /// The key is deleted in this much time.
    Expires(Duration),
}

/// A time to live for a synchronizer key: non-zero (a zero TTL would delete it: use `delete`)
/// and at most 100 years.
pub(crate) fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl.is_zero() {
        return Err(LockError::InvalidArgument(
            "a time to live must be non-zero (delete() removes the object)",
        ));
    }
    if ttl > crate::time::MAX_DURATION {
        return Err(LockError::InvalidArgument(
            "a time to live must be at most 100 years",
        ));
    }
    Ok(())
}

/// A permit amount as Java's `int` sees it: at most `i32::MAX`.
pub(crate) fn check_permits(permits: u32) -> Result<()> {
    if permits > i32::MAX as u32 {
        Err(LockError::InvalidArgument(
            "permits must be at most i32::MAX (Java's int)",
        ))
    } else {
        Ok(())
    }
}

/// The error of a synchronizer write: [`LockError::ReplicaSync`] when it ran but no replica
/// confirmed it, WRONGTYPE as [`LockError::WrongType`], else the Redis error.
pub(crate) fn write_error(
    kind: &'static str,
    name: &str,
    conn: &mut Conn,
    e: redis::RedisError,
) -> LockError {
    if is_connection_error(&e) {
        if let Some(s) = conn.take_shortfall() {
            return s.error(name);
        }
        return e.into();
    }
    from_script(kind, name, e)
}

/// Runs a script that is safe to repeat (it has a receipt, or only reads), retrying transient
/// failures up to `retry_attempts` times.
pub(crate) async fn run_repeatable<T: redis::FromRedisValue>(
    client: &Client,
    kind: &'static str,
    name: &str,
    inv: &Call,
) -> Result<T> {
    let mut retry = Retry::attempts(client.config()).op("write").kind(kind);
    loop {
        let mut conn = client.conn_synced();
        match inv.invoke_async::<T>(&mut conn).await {
            Ok(v) => return Ok(v),
            Err(e) if retry.again(&e).await => {}
            Err(e) => return Err(write_error(kind, name, &mut conn, e)),
        }
    }
}

/// Runs a script once (it is not safe to repeat blindly).
pub(crate) async fn run_once<T: redis::FromRedisValue>(
    client: &Client,
    kind: &'static str,
    name: &str,
    inv: &Call,
) -> Result<T> {
    let mut conn = client.conn_synced();
    inv.invoke_async::<T>(&mut conn)
        .await
        .map_err(|e| write_error(kind, name, &mut conn, e))
}
