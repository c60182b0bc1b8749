//! The ordering rules without Redis: which operation may leave, which batch forms, and the
//! batch command it makes.
use super::*;

fn queued(key: &str, tag: &str) -> Queued {
    let (tx, _rx) = oneshot::channel();
    let mut call = Call::new(&scripts::FORCE_UNLOCK, 1);
    call.key(key).arg(tag);
    Queued {
        index: 0,
        call,
        synced: false,
        tx,
    }
}

fn tags(ops: &[Queued]) -> Vec<String> {
    ops.iter()
        .map(|q| String::from_utf8(q.call.args().next().unwrap().to_vec()).unwrap())
        .collect()
}

#[test]
fn an_operation_on_a_key_whose_batch_is_out_waits_for_it() {
    // The reorder bug of the first group commit: an acquire on `k` left in a batch, and
    // the trim settling its cancelled caller took a free flight and ran first.
    let mut state = State::default();
    assert!(goes_direct(&state, b"k"));
    state.out.insert(b"k".to_vec(), 1);
    state.flights = 1;
    assert!(!goes_direct(&state, b"k"), "overtakes the batch out on k");
    assert!(goes_direct(&state, b"other"));
    // Every lone slot out, or anything queued, sends everyone to the queue.
    state.direct = MAX_DIRECT;
    assert!(!goes_direct(&state, b"other"));
    state.direct = MAX_DIRECT - 1;
    assert!(goes_direct(&state, b"other"), "a free slot");
    state.queue.push(queued("x", "x"));
    assert!(!goes_direct(&state, b"other"));
}

#[test]
fn a_batch_leaves_out_the_keys_of_batches_out_and_keeps_the_order_per_key() {
    let mut state = State::default();
    state.out.insert(b"k".to_vec(), 1);
    state.flights = 1;
    for (key, tag) in [
        ("k", "acquire k"),
        ("l", "acquire l"),
        ("k", "trim k"),
        ("l", "trim l"),
    ] {
        state.queue.push(queued(key, tag));
    }
    let (batch, keys) = take_ready(&mut state).expect("l's operations are ready");
    assert_eq!(tags(&batch), ["acquire l", "trim l"], "in their order");
    assert_eq!(keys, [b"l".to_vec(), b"l".to_vec()]);
    assert_eq!(
        tags(&state.queue),
        ["acquire k", "trim k"],
        "k's wait, in order"
    );
    assert_eq!(state.flights, 2);
    assert_eq!(state.out[b"l".as_slice()], 2);
    // Nothing else is ready while k's batch is out.
    assert!(take_ready(&mut state).is_none());
    // k's batch done: its operations leave together, still in order.
    state.out.remove(b"k".as_slice());
    state.flights -= 1;
    let (batch, _) = take_ready(&mut state).expect("k is free");
    assert_eq!(tags(&batch), ["acquire k", "trim k"]);
    assert!(state.queue.is_empty());
}

/// The batch command: every operation's keys first, then per operation its function,
/// key count, argument count and arguments, copied from its own command.
#[test]
fn a_batch_command_carries_each_operations_keys_and_arguments() {
    let group = [queued("k", "acquire k"), queued("l", "trim l")];
    let words: Vec<Vec<u8>> = batch_cmd(&group)
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(v) => v.to_vec(),
            _ => panic!("a cursor in a batch command"),
        })
        .collect();
    let sha = scripts::BATCH.get_hash();
    let expected: Vec<&[u8]> = vec![
        b"EVALSHA",
        sha.as_bytes(),
        b"2",
        b"k",
        b"l",
        b"2",
        &[0, 1, 1],
        b"acquire k",
        &[0, 1, 1],
        b"trim l",
    ];
    assert_eq!(words, expected);
    assert_eq!(group[0].call.batch(), None, "not a batched script");
}

#[test]
fn nothing_leaves_while_every_flight_is_out() {
    let mut state = State {
        flights: MAX_IN_FLIGHT,
        ..State::default()
    };
    state.queue.push(queued("k", "acquire k"));
    assert!(take_ready(&mut state).is_none());
    assert_eq!(state.queue.len(), 1);
}

/// A queued operation whose caller still waits (its receiver is kept).
fn live(key: &str, keep: &mut Vec<oneshot::Receiver<Outcome>>) -> Queued {
    let (tx, rx) = oneshot::channel();
    keep.push(rx);
    Queued {
        tx,
        ..queued(key, key)
    }
}

#[test]
fn only_groups_that_pay_become_batches() {
    let mut keep = Vec::new();
    // One server: a few distinct keys go alone; BATCH_MIN of them make a batch.
    let few: Vec<Queued> = (0..3).map(|i| live(&format!("k{i}"), &mut keep)).collect();
    let (batches, alone) = split(few, false);
    assert!(batches.is_empty());
    assert_eq!(alone.len(), 3);
    let many: Vec<Queued> = (0..BATCH_MIN)
        .map(|i| live(&format!("k{i}"), &mut keep))
        .collect();
    let (batches, alone) = split(many, false);
    assert_eq!(
        (batches.len(), batches[0].len(), alone.len()),
        (1, BATCH_MIN, 0)
    );
    // Two operations on one key keep their order in a batch script, however few.
    let (batches, alone) = split(vec![live("k", &mut keep), live("k", &mut keep)], false);
    assert_eq!((batches.len(), alone.len()), (1, 0));
    // A caller already gone is left out.
    let (batches, alone) = split(vec![queued("gone", "gone")], false);
    assert!(batches.is_empty() && alone.is_empty());
}

#[test]
fn on_a_cluster_a_full_slot_is_a_batch_and_lone_slots_go_alone_together() {
    let mut keep = Vec::new();
    let mut ops: Vec<Queued> = (0..BATCH_MIN)
        .map(|i| live(&format!("{{hot}}:{i}"), &mut keep))
        .collect();
    ops.extend(["a", "b", "c"].map(|k| live(k, &mut keep)));
    let (batches, alone) = split(ops, true);
    assert_eq!(batches.len(), 1);
    assert!(batches[0]
        .iter()
        .all(|q| q.call.lock_key().starts_with(b"{hot}")));
    assert_eq!(tags(&alone), ["a", "b", "c"]);
}
