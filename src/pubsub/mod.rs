//! Unlock-channel subscriptions: one subscriber connection per client, one refcounted entry per
//! channel, Notify semantics for waiters.
//!
//! # Implementation notes
//!
//! * A waiter gets an `Arc<Channel>` from [`PubSub::subscribe`]; the last `Arc` dropped queues an
//!   unsubscribe. All SUBSCRIBE/UNSUBSCRIBE traffic is issued by one task, which decides from the
//!   registry *at execution time* whether a channel is live. A quick unsubscribe/subscribe pair
//!   on one channel therefore can never leave a live waiter unsubscribed.
//! * Message `0` wakes one local waiter (`Notify::notify_one`, which stores a permit when nobody
//!   is parked yet, like Redisson's latch); `1` wakes every parked waiter. Waiters register
//!   (`Notified::enable`) *before* running the acquire script, so no message between the script
//!   and the wait is lost.
//! * When the subscriber connection breaks, the task reconnects with backoff, resubscribes every
//!   live channel and wakes every waiter, so none sleeps out a stale TTL.
//! * Standalone and Sentinel use a RESP2 subscriber connection (Sentinel asks for the current
//!   master on every reconnect). Redis Cluster uses a RESP3 cluster connection whose pushes
//!   carry the messages, with `SSUBSCRIBE` when pub/sub is sharded; a slot that moves away
//!   (`sunsubscribe` push) is resubscribed at its new owner on the same connection (`MOVED`
//!   followed: `subconn.rs`), and its channel's waiters try again once the new subscription is
//!   confirmed (not before: a release between their try and the subscription would go
//!   unheard); a node connection that is cut
//!   (`disconnection` push) replaces the whole subscriber connection, as a broken RESP2 one
//!   does (redis-rs's own resubscription of that node fails when its channels span slots).
//! * A channel the server's ACL refuses (`NOPERM` on `SUBSCRIBE`/`SSUBSCRIBE`) is not a broken
//!   connection: the channel is marked refused, its waiters get
//!   [`LockError::ChannelDenied`] at once, and nothing reconnects. The refusal lasts as long as
//!   the channel's entry (its waiters); a later waiter on a fresh entry asks the server again.
//!   A refusal on a resubscription (the ACL changed while the connection was down) wakes the
//!   waiters already parked on the channel, and they stop with the same error
//!   ([`Channel::refusal`]).

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::{mpsc, watch, Notify};

use crate::config::Config;
use crate::error::{LockError, Result};
use crate::retry::Retry;

#[cfg(test)]
mod schedules;
mod subconn;

pub(crate) use subconn::Source;
use subconn::{subscribe_checked, with_timeout, Event, SubConn};

/// Redisson's `READ_UNLOCK_MESSAGE`: wakes every waiter (`0` and anything else wakes one).
pub(crate) const WAKE_ALL: &[u8] = b"1";

/// How a message on a channel wakes that channel's local waiters. Fixed per channel when it is
/// first subscribed (a channel name belongs to one kind of object: its prefix says which).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Lock channels: `1` wakes every waiter, anything else one (`LockPubSub`).
    Lock,
    /// Semaphore channels: the message is a permit count `n`; it wakes up to `n` waiters
    /// (`SemaphorePubSub`), none when `n <= 0` or the payload is not a number.
    Permits,
    /// Count-down latch channels: every message wakes every waiter (they re-read the count;
    /// Redisson's zero message `0` opens the latch for all, `1` only closes it).
    All,
}

pub(crate) struct PubSub {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    channels: DashMap<String, Weak<Channel>>,
    commands: mpsc::UnboundedSender<String>,
    /// Bumped on every (re)connection; lets tests and diagnostics observe reconnects.
    connections: watch::Sender<u64>,
}

/// One subscribed channel, shared by every local waiter on it.
pub(crate) struct Channel {
    name: String,
    notify: Notify,
    wake: Wake,
    state: watch::Sender<SubState>,
    shared: Weak<Shared>,
}

