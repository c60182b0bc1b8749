//! Group commit: the lock scripts that several tasks of one client have ready at the same
//! moment go to Redis as **one** script call (`lua/batch.lua`), which runs each of them exactly
//! as its own script would and returns every reply in order.
//!
//! No timer, and no waiting while the server keeps up: an operation goes out at once as its own
//! `EVALSHA` while fewer than [`MAX_DIRECT`] lone operations are out (so an idle or lightly
//! loaded client adds no latency and sends exactly what it would without batching). Beyond
//! that the server is the bottleneck, and operations queue; the queue leaves when any
//! operation lands, on one of [`MAX_IN_FLIGHT`] flights: as one batch script when it holds at
//! least [`BATCH_MIN`] operations, or else as that many `EVALSHA`s written back to back,
//! since a batch that small costs the server more than it saves. Operations on one lock key
//! never overtake each other: one whose key is in a flight out waits for it, so they run in
//! the order they were sent, as on a plain connection. The batching sits
//! under [`Conn`]'s `ConnectionLike`, so every caller keeps its own reply, its own error
//! handling (a connection error is an unknown outcome for every operation of the batch, as it
//! would be for each alone) and its own replica sync (`WAIT` follows the batch when any
//! operation asked for it; a [`Shortfall`] fails only those that did).
//!
//! On a cluster a batch holds operations of one hash slot (their keys share a slot by
//! construction), so it is routed like any one of them; without replica sync, a flight's batch
//! scripts and lone scripts leave with one pipeline per master (`conn/cluster_route.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};
use tokio::sync::oneshot;

use super::cluster_route::Router;
use super::{protocol_error, Conn, Shortfall};
use crate::scripts::{self, Call};

/// Lone operations one connection may have out before further operations queue: below it, a
/// client is not yet the server's bottleneck and an operation gains nothing by waiting (at 16
/// tasks a queue behind fewer flights cost a fifth of the throughput; `benches/results/HISTORY.md`,
/// "Group commit that never loses").
pub(crate) const MAX_DIRECT: usize = 16;

/// Flights of queued operations (batches, or a few scripts pipelined) one connection may have
/// out; the queue leaves when one lands (or a lone operation does).
pub(crate) const MAX_IN_FLIGHT: usize = 4;

/// The fewest queued operations that leave as one batch script. Fewer leave as separate script
/// calls, all at once (pipelined on the one connection): a batch of two or three costs the
/// server more than the same scripts alone (the batch call's own cost, and per operation the
/// dispatch, `pcall` and the reply), so a batch is used only where it pays
/// (`benches/results/HISTORY.md`, "Group commit that never loses").
pub(crate) const BATCH_MIN: usize = 8;

/// A reply, or the error with the replica shortfall that caused it (if any).
pub(super) type Outcome = Result<Value, (RedisError, Option<Shortfall>)>;

/// The group-commit queue of one client's command connection.
pub(crate) struct Batcher {
    state: Mutex<State>,
    /// The same connection without batching (batches and lone operations go through it).
    conn: Conn,
    /// The cluster's router (`None` off a cluster): a flight without sync leaves by master.
    router: Option<Arc<Router>>,
    runtime: tokio::runtime::Handle,
    batches: AtomicU64,
    batched_ops: AtomicU64,
}

#[derive(Default)]
struct State {
    queue: Vec<Queued>,
    /// Lone operations out, at most [`MAX_DIRECT`].
    direct: usize,
    /// Flights of queued operations out, at most [`MAX_IN_FLIGHT`].
    flights: usize,
    /// The lock keys of the operations in batches out (taken from the queue, not finished),
    /// with counts. An operation on one of them waits until that batch is done, so the
    /// operations on one key run in the order they were sent, as on a plain connection (e.g.
    /// the trim that settles a cancelled acquire never runs before that acquire).
    out: HashMap<Vec<u8>, usize>,
}

/// A batch [`take_ready`] took: its operations, in queue order, and their lock keys (booked in
/// [`State::out`]).
type Ready = (Vec<Queued>, Vec<Vec<u8>>);

