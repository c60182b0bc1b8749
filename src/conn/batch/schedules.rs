//! Schedules of the group-commit queue and its flights, explored with `shuttle`
//! (`sched::explore`): operations entering, lone operations landing and batches landing, in
//! every order the schedulers pick. The state transitions are the batcher's own
//! ([`State::take_direct`], [`State::landed`], [`State::batch_done`], [`take_ready`]), each made
//! under one lock as [`Batcher`] makes them; the tasks around them stand for [`Batcher`]'s
//! callers and flights, with the sending replaced by the test acknowledging each departure.
//! Between the locked steps (where [`Batcher`] lets go of its lock: after `enter`, after a
//! transition and before its batch starts, while a batch is out) a `sched::point` lets another
//! task run.
//!
//! What every schedule must keep: no queued operation stranded (nothing out means nothing
//! queued, at every step and at the end), the order per lock key (an operation never departs
//! while an earlier one on its key is queued or in a batch out: `State::out`), the counters
//! within their bounds and back to zero at the end, and every operation departing exactly once.

use std::sync::Arc;

use parking_lot::Mutex;
use shuttle::thread::{spawn, JoinHandle};

use super::*;
use crate::sched::{explore, point};

/// The test's own record, kept under the batcher's lock with the state it checks.
#[derive(Default)]
struct Ghost {
    /// The lock key of each operation, by its sequence number (the order of `enter`).
    keys: Vec<&'static str>,
    /// How often each operation departed (alone or in a batch).
    departed: Vec<u32>,
    /// The operations in batches out.
    in_batches: Vec<usize>,
}

struct World {
    state: Mutex<(State, Ghost)>,
    /// Every task started, joined at the end.
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// A real `EVALSHA` of `lock.lua` on `key`, its owner field naming the operation.
fn operation(key: &str, seq: usize) -> Queued {
    let call = crate::scripts::lock(key, 30_000, &format!("op:{seq}"));
    let index = call.batch().expect("lock.lua is batched");
    let (tx, rx) = oneshot::channel();
    // The caller waits: `split` would leave out an operation whose caller is gone.
    std::mem::forget(rx);
    Queued {
        index,
        call,
        synced: false,
        tx,
    }
}

/// The sequence number in `op`'s owner field.
fn seq_of(op: &Queued) -> usize {
    let field = op.call.args().nth(1).expect("the owner field");
    let field = std::str::from_utf8(field).unwrap();
    field.strip_prefix("op:").unwrap().parse().unwrap()
}

/// Checks made after every transition, under the lock.
fn invariants(state: &State) {
    assert!(
        state.direct <= MAX_DIRECT,
        "{} lone operations out",
        state.direct
    );
    assert!(
        state.flights <= MAX_IN_FLIGHT,
        "{} flights out",
        state.flights
    );
    if state.direct == 0 && state.flights == 0 {
        assert!(
            state.queue.is_empty(),
            "stranded: {} operations queued with nothing out to take them",
            state.queue.len()
        );
        assert!(state.out.is_empty(), "keys booked with no batch out");
    }
}

/// Records `seq` departing, after checking no earlier operation on its key is still queued or
/// in a batch out.
fn depart(state: &State, ghost: &mut Ghost, seq: usize) {
    let key = ghost.keys[seq];
    let queued = state.queue.iter().map(seq_of);
    for earlier in queued.chain(ghost.in_batches.iter().copied()) {
        assert!(
            !(earlier < seq && ghost.keys[earlier] == key),
            "operation {seq} on {key} departs before operation {earlier} on the same key"
        );
    }
    ghost.departed[seq] += 1;
    assert_eq!(ghost.departed[seq], 1, "operation {seq} departed twice");
}

impl World {
    fn task(self: &Arc<Self>, f: impl FnOnce(Arc<World>) + Send + 'static) {
        let world = self.clone();
        let task = spawn(move || f(world));
        self.tasks.lock().push(task);
    }