/// Where a channel's subscription stands on the current connection.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SubState {
    /// Not (yet, or no longer after a disconnect) confirmed by the server.
    Pending,
    /// The server confirmed it.
    Confirmed,
    /// The server dropped it (a sharded channel's slot moved away): subscribed again; its
    /// parked waiters are woken once that is confirmed.
    Moved,
    /// The server's ACL refused it (`NOPERM`); the server's words. Final for this entry.
    Refused(Arc<str>),
}

impl Channel {
    /// The waiters' wake-up source.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }

    /// [`LockError::ChannelDenied`] once the server has refused this channel: also on a
    /// resubscription (after a reconnect, or a slot move) while waiters are parked on it. The
    /// refusal wakes them; a waiter checks this after registering for its wake-up and before
    /// each try, so it stops waiting instead of sleeping on a channel nobody subscribes.
    pub(crate) fn refusal(&self) -> Option<LockError> {
        match &*self.state.borrow() {
            SubState::Refused(detail) => Some(denied(&self.name, detail)),
            _ => None,
        }
    }
}

/// [`LockError::ChannelDenied`] for `channel`, with the server's words.
fn denied(channel: &str, detail: &str) -> LockError {
    LockError::ChannelDenied {
        channel: channel.to_owned(),
        detail: detail.to_owned(),
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // The last `Arc` is gone: a new waiter may look the name up before the entry goes.
        crate::sched::point();
        if let Some(shared) = self.shared.upgrade() {
            shared
                .channels
                .remove_if(&self.name, |_, w| w.strong_count() == 0);
            let _ = shared.commands.send(std::mem::take(&mut self.name));
        }
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").field("name", &self.name).finish()
    }
}

impl PubSub {
    /// Starts the subscriber task; it connects on the first subscription.
    pub(crate) fn start(source: Source, config: &Config) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            channels: DashMap::new(),
            commands: tx,
            connections: watch::channel(0).0,
        });
        let task = tokio::spawn(run(Arc::downgrade(&shared), source, rx, config.clone()));
        PubSub { shared, task }
    }

    /// Subscribes to `name` (or joins the existing subscription) and waits until the server has
    /// confirmed it, or refused it ([`LockError::ChannelDenied`]).
    pub(crate) async fn subscribe(&self, name: &str, timeout: Duration) -> Result<Arc<Channel>> {
        self.subscribe_with(name, timeout, Wake::Lock).await
    }

    /// [`PubSub::subscribe`] with the channel's wake policy (used when the channel is new).
    pub(crate) async fn subscribe_with(
        &self,
        name: &str,
        timeout: Duration,
        wake: Wake,
    ) -> Result<Arc<Channel>> {
        let channel = entry(&self.shared, name, wake);
        let mut state = channel.state.subscribe();
        let settled = state.wait_for(|s| matches!(s, SubState::Confirmed | SubState::Refused(_)));
        let settled = tokio::time::timeout(timeout, settled);
        match settled.await.ok().and_then(Result::ok).map(|s| s.clone()) {
            Some(SubState::Confirmed) => Ok(channel),
            Some(SubState::Refused(detail)) => Err(denied(name, &detail)),
            _ => Err(LockError::Timeout {
                what: "subscribing to the unlock channel",
                waited: timeout,
            }),
        }
    }

    /// The live entry of `name` when the server has confirmed its subscription: a waiter can
    /// register on it *before* its first try and so needs neither a subscription nor a second
    /// try (the fair lock's per-waiter channel, kept for a moment after the owner's last wait).
    pub(crate) fn confirmed(&self, name: &str) -> Option<Arc<Channel>> {
        live(&self.shared, name).filter(|c| *c.state.borrow() == SubState::Confirmed)
    }

    /// Wakes every local waiter on every channel (they try again at once).
    pub(crate) fn wake_all(&self) {
        wake_all(&self.shared);
    }

    /// How many connections the subscriber has opened so far.
    pub(crate) fn connections(&self) -> watch::Receiver<u64> {
        self.shared.connections.subscribe()
    }

    /// Number of channels with live local waiters.
    pub(crate) fn live_channels(&self) -> usize {
        self.shared
            .channels
            .iter()
            .filter(|e| e.value().strong_count() > 0)
            .count()
    }
}