/// The state transitions, each made under the [`Batcher`]'s lock (`conn/batch/schedules.rs`
/// explores their interleavings).
impl State {
    /// [`Batcher::enter`]'s choice: takes a lone slot for an operation on `key` when it may go
    /// alone ([`goes_direct`]); otherwise the caller queues it.
    fn take_direct(&mut self, key: &[u8]) -> bool {
        let direct = goes_direct(self, key);
        if direct {
            self.direct += 1;
        }
        direct
    }

    /// A lone operation landed: its slot is free, and the queue may leave.
    fn landed(&mut self) -> Option<Ready> {
        self.direct -= 1;
        take_ready(self)
    }

    /// A batch ended: its keys are free, its flight too, and the queue may leave on it.
    fn batch_done(&mut self, keys: Vec<Vec<u8>>) -> Option<Ready> {
        for key in keys {
            if let Some(n) = self.out.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.out.remove(&key);
                }
            }
        }
        self.flights -= 1;
        take_ready(self)
    }
}

/// One queued operation: its own call (sent as it is when it travels alone), whose keys and
/// arguments a batch copies straight from it, and its function in the batch script.
struct Queued {
    index: u8,
    call: Call,
    synced: bool,
    tx: oneshot::Sender<Outcome>,
}

/// How an operation goes.
pub(super) enum Entry {
    /// A lone slot was free: the caller sends its command itself and holds the slot meanwhile.
    Direct(Flight),
    /// Queued into the next batch: its reply arrives here.
    Queued(oneshot::Receiver<Outcome>),
}

/// One of the connection's [`MAX_DIRECT`] slots of lone operations; released on drop (and the
/// queue sent if it waited for it), so a caller dropped mid-flight never strands the queue.
pub(super) struct Flight(Arc<Batcher>);

impl Drop for Flight {
    fn drop(&mut self) {
        self.0.landed();
    }
}

/// A batch out, with its operations' lock keys; when it ends (however), they are free again
/// and the queue moves on.
struct BatchOut(Arc<Batcher>, Vec<Vec<u8>>);

impl Drop for BatchOut {
    fn drop(&mut self) {
        self.0.batch_done(std::mem::take(&mut self.1));
    }
}

impl Batcher {
    /// A batcher over `conn` (which must not batch itself) and, on a cluster, its `router`.
    /// Needs a tokio runtime.
    pub(super) fn new(conn: Conn, router: Option<Arc<Router>>) -> Arc<Batcher> {
        Arc::new(Batcher {
            state: Mutex::new(State::default()),
            router,
            conn,
            runtime: tokio::runtime::Handle::current(),
            batches: AtomicU64::new(0),
            batched_ops: AtomicU64::new(0),
        })
    }

