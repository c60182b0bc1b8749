//! The one wait loop of the locks (`lock/engine/`) and the synchronizers (`sync::wait_for`):
//! subscribe to the object's channel, then loop: register for a wake-up *before* trying, try,
//! sleep until a message, the try's own bound (a holder's TTL, a re-check, the spin lock's
//! backoff) or the deadline. A message published between the try and the sleep is therefore
//! never lost; pub/sub can drop messages, so the try's answer is the truth. The spin lock waits
//! without a channel: its tries are paced by their bounds alone.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::Result;
use crate::observe::Parked;
use crate::pubsub::Channel;
use crate::retry::Retry;
use crate::time::remaining;

/// What one try of a waiting operation found.
pub(crate) enum Step<T> {
    /// Done: the value to return.
    Done(T),
    /// Not yet; try again after a message, or at the latest after this long (`None`: a message
    /// or the deadline only).
    Wait(Option<Duration>),
}

/// Subscribes by `subscribe` (given the subscription timeout, never past `deadline`).
/// `Ok(None)`: the deadline passed first.
pub(crate) async fn subscribe<Fut>(
    config: &Config,
    deadline: Option<Instant>,
    subscribe: impl FnOnce(Duration) -> Fut,
) -> Result<Option<Arc<Channel>>>
where
    Fut: Future<Output = Result<Arc<Channel>>>,
{
    let Some(left) = remaining(deadline) else {
        return Ok(None);
    };
    let timeout = config.subscription_timeout().min(left);
    match Box::pin(subscribe(timeout)).await {
        Ok(c) => Ok(Some(c)),
        Err(e) if e.is_timeout() && remaining(deadline).is_none() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Runs `attempt` on a subscribed `channel` (`None`: no messages, the tries' bounds pace them)
/// until it is done or `deadline` passes (`Ok(None)`); `open` is checked before each try
/// (`Client::shutdown` wakes every waiter). Transient failures are tried again by `retry`'s
/// policy; a parked waiter counts in the `kind`'s waiters gauge.
pub(crate) async fn wait_on<T, F, Fut>(
    kind: &'static str,
    name: &str,
    channel: Option<&Channel>,
    deadline: Option<Instant>,
    mut retry: Retry<'_>,
    open: impl Fn() -> Result<()>,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
{
    let _parked = Parked::new(kind);
    loop {
        // Register for wake-ups *before* trying, so a message in between is not missed.
        let mut notified = std::pin::pin!(channel.map(|c| c.notify().notified()));
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        open()?;
        // Refused on a resubscription: no message can come (checked after registering, as
        // the refusal wakes the registered waiters).
        if let Some(e) = channel.and_then(Channel::refusal) {
            return Err(e);
        }
        let pause = match attempt().await {
            Ok(Step::Done(v)) => return Ok(Some(v)),
            Ok(Step::Wait(bound)) => {
                retry.reset();
                bound
            }
            Err(e) => match retry.pause_after(&e) {
                Some(p) => {
                    tracing::debug!(name, kind, error = %e, "try failed; retrying");
                    Some(p)
                }
                None => return Err(e),
            },
        };
        let Some(left) = remaining(deadline) else {
            return Ok(None);
        };
        // No bound and no deadline: a message only.
        match (pause.or(deadline.map(|_| left)), notified.as_pin_mut()) {
            (Some(p), Some(n)) => {
                let _ = tokio::time::timeout(p.min(left), n).await;
            }
            (Some(p), None) => tokio::time::sleep(p.min(left)).await,
            (None, Some(n)) => n.await,
            (None, None) => std::future::pending().await,
        }
        tracing::trace!(name, kind, "waiter woke");
    }
}