    /// [`Batcher::enter`]: goes alone (and lands later, as a [`Flight`] drops) or queues.
    fn enter(self: &Arc<Self>, key: &'static str) {
        let direct = {
            let mut guard = self.state.lock();
            let (state, ghost) = &mut *guard;
            let seq = ghost.keys.len();
            ghost.keys.push(key);
            ghost.departed.push(0);
            let direct = state.take_direct(key.as_bytes());
            if direct {
                depart(state, ghost, seq);
            } else {
                state.queue.push(operation(key, seq));
            }
            invariants(state);
            direct
        };
        if direct {
            // The caller sends its command; the flight lands when its reply comes.
            point();
            self.landed();
        }
    }

    /// [`Batcher::landed`] (a [`Flight`] dropped).
    fn landed(self: &Arc<Self>) {
        let next = {
            let mut guard = self.state.lock();
            let next = guard.0.landed();
            self.took(&mut guard, next)
        };
        point();
        self.start(next);
    }

    /// Checks and records a batch [`take_ready`] took, under the lock.
    fn took(&self, guard: &mut (State, Ghost), next: Option<Ready>) -> Option<Ready> {
        let (state, ghost) = guard;
        if let Some((ops, keys)) = &next {
            assert!(!ops.is_empty());
            assert_eq!(keys.len(), ops.len());
            // In queue order: within the batch, earlier before later.
            let seqs: Vec<usize> = ops.iter().map(seq_of).collect();
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "out of order: {seqs:?}"
            );
            for &seq in &seqs {
                depart(state, ghost, seq);
            }
            ghost.in_batches.extend(seqs);
        }
        invariants(state);
        next
    }

    /// [`Batcher::start`]: the batch goes out, and [`BatchOut`] ends it when its replies come.
    fn start(self: &Arc<Self>, next: Option<Ready>) {
        let Some((ops, keys)) = next else { return };
        self.task(move |world| {
            point();
            let next = {
                let mut guard = world.state.lock();
                let seqs: Vec<usize> = ops.iter().map(seq_of).collect();
                guard.1.in_batches.retain(|s| !seqs.contains(s));
                let next = guard.0.batch_done(keys);
                world.took(&mut guard, next)
            };
            point();
            world.start(next);
        });
    }
}

/// `clients` callers each send `ops` operations on keys of `keys`, while `MAX_DIRECT - 1` other
/// lone operations are out (so the queue forms once a caller's own takes the last slot); they
/// land in `others` groups (the landings of a group back to back, each still its own
/// transition), so that few steps separate any state from the one where they have all landed.
fn run(others: usize, clients: usize, ops: usize, keys: &'static [&'static str]) {
    let world = Arc::new(World {
        state: Mutex::new((
            State {
                direct: MAX_DIRECT - 1,
                ..State::default()
            },
            Ghost::default(),
        )),
        tasks: Mutex::new(Vec::new()),
    });
    for group in 0..others {
        let n = (MAX_DIRECT - 1) / others + usize::from(group < (MAX_DIRECT - 1) % others);
        world.task(move |world| {
            point();
            for _ in 0..n {
                world.landed();
            }
        });
    }
    for client in 0..clients {
        world.task(move |world| {
            for i in 0..ops {
                world.enter(keys[(client + i) % keys.len()]);
                point();
            }
        });
    }
    loop {
        let Some(task) = world.tasks.lock().pop() else {
            break;
        };
        task.join().unwrap();
    }
    let guard = world.state.lock();
    let (state, ghost) = &*guard;
    assert!(state.queue.is_empty(), "operations left queued at the end");
    assert_eq!((state.direct, state.flights), (0, 0), "counters at rest");
    assert!(state.out.is_empty(), "keys booked at rest");
    assert!(ghost.in_batches.is_empty());
    assert_eq!(ghost.departed.len(), clients * ops);
    assert!(
        ghost.departed.iter().all(|&n| n == 1),
        "every operation departs once: {:?}",
        ghost.departed
    );
}

/// Three callers, three operations each on two keys: queues form behind the lone slots and
/// behind batches out on a key, and leave as lone operations and batches land.
#[test]
fn the_queue_always_leaves_and_keeps_the_order_per_key() {
    explore(|| run(2, 3, 3, &["a", "b"]));
}

/// Enough callers on distinct-enough keys that every flight is out at once, so the queue also
/// waits for a free flight.
#[test]
fn the_queue_waits_for_a_free_flight_and_still_leaves() {
    explore(|| run(2, 8, 2, &["a", "b", "c", "d", "e"]));
}