    /// Batches sent so far, and the operations they carried.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.batches.load(Ordering::Relaxed),
            self.batched_ops.load(Ordering::Relaxed),
        )
    }

    /// Operations queued now, waiting for a flight.
    pub(crate) fn queued(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Takes a free lone slot, or queues `call` (whose function in the batch script is
    /// `index`).
    pub(super) fn enter(self: &Arc<Self>, call: &Call, index: u8, synced: bool) -> Entry {
        let mut state = self.state.lock();
        if state.take_direct(call.lock_key()) {
            return Entry::Direct(Flight(self.clone()));
        }
        let (tx, rx) = oneshot::channel();
        let call = call.duplicate();
        state.queue.push(Queued {
            index,
            call,
            synced,
            tx,
        });
        Entry::Queued(rx)
    }

    /// A lone operation landed: the queue may leave.
    fn landed(self: &Arc<Self>) {
        let next = self.state.lock().landed();
        self.start(next);
    }

    /// A batch ended: its keys are free, and the queue may leave on its flight.
    fn batch_done(self: &Arc<Self>, keys: Vec<Vec<u8>>) {
        let next = self.state.lock().batch_done(keys);
        // Outside the lock: a task spawned on a runtime shutting down is dropped at once,
        // and its `BatchOut` comes back here.
        self.start(next);
    }

    /// Sends a batch [`take_ready`] took (one script call per hash slot, in parallel).
    fn start(self: &Arc<Self>, next: Option<Ready>) {
        let Some((queued, keys)) = next else { return };
        let out = BatchOut(self.clone(), keys);
        let this = self.clone();
        // On a runtime that is shutting down the task is dropped unrun: the queued senders
        // drop with it (their callers see the connection closed) and the batch ends.
        self.runtime.spawn(async move {
            let out = Arc::new(out);
            let (mut batches, alone) = this.group(queued);
            let synced = batches.iter().flatten().chain(&alone).any(|q| q.synced);
            if let (Some(router), false) = (this.router.clone(), synced) {
                this.send_by_node(&router, batches, alone).await;
                drop(out);
                return;
            }
            // The last piece of work runs in this task: a spawn per batch costs a task
            // switch (and often a hand-over to the other worker) on every flight.
            let inline = if alone.is_empty() {
                batches.pop()
            } else {
                None
            };
            for group in batches {
                let (this, out) = (this.clone(), out.clone());
                this.runtime.clone().spawn(async move {
                    this.send(group).await;
                    drop(out);
                });
            }
            match inline {
                Some(group) => this.send(group).await,
                None => this.send_each(alone).await,
            }
        });
    }

    /// Splits a queue by hash slot on a cluster (one group in all otherwise), keeping the
    /// queue's order within each: a group of at least [`BATCH_MIN`] operations, or with two on
    /// one key, is a batch; the operations of the other groups go each as its own script call
    /// (returned together: on a cluster, many slots with one queued operation each).
    /// Operations whose caller is already gone are left out: they never run, which their
    /// callers' clean-up (a trim to the known count) treats like any unknown outcome.
    fn group(&self, queued: Vec<Queued>) -> (Vec<Vec<Queued>>, Vec<Queued>) {
        split(queued, self.router.is_some())
    }

    /// Sends operations each as its own script call, at once and in order (no two on one key:
    /// those go in a batch script, which keeps their order on every topology). On one server
    /// and without replica sync they travel as one pipeline (one request to redis-rs, one reply
    /// each: a server error is that operation's own); on a cluster (their slots differ) or with
    /// sync (each followed by its `WAIT`), each is sent as it would be alone.
    async fn send_each(&self, mut group: Vec<Queued>) {
        if group.is_empty() {
            return;
        }
        let mut conn = self.conn.clone();
        if group.len() > 1 && self.router.is_none() && group.iter().all(|q| !q.synced) {
            let mut pipe = redis::pipe();
            // Moved, not copied: only each operation's reply sender is used after this.
            for q in &mut group {
                pipe.add_command(q.call.take_cmd());
            }
            match conn.raw_pipeline(&pipe, 0, group.len(), None).await {
                Ok(replies) if replies.len() == group.len() => {
                    for (q, reply) in group.into_iter().zip(replies) {
                        let _ = q.tx.send(match reply {
                            Value::ServerError(e) => Err((RedisError::from(e), None)),
                            v => Ok(v),
                        });
                    }
                }
                Ok(replies) => {
                    tracing::warn!(
                        replies = replies.len(),
                        ops = group.len(),
                        "a pipeline reply of the wrong length"
                    );
                    let e = protocol_error("a pipeline reply of the wrong length");
                    for q in group {
                        let _ = q.tx.send(Err((e.clone(), None)));
                    }
                }
                Err(e) => {
                    for q in group {
                        let _ = q.tx.send(Err((e.clone(), None)));
                    }
                }
            }
            return;
        }
        let sends = group.into_iter().map(|q| {
            let mut conn = self.conn.clone();
            async move {
                let reply = conn.send_parts(q.call.cmd(), q.call.slot(), q.synced).await;
                let shortfall = conn.shortfall.take();
                let _ = q.tx.send(match reply {
                    Ok((v, Ok(()))) => Ok(v),
                    Ok((_, Err(e))) | Err(e) => Err((e, shortfall)),
                });
            }
        });
        futures_util::future::join_all(sends).await;
    }

    /// Sends one batch and hands each operation its reply. The batch is followed by `WAIT`
    /// when any of its operations asked for replica sync; a shortfall fails only those.
    async fn send(&self, group: Vec<Queued>) {
        let mut conn = self.conn.clone();
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.batched_ops
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        let synced = group.iter().any(|q| q.synced);
        let (cmd, slot) = (batch_cmd(&group), group[0].call.slot());
        let mut reply = server_error(conn.send_parts(&cmd, slot, synced).await);
        if matches!(&reply, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)) {
            // Not run: load the batch script (after SCRIPT FLUSH or a restart) and send again.
            reply = match conn.load_script(&scripts::BATCH, slot).await {
                Ok(()) => server_error(conn.send_parts(&cmd, slot, synced).await),
                Err(e) => Err(e),
            };
        }
        let shortfall = conn.shortfall.take();
        deliver(group, reply, shortfall);
    }

    /// On a cluster without replica sync: the batch scripts of `batches` and the operations of
    /// `alone` leave with one pipeline per master (`cluster_route`), whatever their slots.
    async fn send_by_node(
        &self,
        router: &Arc<Router>,
        batches: Vec<Vec<Queued>>,
        mut alone: Vec<Queued>,
    ) {
        let mut conn = self.conn.clone();
        conn.name_if_due().await;
        let mut cmds = Vec::with_capacity(batches.len() + alone.len());
        for group in &batches {
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.batched_ops
                .fetch_add(group.len() as u64, Ordering::Relaxed);
            cmds.push((group[0].call.slot().unwrap_or(0), batch_cmd(group)));
        }
        for q in &mut alone {
            // Moved, not copied: only each operation's reply sender is used after this.
            cmds.push((q.call.slot().unwrap_or(0), q.call.take_cmd()));
        }
        let replies = router.send_by_node(&cmds).await;
        for r in &replies {
            conn.naming.after(r);
        }
        let mut replies = replies.into_iter();
        for group in batches {
            let reply = replies
                .next()
                .unwrap_or_else(|| Err(protocol_error("a pipeline reply of the wrong length")));
            match reply {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    // Not run: load the batch script on that master and send again.
                    self.send(group).await;
                }
                r => deliver(group, r.map(|v| (v, Ok(()))), None),
            }
        }
        for q in alone {
            let reply = replies
                .next()
                .unwrap_or_else(|| Err(protocol_error("a pipeline reply of the wrong length")));
            let _ = q.tx.send(reply.map_err(|e| (e, None)));
        }
    }
}

