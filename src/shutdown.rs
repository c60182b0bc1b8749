//! Graceful shutdown ([`Client::shutdown`](crate::Client::shutdown)): close the client to new
//! acquisitions, stop the watchdog, wake every local waiter (its next try fails with
//! [`LockError::ShutDown`]), then release every hold this client has, each under its owner's
//! gate, with the trim to zero (`lua/trim.lua`): it removes the owner's field whatever its
//! count, and publishes the kind's release message when that frees the lock, so waiters on
//! other clients (Java included) are woken at once rather than after the lease.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_util::future::join_all;

use crate::error::{from_script, LockError};
use crate::holds::Hold;
use crate::keys::{prefix_name, FAIR_QUEUE_PREFIX};
use crate::raw::read_timeout_prefix;
use crate::retry::Retry;
use crate::scripts::{self, Layout, Op, PesKeys};
use crate::shared::{ClientInner, HeldPermit};
use crate::time::epoch_ms;

/// What [`Client::shutdown`](crate::Client::shutdown) did: the holds it released and the ones
/// it could not (those expire with their lease: the watchdog no longer renews them).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Holds released: one per (lock, owner) that held it, however often it was re-entered.
    pub released: usize,
    /// Permit-expirable semaphore permits given back (taken through this client and not
    /// released yet; one whose lease had ended counts too).
    pub permits_released: usize,
    /// Holds and permits that could not be released, with why.
    pub unreleased: Vec<Unreleased>,
}

impl ShutdownReport {
    /// `true` when every hold was released.
    pub fn is_complete(&self) -> bool {
        self.unreleased.is_empty()
    }
}

/// A hold or permit [`Client::shutdown`](crate::Client::shutdown) could not release: a hold
/// stays in Redis until its lease runs out (at most the watchdog timeout for a watchdog hold,
/// since nothing renews it any more), a permit until its lease ends (never, without one).
#[derive(Debug)]
#[non_exhaustive]
pub struct Unreleased {
    /// The lock's or the permit-expirable semaphore's name.
    pub name: String,
    /// For a lock, the owner's hash field (`<client uuid>:<owner id>`, plus `:write` for a
    /// write lock); for a permit, its id (32 hex characters).
    pub holder: String,
    /// The holds this client knew it had there (re-entries count); 1 for a permit.
    pub holds: u32,
    /// Why the release failed (after the client's retries). After a connection error or a
    /// timeout the release may still have run (e.g. on a server that answers late).
    pub error: LockError,
}

/// What one hold's release came to.
enum Outcome {
    /// Nothing was held (a waiter's hold, or one already released).
    Idle,
    Released,
    Failed(Unreleased),
}

/// Shuts the client down (see `Client::shutdown`).
pub(crate) async fn run(client: &ClientInner) -> ShutdownReport {
    // Closed before any gate is taken: an acquire checks under its gate, so it either sees the
    // client closed or took its grant before this reaches its hold, and is released below.
    client.closed.store(true, Ordering::SeqCst);
    client.watchdog.abort();
    // Parked waiters try again now and fail with `ShutDown` (a fair waiter leaves its queue).
    client.pubsub.wake_all();
    let holds = client.holds.all();
    let permits: Vec<([u8; 16], HeldPermit)> = client
        .permits
        .iter()
        .map(|e| (*e.key(), e.value().clone()))
        .collect();
    let (outcomes, permit_outcomes) = futures_util::future::join(
        join_all(holds.iter().map(|h| release(client, h))),
        join_all(permits.iter().map(|(id, p)| give_back(client, *id, p))),
    )
    .await;
    let mut report = ShutdownReport::default();
    for outcome in permit_outcomes {
        match outcome {
            Ok(()) => report.permits_released += 1,
            Err(u) => {
                tracing::warn!(semaphore = %u.name, permit = %u.holder, error = %u.error, "shutdown could not release a permit");
                report.unreleased.push(u);
            }
        }
    }
    for outcome in outcomes {
        match outcome {
            Outcome::Idle => {}
            Outcome::Released => report.released += 1,
            Outcome::Failed(u) => {
                tracing::warn!(lock = %u.name, owner = %u.holder, error = %u.error, "shutdown could not release a hold; it expires with its lease");
                report.unreleased.push(u);
            }
        }
    }
    report
}

/// Releases every grant of one hold under its gate; its guards then report the hold lost.
async fn release(client: &ClientInner, hold: &Arc<Hold>) -> Outcome {
    let mut gate = hold.gate().await;
    let holds = gate.count();
    if holds == 0 && !gate.is_dirty() {
        return Outcome::Idle;
    }
    let call = trim_to_zero(client, hold);
    let mut conn = client.conn.clone();
    let mut retry = Retry::attempts(&client.config)
        .op("shutdown")
        .kind(hold.kind.name);
    let found = loop {
        // The trim to zero is idempotent: trying it again cannot release anyone else's hold.
        match call.invoke_async::<i64>(&mut conn).await {
            Ok(found) => break Ok(found),
            Err(e) => {
                let e = from_script(hold.kind.name, &hold.key, e);
                if !retry.again(&e).await {
                    break Err(e);
                }
            }
        }
    };
    match found {
        Ok(found) => {
            gate.settled();
            hold.lose_gated(&mut gate);
            match holds > 0 || found > 0 {
                true => Outcome::Released,
                false => Outcome::Idle,
            }
        }
        Err(error) => Outcome::Failed(Unreleased {
            name: hold.key.to_string(),
            holder: hold.field.to_string(),
            holds,
            error,
        }),
    }
}

/// Gives back a permit-expirable semaphore permit (retried like a release: releasing an id
/// that is gone changes nothing).
async fn give_back(client: &ClientInner, id: [u8; 16], p: &HeldPermit) -> Result<(), Unreleased> {
    let keys = PesKeys {
        name: &p.name,
        timeouts: &p.timeouts,
        channel: &p.channel,
        publish: client.publish,
    };
    let mut conn = client.conn.clone();
    let mut retry = Retry::attempts(&client.config)
        .op("shutdown")
        .kind("permit_semaphore");
    loop {
        let call = scripts::pes_release(&keys, &id, epoch_ms());
        match call.invoke_async::<i64>(&mut conn).await {
            Ok(_) => {
                client.permits.remove(&id);
                return Ok(());
            }
            Err(e) => {
                let e = from_script("permit_semaphore", &p.name, e);
                if !retry.again(&e).await {
                    return Err(Unreleased {
                        name: p.name.clone(),
                        holder: p.hex.clone(),
                        holds: 1,
                        error: e,
                    });
                }
            }
        }
    }
}

/// `lua/trim.lua` to zero for `hold`, built from what the hold remembers of its kind.
fn trim_to_zero(client: &ClientInner, hold: &Hold) -> scripts::Call {
    let kind = hold.kind;
    let channel = prefix_name(kind.channel_prefix, &hold.key);
    let extra = match kind.layout {
        Layout::Fair => Some(prefix_name(FAIR_QUEUE_PREFIX, &hold.key)),
        Layout::Read => Some(read_timeout_prefix(&hold.key, &hold.field)),
        Layout::Plain | Layout::Write => None,
    };
    let op = Op {
        key: &hold.key,
        channel: &channel,
        field: &hold.field,
        // Not used when trimming to zero (nothing remains to expire).
        lease_ms: 1,
        publish: if kind.publishes { client.publish } else { "" },
        now_ms: 0,
        wait_ms: 0,
    };
    scripts::trim(&op, extra.as_deref(), 0, kind.layout)
}