/// The live entry of `name`, or a fresh one (its subscription queued) when there is none or
/// only a dying one (its last `Arc` gone, its `Drop` not yet run).
fn entry(shared: &Arc<Shared>, name: &str, wake: Wake) -> Arc<Channel> {
    crate::sched::point();
    let mut slot = shared.channels.entry(name.to_owned()).or_default();
    if let Some(c) = slot.upgrade() {
        return c;
    }
    let channel = Arc::new(Channel {
        name: name.to_owned(),
        notify: Notify::new(),
        wake,
        state: watch::channel(SubState::Pending).0,
        shared: Arc::downgrade(shared),
    });
    *slot = Arc::downgrade(&channel);
    drop(slot);
    let _ = shared.commands.send(name.to_owned());
    channel
}

impl Drop for PubSub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn live(shared: &Shared, name: &str) -> Option<Arc<Channel>> {
    let channel = shared.channels.get(name).and_then(|w| w.upgrade());
    crate::sched::point();
    channel
}

/// Sleeps the reconnect pause (the subscriber retries for as long as the client lives).
async fn backoff(retry: &mut Retry<'_>) {
    if let Some(pause) = retry.pause() {
        tokio::time::sleep(pause).await;
    }
}

/// The subscriber task: owns the connection, applies (un)subscriptions, dispatches messages.
async fn run(
    shared: Weak<Shared>,
    source: Source,
    mut commands: mpsc::UnboundedReceiver<String>,
    config: Config,
) {
    // Connect lazily: a client that never waits never opens a subscriber connection.
    if commands.recv().await.is_none() {
        return;
    }
    let mut retry = Retry::forever(&config).op("subscribe");
    let mut reconnect = false;
    loop {
        let mut conn = match SubConn::open(&source, &config).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "subscriber connection failed; retrying");
                backoff(&mut retry).await;
                if shared.strong_count() == 0 {
                    return;
                }
                continue;
            }
        };
        let Some(sh) = shared.upgrade() else { return };
        sh.connections.send_modify(|n| *n += 1);
        // Everything live right now is (re)subscribed; queued names are covered by this pass.
        let mut active: HashSet<String> = HashSet::new();
        while commands.try_recv().is_ok() {}
        let names: Vec<String> = sh
            .channels
            .iter()
            .filter(|e| e.value().strong_count() > 0)
            .map(|e| e.key().clone())
            .collect();
        if !names.is_empty() {
            if let Err(e) = apply(&sh, &mut conn, &mut active, names, &config).await {
                // Back off here too: a server that accepts connections but fails the
                // subscription must not be hammered. (An ACL refusal is not a failure: `apply`
                // hands it to the channel's waiters.)
                tracing::debug!(error = %e, "resubscribe failed; reconnecting");
                drop(sh);
                backoff(&mut retry).await;
                continue;
            }
        }
        retry.reset();
        // After a reconnect every waiter retries at once: a release may have been missed. (On
        // the first connection nobody can have missed one: waiters try again once subscribed.)
        if reconnect {
            crate::observe::subscriber_reconnected();
            wake_all(&sh);
        }
        reconnect = true;
        drop(sh);

        if serve(&shared, &mut conn, &mut active, &mut commands, &config).await
            == Served::ClientGone
        {
            return;
        }
        // Disconnected: waiters keep their TTL-bounded waits; new subscribers wait for the
        // reconnect (bounded by the subscription timeout).
        if let Some(sh) = shared.upgrade() {
            for c in &upgraded(&sh) {
                c.state.send_if_modified(|s| {
                    let was = *s == SubState::Confirmed;
                    if was {
                        *s = SubState::Pending;
                    }
                    was
                });
            }
        }
    }
}