/// Hands each operation of a batch its reply (or the batch's error); a replica shortfall fails
/// only the operations that asked for sync.
fn deliver(
    group: Vec<Queued>,
    reply: RedisResult<(Value, RedisResult<()>)>,
    shortfall: Option<Shortfall>,
) {
    match reply {
        Ok((Value::Array(replies), verdict)) if replies.len() == group.len() => {
            for (q, reply) in group.into_iter().zip(replies) {
                let out = match (reply, &verdict) {
                    (Value::ServerError(e), _) => Err((RedisError::from(e), None)),
                    (_, Err(e)) if q.synced => Err((e.clone(), shortfall.clone())),
                    (v, _) => Ok(v),
                };
                let _ = q.tx.send(out);
            }
        }
        Ok((other, _)) => {
            tracing::warn!(reply = ?other, ops = group.len(), "a batch reply of the wrong shape");
            let e = protocol_error("a batch reply of the wrong shape");
            for q in group {
                let _ = q.tx.send(Err((e.clone(), None)));
            }
        }
        Err(e) => {
            for q in group {
                let _ = q.tx.send(Err((e.clone(), shortfall.clone())));
            }
        }
    }
}

/// [`Batcher::group`]: by slot when `cluster`.
#[allow(clippy::type_complexity)]
fn split(queued: Vec<Queued>, cluster: bool) -> (Vec<Vec<Queued>>, Vec<Queued>) {
    let mut groups: Vec<Vec<Queued>> = Vec::new();
    let mut index: HashMap<Option<u16>, usize> = HashMap::new();
    for q in queued.into_iter().filter(|q| !q.tx.is_closed()) {
        let slot = q.call.slot().filter(|_| cluster);
        match index.get(&slot) {
            Some(&i) => groups[i].push(q),
            None => {
                index.insert(slot, groups.len());
                groups.push(vec![q]);
            }
        }
    }
    let (mut batches, mut alone) = (Vec::new(), Vec::new());
    for group in groups {
        if group.len() >= BATCH_MIN || !distinct_keys(&group) {
            batches.push(group);
        } else {
            alone.extend(group);
        }
    }
    (batches, alone)
}

