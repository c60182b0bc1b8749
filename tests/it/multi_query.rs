//! `MultiLock::is_held_by_current` / `RedLock::is_held_by_current` (Redisson's MultiLock and
//! RedLock throw for `isHeldByCurrentThread`): held when the policy's quorum of members is held
//! by the caller's owner, on real independent servers, with foreign holders and dead nodes.

use std::time::Duration;

use crate::multi_support::*;
use redisson_lock::{LockOwner, MultiLock, QuorumOperation, RedLock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_is_held_when_every_member_is() {
    let nodes = nodes(2).await;
    let name = "mq:multi";
    let multi: MultiLock = MultiLock::new(nodes.locks(name)).unwrap();
    assert!(!multi.is_held_by_current().await.unwrap());
    let guard = multi.lock().await.unwrap();
    assert!(multi.is_held_by_current().await.unwrap());
    // Another owner of the same handles does not hold it.
    let other: MultiLock = MultiLock::new(
        nodes
            .locks(name)
            .into_iter()
            .map(|l| l.with_owner(LockOwner::new(4242))),
    )
    .unwrap();
    assert!(!other.is_held_by_current().await.unwrap());
    // One member lost: a MultiLock needs all of them.
    nodes.delete(1, name).await;
    assert!(!multi.is_held_by_current().await.unwrap());
    drop(guard);
    assert!(nodes.none_ours_within(name, SETTLE).await);
    assert!(!multi.is_held_by_current().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_is_held_by_a_majority_of_its_members() {
    let mut nodes = nodes(3).await;
    let name = "mq:red";
    // A foreign holder on node 2: the majority (0, 1) is ours.
    nodes.hold_foreign_on(&[2], name).await;
    let red = RedLock::new(nodes.locks(name)).unwrap();
    assert!(!red.is_held_by_current().await.unwrap());
    let guard = red.try_lock().await.unwrap().expect("a free majority");
    assert_eq!(guard.held_nodes(), [0, 1]);
    assert!(red.is_held_by_current().await.unwrap());
    // Node 1 loses our member: one of three is not a majority.
    nodes.delete(1, name).await;
    assert!(!red.is_held_by_current().await.unwrap());
    drop(guard);
    assert!(nodes.none_ours_within(name, SETTLE).await);

    // A dead node: the answer stands when the others settle it, either way...
    let guard = RedLock::new(nodes.locks("mq:dead"))
        .unwrap()
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    nodes.servers[2].kill();
    let red = RedLock::new(nodes.locks("mq:dead")).unwrap();
    assert!(red.is_held_by_current().await.unwrap(), "2 of 3 held");
    let other = RedLock::new(
        nodes
            .locks("mq:dead")
            .into_iter()
            .map(|l| l.with_owner(LockOwner::new(4242))),
    )
    .unwrap();
    assert!(!other.is_held_by_current().await.unwrap(), "0 of 2 live");
    // ... and is an error naming the dead node when it cannot be known.
    nodes.delete(1, "mq:dead").await;
    let q = quorum(red.is_held_by_current().await.unwrap_err());
    assert_eq!(q.operation, QuorumOperation::Query);
    assert_eq!((q.acquired, q.required), (1, 2));
    let failed: Vec<usize> = q.errors.iter().map(|(i, _)| *i).collect();
    assert_eq!(failed, [2]);
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_asking() {
    let nodes = nodes(2).await;
    let multi: MultiLock = MultiLock::new(nodes.locks("")).unwrap();
    let e = multi.is_held_by_current().await.unwrap_err();
    // The same words as every other kind's empty name (`keys::refusal`).
    assert!(e.is_invalid_argument(), "{e:?}");
    assert!(e.to_string().contains("the name must not be empty"), "{e}");
    let multi: MultiLock = MultiLock::new(nodes.locks("mq:bad"))
        .unwrap()
        .with_node_timeout(Duration::ZERO);
    assert!(multi
        .is_held_by_current()
        .await
        .unwrap_err()
        .is_invalid_argument());
}