#[derive(PartialEq, Eq)]
enum Served {
    /// The connection closed or a (un)subscribe failed: reconnect.
    Disconnected,
    /// The client is gone: stop.
    ClientGone,
}

/// Serves one subscriber connection: delivers messages to waiters and applies (un)subscribe
/// requests, until the connection fails or the client is dropped.
async fn serve(
    shared: &Weak<Shared>,
    conn: &mut SubConn,
    active: &mut HashSet<String>,
    commands: &mut mpsc::UnboundedReceiver<String>,
    config: &Config,
) -> Served {
    loop {
        tokio::select! {
            event = conn.next() => {
                let Some(sh) = shared.upgrade() else { return Served::ClientGone };
                if !deliver(&sh, active, event) {
                    return Served::Disconnected;
                }
            }
            name = commands.recv() => {
                let Some(name) = name else { return Served::ClientGone };
                let mut names = vec![name];
                while let Ok(n) = commands.try_recv() {
                    names.push(n);
                }
                let Some(sh) = shared.upgrade() else { return Served::ClientGone };
                if let Err(e) = apply(&sh, conn, active, names, config).await {
                    tracing::debug!(error = %e, "subscribe failed; reconnecting");
                    return Served::Disconnected;
                }
            }
        }
    }
}

/// Hands one event of the subscriber connection to the waiters; `false` when it closed.
fn deliver(sh: &Shared, active: &mut HashSet<String>, event: Event) -> bool {
    match event {
        Event::Message(channel, payload) => {
            if let Some(c) = live(sh, &channel) {
                wake(&c, &payload);
            }
        }
        Event::Dropped(channel) => {
            // The slot moved: subscribe again (at its new owner). The waiters try again once
            // that is confirmed (`subscribed`): woken now, a try could meet the lock still held
            // and its release then land before the new subscription, unheard.
            active.remove(&channel);
            if let Some(c) = live(sh, &channel) {
                c.state.send_if_modified(|s| {
                    let was = *s == SubState::Confirmed;
                    if was {
                        *s = SubState::Moved;
                    }
                    was
                });
                let _ = sh.commands.send(channel);
            }
        }
        // redis-rs (1.8) repairs a cut node connection by itself, but resubscribes it with one
        // `SSUBSCRIBE` of every shard channel the node serves: `CROSSSLOT` as soon as they span
        // two slots, and the subscriptions are silently gone (waiters then sleep until their
        // TTL). So a lost node ends this connection like a closed one: the reconnect opens a
        // new one, subscribes every live channel one per command and wakes every waiter.
        Event::NodeLost | Event::Closed => return false,
        Event::Ignore => {}
    }
    true
}

/// Wakes `c`'s waiters for one message, by the channel's policy.
fn wake(c: &Arc<Channel>, payload: &[u8]) {
    match (c.wake, payload) {
        (Wake::Lock, WAKE_ALL) | (Wake::All, _) => c.notify.notify_waiters(),
        // `0`, or any other value: one.
        (Wake::Lock, _) => c.notify.notify_one(),
        (Wake::Permits, _) => {
            let permits = std::str::from_utf8(payload)
                .ok()
                .and_then(|p| p.trim().parse::<i64>().ok())
                .unwrap_or(0);
            // Every local waiter holds an `Arc` of the channel, so the strong count bounds them
            // (the dispatcher's own clone included): never more wake-ups than waiters, and a
            // surplus wake-up only costs one extra try (`notify_one` stores one permit at most).
            let waiters = Arc::strong_count(c).saturating_sub(1) as i64;
            for _ in 0..permits.min(waiters).max(0) {
                c.notify.notify_one();
            }
        }
    }
}