/// Whether no two operations of `group` are on the same lock key.
fn distinct_keys(group: &[Queued]) -> bool {
    group.iter().enumerate().all(|(i, q)| {
        group[..i]
            .iter()
            .all(|p| p.call.lock_key() != q.call.lock_key())
    })
}

/// A server error in place of the batch's reply (e.g. `NOSCRIPT`) is the batch's error.
fn server_error(
    reply: RedisResult<(Value, RedisResult<()>)>,
) -> RedisResult<(Value, RedisResult<()>)> {
    match reply {
        Ok((Value::ServerError(e), _)) => Err(e.into()),
        r => r,
    }
}

/// `EVALSHA <batch> numkeys keys... n (header args...)...` for `group`, each header the three
/// bytes `[index, nkeys, nargs]` (`Call::batch` admits only counts that fit a byte).
fn batch_cmd(group: &[Queued]) -> Cmd {
    let nkeys: usize = group.iter().map(|q| q.call.keys().count()).sum();
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(scripts::BATCH.get_hash()).arg(nkeys);
    for q in group {
        q.call.keys().for_each(|k| _ = cmd.arg(k));
    }
    cmd.arg(group.len());
    for q in group {
        let byte = |n: usize| u8::try_from(n).unwrap_or(u8::MAX);
        let (keys, args) = (q.call.keys().count(), q.call.args().count());
        cmd.arg(&[q.index, byte(keys), byte(args)][..]);
        q.call.args().for_each(|a| _ = cmd.arg(a));
    }
    cmd
}

/// Whether an operation on `key` may go out alone now: a lone slot is free, nothing is queued
/// (queued operations leave first), and no batch out carries an operation on the same key
/// (it would overtake it: the trim settling a cancelled acquire must not run before it).
fn goes_direct(state: &State, key: &[u8]) -> bool {
    state.direct < MAX_DIRECT && state.queue.is_empty() && !state.out.contains_key(key)
}

/// Takes, when a flight is free, every queued operation whose key no batch out holds (and that
/// no earlier operation on its key still waits ahead of) as the next batch, booking the flight
/// and the keys; the others stay queued, in order.
fn take_ready(state: &mut State) -> Option<Ready> {
    if state.flights >= MAX_IN_FLIGHT || state.queue.is_empty() {
        return None;
    }
    let mut blocked: Vec<Vec<u8>> = Vec::new();
    let (mut ready, mut waiting) = (Vec::new(), Vec::new());
    for q in std::mem::take(&mut state.queue) {
        let key = q.call.lock_key().to_vec();
        if state.out.contains_key(&key) || blocked.contains(&key) {
            blocked.push(key);
            waiting.push(q);
        } else {
            ready.push(q);
        }
    }
    state.queue = waiting;
    if ready.is_empty() {
        return None;
    }
    let keys: Vec<Vec<u8>> = ready.iter().map(|q| q.call.lock_key().to_vec()).collect();
    for key in &keys {
        *state.out.entry(key.clone()).or_insert(0) += 1;
    }
    state.flights += 1;
    Some((ready, keys))
}

#[cfg(test)]
mod schedules;
#[cfg(test)]
mod tests;
