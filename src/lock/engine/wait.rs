//! The engine's waiting, while the lock is held: the kind's wait (pub/sub through the shared
//! loop of `crate::wait`, or the spin kind's backoff), and the fair lock's lingering
//! per-waiter channel.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Attempt, Engine, Granted, Try};
use crate::error::Result;
use crate::pubsub::Channel;
use crate::raw::{Delays, KindExt, LockKind};
use crate::time::remaining;
use crate::wait::{self, Step};

impl<K: LockKind> Engine<K> {
    /// The owner's per-waiter channel when a wait of it ended moments ago with a grant and the
    /// channel is still subscribed ([`LINGER`]); only for an acquire that may wait.
    pub(super) fn lingering(
        &self,
        try_: &Try<'_>,
        deadline: Option<Instant>,
    ) -> Option<Arc<Channel>> {
        if !K::SPEC.per_waiter_channel
            || !try_.enqueue
            || self.kind.backoff().is_some()
            || remaining(deadline).is_none()
        {
            return None;
        }
        let wait_channel = self.kind.wait_channel(&self.channel, &try_.hold.field);
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
    pub(super) async fn wait(
        self: &Arc<Self>,
        try_: &Try<'_>,
        deadline: Option<Instant>,
    ) -> Result<Option<Granted>> {
        // A waiting writer holds this client's new readers back until it ends.
        let _waits = self.writer_waits();
        let client = self.client();
        let wait_channel = self.kind.wait_channel(&self.channel, &try_.hold.field);
        let subscribed = wait::subscribe(client.config(), deadline, |timeout| {
            client.pubsub().subscribe(&wait_channel, timeout)
        });
        let Some(channel) = subscribed.await? else {
            return Ok(None);
        };
        tracing::trace!(lock = %self.name(), "waiter subscribed");
        self.wait_on(try_, deadline, channel).await
    }

    /// The wait loop ([`wait::wait_on`]) on a subscribed `channel`: until taken or `deadline`;
    /// a negative TTL (no expiry) waits for a message only. A per-waiter channel outlives a
    /// wait that ended with a grant by [`LINGER`], so the owner's next wait finds it subscribed.
    pub(super) async fn wait_on(
        self: &Arc<Self>,
        try_: &Try<'_>,
        deadline: Option<Instant>,
        channel: Arc<Channel>,
    ) -> Result<Option<Granted>> {
        let bound = |ttl_ms: i64| (ttl_ms >= 0).then(|| Duration::from_millis(ttl_ms as u64));
        // The loop's first try follows the subscription, not a release message.
        let first = std::sync::atomic::AtomicBool::new(true);
        let step = || self.step(try_, first.swap(false, Relaxed), bound);
        let (retry, open) = (self.retry(), || Ok(()));
        let taken = wait::wait_on(
            K::SPEC.name,
            self.name(),
            Some(&channel),
            deadline,
            retry,
            open,
            step,
        );
        let taken = taken.await?;
        if taken.is_some() && K::SPEC.per_waiter_channel {
            tokio::spawn(async move {
                tokio::time::sleep(LINGER).await;
                drop(channel);
            });
        }
        Ok(taken)
    }

    /// The spin lock's wait, on the same loop without a channel: the next backoff delay (never
    /// past the deadline) before each try, until taken or `deadline`.
    pub(super) async fn spin(
        self: &Arc<Self>,
        try_: &Try<'_>,
        deadline: Option<Instant>,
        delays: Delays,
    ) -> Result<Option<Granted>> {
        let (mut delays, mut first) = (delays, true);
        let step = move || {
            let pause = Some(delays.next().unwrap_or_default());
            // The first try was made already (`Engine::take`): the loop's first only pauses.
            let tried_already = std::mem::take(&mut first);
            async move {
                if tried_already {
                    return Ok(Step::Wait(pause));
                }
                self.step(try_, false, |_| pause).await
            }
        };
        let (retry, open) = (self.retry(), || Ok(()));
        wait::wait_on(K::SPEC.name, self.name(), None, deadline, retry, open, step).await
    }

    /// One try of the loop (`first`: no release message woke it, see [`Engine::attempt`]); a
    /// held lock waits `bound(its TTL)` at most.
    async fn step(
        self: &Arc<Self>,
        try_: &Try<'_>,
        first: bool,
        bound: impl Fn(i64) -> Option<Duration>,
    ) -> Result<Step<Granted>> {
        Ok(match Box::pin(self.attempt(try_, first)).await? {
            Attempt::Taken(guard) => Step::Done(guard),
            Attempt::Held { ttl_ms } => Step::Wait(bound(ttl_ms)),
        })
    }
}

/// How long a per-waiter channel (fair lock) stays subscribed after a wait that ended with a
/// grant: an owner that waits again within it skips the `SUBSCRIBE`/`UNSUBSCRIBE` pair and the
/// second try after subscribing (issue 24 item 3). Only this owner's queue turn is published
/// there, so the lingering subscription receives nothing meanwhile.
pub(crate) const LINGER: Duration = Duration::from_secs(1);