fn wake_all(shared: &Shared) {
    for c in &upgraded(shared) {
        c.notify.notify_waiters();
    }
}

/// Every live channel, collected to be used outside the map: the last reference to a channel
/// may be ours (its waiter gone meanwhile), and dropping it runs `Channel::drop`, which removes
/// the entry from this map; under the iterator's shard lock that would deadlock.
fn upgraded(shared: &Shared) -> Vec<Arc<Channel>> {
    (shared.channels.iter())
        .filter_map(|e| e.value().upgrade())
        .collect()
}

/// Brings the connection's subscriptions in line with the registry for `names`. A channel the
/// server's ACL refuses is marked refused (its waiters get the error); only a broken connection
/// is an `Err`.
async fn apply(
    shared: &Shared,
    conn: &mut SubConn,
    active: &mut HashSet<String>,
    names: Vec<String>,
    config: &Config,
) -> redis::RedisResult<()> {
    let (subscribe, unsubscribe) = plan(shared, active, names);
    let timeout = config.response_timeout();
    if !unsubscribe.is_empty() {
        with_timeout(timeout, conn.unsubscribe(&unsubscribe)).await?;
        for n in &unsubscribe {
            active.remove(n);
        }
    }
    if !subscribe.is_empty() {
        let refused = subscribe_checked(conn, &subscribe, timeout).await?;
        subscribed(shared, active, subscribe, &refused);
    }
    Ok(())
}

/// Which of `names` to subscribe and to unsubscribe, decided from the registry *now* (not from
/// which command queued the name): live and not subscribed yet (and not refused for this entry):
/// subscribe; subscribed and no longer live: unsubscribe; live and subscribed: confirmed at once.
fn plan(
    shared: &Shared,
    active: &HashSet<String>,
    mut names: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    names.sort_unstable();
    names.dedup();
    let (mut subscribe, mut unsubscribe) = (Vec::new(), Vec::new());
    for name in names {
        let channel = live(shared, &name);
        let refused = channel
            .as_ref()
            .is_some_and(|c| matches!(*c.state.borrow(), SubState::Refused(_)));
        match (channel.is_some(), active.contains(&name)) {
            // Refused for this entry's lifetime: not asked again.
            (true, false) if refused => {}
            (true, false) => subscribe.push(name),
            (false, true) => unsubscribe.push(name),
            (true, true) => {
                if let Some(c) = channel {
                    c.state.send_replace(SubState::Confirmed);
                }
            }
            (false, false) => {}
        }
    }
    (subscribe, unsubscribe)
}

/// Books the outcome of subscribing to `subscribe`: the refused channels' waiters get the
/// refusal, the others are confirmed and now subscribed (`active`).
fn subscribed(
    shared: &Shared,
    active: &mut HashSet<String>,
    subscribe: Vec<String>,
    refused: &[(String, redis::RedisError)],
) {
    for n in subscribe {
        let refusal = refused.iter().find(|(r, _)| *r == n).map(|(_, e)| e);
        let c = live(shared, &n);
        match refusal {
            Some(e) => {
                tracing::warn!(channel = %n, error = %e, "the server refused the subscription");
                if let Some(c) = c {
                    // The server's words, as it sent them (`NOPERM ...`).
                    let words = match (e.code(), e.detail()) {
                        (Some(code), Some(detail)) => format!("{code} {detail}"),
                        _ => e.to_string(),
                    };
                    c.state.send_replace(SubState::Refused(words.into()));
                    // Waiters already parked on it (a resubscription) must hear of it.
                    c.notify.notify_waiters();
                }
            }
            None => {
                if let Some(c) = c {
                    // Resubscribed after its slot moved: the waiters parked meanwhile try again.
                    if c.state.send_replace(SubState::Confirmed) == SubState::Moved {
                        c.notify.notify_waiters();
                    }
                }
                active.insert(n);
            }
        }
    }
}
