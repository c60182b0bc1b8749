//! Owner identity at scale (issue 23, area 5): two owners never share a hash field, however far
//! apart their ids are, and a lock held by one is never re-entered by another. Thirty tasks in a
//! row cannot reveal an id truncated to 16 or 32 bits, or a thread id that lost its tag; ids
//! 2^16 and 2^32 apart, thread ids and explicit ids with the same low bits can.

use std::collections::HashSet;

use crate::support::*;
use redisson_lock::LockOwner;

/// Thread owners carry the top bit (see `owner.rs`); tasks and explicit ids below it.
const THREAD_TAG: u64 = 1 << 63;

/// The owner and the number its `task::Id` displays, from inside a fresh task.
async fn task_owner() -> (LockOwner, u64) {
    tokio::spawn(async {
        (
            LockOwner::current(),
            tokio::task::id().to_string().parse::<u64>().unwrap(),
        )
    })
    .await
    .unwrap()
}

/// Two tasks whose ids are exactly 2^16 apart are two owners: the second can neither re-enter
/// the first's lock nor release it, and the hash holds the first's full id. Spawning 65,536
/// empty tasks takes well under a second; a truncation to 16 bits (or an owner taken from the
/// low bits of the task id) makes the second task re-enter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_two_to_the_sixteen_apart_are_different_owners() {
    let (_server, client, mut raw) = fixture().await;
    let name = "own:far";
    let lock = client.get_lock(name);
    // Task A takes the lock and keeps its guard (a guard releases through its own owner).
    let held = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            let shown = tokio::task::id().to_string().parse::<u64>().unwrap();
            (guard, shown)
        })
        .await
        .unwrap()
    };
    let (guard, a) = held;
    assert_eq!(guard.owner().id(), a, "a task's owner is its full task id");
    assert_eq!(
        fields(&mut raw, name).await,
        [(field(&client, guard.owner()), 1)].into()
    );
    // Burn task ids up to just below A's id + k * 2^16, then probe one task at a time until a
    // probe's id is exactly that (ids come from one process-wide counter that concurrent tests
    // advance too, so a probe may skip it: then try the next multiple).
    let mut hit = false;
    for k in 1..=20u64 {
        let target = a + k * (1 << 16);
        let (_, mut b) = task_owner().await;
        if b >= target {
            continue;
        }
        while b + 64 < target {
            for _ in 0..(target - b - 32).min(4096) {
                drop(tokio::spawn(async {}));
            }
            b = task_owner().await.1;
        }
        loop {
            let lock = lock.clone();
            let (id, owner, taken, not_owner, held_by_me) = tokio::spawn(async move {
                let id = tokio::task::id().to_string().parse::<u64>().unwrap();
                let owner = LockOwner::current();
                let taken = lock.try_lock().await.unwrap().is_some();
                let not_owner = lock.unlock().await.unwrap_err().is_not_owner();
                let held_by_me = lock.is_held_by_current().await.unwrap();
                (id, owner, taken, not_owner, held_by_me)
            })
            .await
            .unwrap();
            assert_eq!(owner.id(), id, "task {id}: the owner is the full task id");
            assert_ne!(owner, guard.owner(), "task {id} shares task {a}'s owner");
            assert!(!taken, "task {id} re-entered the lock task {a} holds");
            assert!(not_owner, "task {id} was not refused as a non-owner");
            assert!(!held_by_me, "task {id} is told it holds task {a}'s lock");
            if id >= target {
                hit = id == target;
                break;
            }
        }
        if hit {
            break;
        }
    }
    assert!(hit, "no probe task landed on an id 2^16 * k above {a}");
    // Nothing changed: still A's one hold, under A's full id.
    assert_eq!(
        fields(&mut raw, name).await,
        [(format!("{}:{a}", client.id()), 1)].into()
    );
    guard.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
}

/// Explicit ids 2^16 and 2^32 apart, the largest ids, and thread owners (top bit set) beside
/// explicit ids equal to their low bits: every one writes its own decimal id, and while one
/// holds the lock none of the others re-enters it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_with_equal_low_bits_never_share_a_lock() {
    let (_server, client, mut raw) = fixture().await;
    let name = "own:bits";
    let threads: Vec<LockOwner> = (0..3)
        .map(|_| std::thread::spawn(LockOwner::current).join().unwrap())
        .collect();
    let (task, _) = task_owner().await;
    let mut owners = vec![task, LockOwner::new(task.id() | THREAD_TAG)];
    for t in &threads {
        assert_ne!(t.id() & THREAD_TAG, 0, "a thread owner carries the tag");
        owners.push(*t);
        owners.push(LockOwner::new(t.id() & !THREAD_TAG));
        owners.push(LockOwner::new(t.id() & 0xffff_ffff));
    }
    for base in [5u64, 70_000] {
        owners.extend(
            [0, 1 << 16, 1 << 32, 1 << 48, 1 << 62].map(|high| LockOwner::new(base + high)),
        );
    }
    owners.extend([u64::MAX, u64::MAX >> 1, u64::MAX - (1 << 32)].map(LockOwner::new));
    // Low bits of small thread ids coincide for the masks above: keep one of each.
    let mut ids = HashSet::new();
    owners.retain(|o| ids.insert(o.id()));
    assert!(owners.len() > 15, "{owners:?}");
    let mut seen = HashSet::new();
    for holder in &owners {
        let lock = client.get_lock(name).with_owner(*holder);
        let guard = lock.try_lock().await.unwrap().expect("the lock is free");
        let held = fields(&mut raw, name).await;
        let expected = format!("{}:{}", client.id(), holder.id());
        assert_eq!(held, [(expected.clone(), 1)].into(), "{holder:?}");
        assert!(
            seen.insert(expected),
            "{holder:?} wrote a field seen before"
        );
        for other in owners.iter().filter(|o| *o != holder) {
            let theirs = client.get_lock(name).with_owner(*other);
            assert!(
                theirs.try_lock().await.unwrap().is_none(),
                "{other:?} re-entered the lock {holder:?} holds"
            );
            assert!(!theirs.is_held_by_current().await.unwrap(), "{other:?}");
        }
        assert_eq!(
            fields(&mut raw, name).await,
            held,
            "{holder:?}: a try changed the hash"
        );
        guard.unlock().await.unwrap();
    }
    assert!(!exists(&mut raw, name).await);
}
