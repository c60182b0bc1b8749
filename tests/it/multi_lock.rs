//! MultiLock (policy `All`) against three real redis-servers, one client each.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::multi_support::*;
use crate::support::{subscribed, with_client};
use redisson_lock::{LockError, MultiLock, MultiLockGuard, QuorumOperation};

fn multi(nodes: &Nodes, name: &str) -> MultiLock {
    MultiLock::new(nodes.locks(name)).unwrap()
}

#[tokio::test]
async fn futures_and_guards_are_send_and_static() {
    fn is_send<T: Send + 'static>(_: &T) {}
    fn guard_is_send<T: Send + Sync + 'static>() {}
    guard_is_send::<MultiLockGuard>();
    guard_is_send::<MultiLock>();
    let (_server, client) = with_client().await;
    let m: MultiLock = MultiLock::new([client.get_lock("send")]).unwrap();
    let m2 = m.clone();
    is_send(&async move { m2.lock().await });
    let m3 = m.clone();
    is_send(&async move {
        m3.try_lock_with_lease(Duration::ZERO, Duration::from_secs(1))
            .await
    });
    is_send(&async move { m.lock().await.unwrap().unlock().await });
}

#[tokio::test]
async fn bad_arguments_are_rejected_before_anything_is_sent() {
    assert!(
        MultiLock::<redisson_lock::All>::new(Vec::<redisson_lock::RLock>::new())
            .unwrap_err()
            .is_invalid_argument()
    );
    let nodes = nodes(1).await;
    let m = multi(&nodes, "args");
    let zero_lease = m.try_lock_with_lease(Duration::ZERO, Duration::ZERO).await;
    assert!(zero_lease.unwrap_err().is_invalid_argument());
    let zero_timeout = m.clone().with_node_timeout(Duration::ZERO).try_lock().await;
    assert!(zero_timeout.unwrap_err().is_invalid_argument());
    let huge = m.lock_with_lease(Duration::MAX).await;
    assert!(huge.unwrap_err().is_invalid_argument());
    let unnamed = multi(&nodes, "").try_lock().await;
    assert!(unnamed.unwrap_err().is_invalid_argument());
    assert!(nodes.fields(0, "args").await.is_empty());
}

#[tokio::test]
async fn takes_every_member_and_releases_every_member() {
    let nodes = nodes(3).await;
    let m = multi(&nodes, "every");
    assert_eq!(m.required(), 3);
    let guard = m.lock().await.unwrap();
    assert_eq!(guard.held_nodes(), vec![0, 1, 2]);
    assert_eq!(guard.lease(), None);
    assert_eq!(guard.remaining_validity(), None);
    assert!(!guard.is_lost());
    for i in 0..3 {
        assert_eq!(nodes.ours(i, "every").await.len(), 1, "node {i}");
        let ttl = nodes.pttl(i, "every").await;
        assert!(
            ttl > 0 && ttl <= 30_000,
            "node {i}: watchdog lease, got {ttl}"
        );
    }
    guard.unlock().await.unwrap();
    for i in 0..3 {
        assert!(nodes.fields(i, "every").await.is_empty(), "node {i}");
    }
}

#[tokio::test]
async fn all_or_nothing_for_every_subset_of_busy_members() {
    let nodes = nodes(3).await;
    for mask in 0u32..8 {
        let busy = members(mask, 3);
        for (variant, wait) in [
            ("now", Duration::ZERO),
            ("wait", Duration::from_millis(150)),
        ] {
            let name = format!("aon:{mask}:{variant}");
            nodes.hold_foreign_on(&busy, &name).await;
            let got = multi(&nodes, &name).try_lock_for(wait).await.unwrap();
            match got {
                Some(guard) => {
                    assert!(busy.is_empty(), "mask {mask:03b}: taken while busy");
                    assert_eq!(guard.held_nodes(), vec![0, 1, 2]);
                    guard.unlock().await.unwrap();
                }
                None => assert!(!busy.is_empty(), "mask {mask:03b}: free but not taken"),
            }
            assert_eq!(
                nodes.ours_anywhere(&name).await,
                Vec::<usize>::new(),
                "mask {mask:03b} ({variant}): a member was left held"
            );
            assert!(nodes.foreign_kept(&busy, &name).await, "mask {mask:03b}");
        }
    }
}

#[tokio::test]
async fn waits_for_a_busy_member_then_takes_them_all() {
    let nodes = nodes(3).await;
    // The foreign hold expires (no unlock message): the waiter is bounded by its TTL.
    nodes
        .hold_foreign(1, "waits", Duration::from_millis(300))
        .await;
    let guard = multi(&nodes, "waits")
        .try_lock_for(Duration::from_secs(20))
        .await
        .unwrap()
        .expect("taken once the foreign hold expired");
    assert_eq!(guard.held_nodes(), vec![0, 1, 2]);

    // A contender on the same nodes is woken by the release message.
    let m = multi(&nodes, "waits");
    let waiter = tokio::spawn(async move { m.try_lock_for(Duration::from_secs(20)).await });
    // Every member is busy: the waiter holds nothing and waits on member 0's channel.
    assert!(subscribed(&nodes.clients[0], 1).await);
    guard.unlock().await.unwrap();
    let second = waiter.await.unwrap().unwrap().expect("woken and taken");
    assert_eq!(second.held_nodes(), vec![0, 1, 2]);
    second.unlock().await.unwrap();
}

#[tokio::test]
async fn lease_is_reapplied_to_every_member() {
    let nodes = nodes(3).await;
    let lease = Duration::from_secs(10);
    // Members are first taken with a lease covering the wait (over 20 s here), then narrowed.
    let guard = multi(&nodes, "lease")
        .try_lock_with_lease(Duration::from_secs(10), lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(guard.lease(), Some(lease));
    let validity = guard.remaining_validity().unwrap();
    assert!(validity > Duration::ZERO && validity < lease - Duration::from_millis(100));
    for i in 0..3 {
        let ttl = nodes.pttl(i, "lease").await;
        assert!(
            ttl > 0 && ttl <= 10_000,
            "node {i}: lease re-applied, got {ttl}"
        );
    }
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn fixed_lease_running_out_marks_the_guard_lost() {
    let nodes = nodes(3).await;
    let guard = multi(&nodes, "expiring")
        .with_node_timeout(Duration::from_secs(1))
        .try_lock_with_lease(Duration::ZERO, Duration::from_millis(1500))
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("lost when the validity runs out");
    assert!(guard.is_lost());
    assert_eq!(guard.remaining_validity(), Some(Duration::ZERO));
}

#[tokio::test]
async fn losing_one_member_loses_the_multilock() {
    let nodes = nodes(3).await;
    let guard = multi(&nodes, "lose").lock().await.unwrap();
    nodes.lose_member(1, "lose").await;
    let q = released_lost(guard).await;
    assert_eq!(q.operation, QuorumOperation::Unlock);
    assert_eq!((q.acquired, q.required), (2, 3));
    assert_eq!(q.errors.len(), 1);
    assert_eq!(q.errors[0].0, 1);
    assert!(q.errors[0].1.is_lease_lost());
    assert!(nodes.ours_anywhere("lose").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contenders_exclude_each_other_and_never_deadlock() {
    let nodes = Arc::new(nodes(3).await);
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (nodes, inside) = (nodes.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let m = multi(&nodes, "contend");
            for _ in 0..5 {
                // A deadlock (each holding part, waiting for the rest) would exhaust this.
                let guard = m
                    .try_lock_for(Duration::from_secs(30))
                    .await
                    .unwrap()
                    .expect("contenders make progress");
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(nodes.ours_anywhere("contend").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_contenders_exactly_one_wins() {
    let nodes = Arc::new(nodes(3).await);
    let winners = contend(nodes.clone(), "ten", multi, Duration::from_secs(3)).await;
    assert_eq!(winners, 1);
    // Without a wait, simultaneous contenders may split the members: never two winners, and
    // some round must have one (zero winners forever would also pass `<= 1`).
    let mut rounds_won = 0;
    for _ in 0..20 {
        let winners = contend(nodes.clone(), "ten-now", multi, Duration::ZERO).await;
        assert!(winners <= 1, "{winners} winners");
        rounds_won += winners;
    }
    assert!(rounds_won > 0, "no zero-wait round was ever won");
    for name in ["ten", "ten-now"] {
        assert!(nodes.ours_anywhere(name).await.is_empty());
    }
}

#[tokio::test]
async fn dropped_acquire_leaves_nothing_behind() {
    let nodes = nodes(3).await;
    // Dropped while holding member 0 and waiting for member 1.
    drop_while_waiting(&nodes, multi(&nodes, "dropped"), "dropped", &[1]).await;

    // Dropped at many points of an uncontended acquire.
    for step in 0..25u64 {
        let name = format!("dropped:{step}");
        let m = multi(&nodes, &name);
        let budget = Duration::from_micros(step * 150);
        if let Ok(got) = tokio::time::timeout(budget, m.lock()).await {
            got.unwrap().unlock().await.unwrap();
        }
        assert!(
            nodes.none_ours_within(&name, SETTLE).await,
            "step {step}: a member stayed held"
        );
    }
}

#[tokio::test]
async fn a_dead_member_fails_fast_with_its_error() {
    let mut nodes = nodes(3).await;
    nodes.servers[2].kill();
    let q = fails_fast(multi(&nodes, "dead")).await;
    assert_eq!(q.operation, QuorumOperation::Acquire);
    assert_eq!(q.required, 3);
    assert_eq!(q.errors.len(), 1);
    assert_eq!(q.errors[0].0, 2);
    assert!(q.errors[0].1.is_connection_error(), "{:?}", q.errors[0].1);
    assert!(nodes.nodes_with_ours(&[0, 1], "dead").await.is_empty());
}

#[tokio::test]
async fn unlock_reports_an_unreachable_node_and_releases_the_rest() {
    let mut nodes = nodes(3).await;
    let guard = multi(&nodes, "partial").lock().await.unwrap();
    nodes.servers[1].kill();
    let err = guard.unlock().await.unwrap_err();
    let q = quorum(err);
    assert_eq!(q.operation, QuorumOperation::Unlock);
    assert_eq!((q.acquired, q.required), (2, 3));
    assert_eq!(q.errors.len(), 1);
    assert_eq!(q.errors[0].0, 1);
    assert!(matches!(
        q.errors[0].1,
        LockError::Redis(_) | LockError::Timeout { .. }
    ));
    for i in [0, 2] {
        assert!(nodes.fields(i, "partial").await.is_empty(), "node {i}");
    }
}

/// Mutual exclusion over time, not just at one instant: five contenders take the lock four
/// times each; never two inside at once, and every acquisition happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contenders_take_turns_one_at_a_time() {
    take_turns(multi).await;
}

/// Redisson's `getMultiLock` takes locks of any kind: a fair lock, the write side of a
/// read-write lock and a fenced lock, on three nodes, are taken as one, each with its own
/// kind's data and semantics (a read of the write-locked name is refused; the fair lock's queue
/// is its own), and all given back. Two multi-locks of read sides share their members, as read
/// locks do, where RLock members would exclude each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_of_mixed_kinds_keep_their_own_semantics() {
    use redisson_lock::MemberLock;
    let nodes = nodes(3).await;
    let [a, b, c] = [0, 1, 2].map(|i| nodes.clients[i].clone());
    let mixed = || -> MultiLock {
        MultiLock::new([
            MemberLock::from(a.get_fair_lock("mix")),
            MemberLock::from(b.get_read_write_lock("mix").write_lock()),
            MemberLock::from(c.get_fenced_lock("mix")),
        ])
        .unwrap()
    };
    let m = mixed();
    assert_eq!(m.locks().len(), 3);
    assert_eq!(m.locks()[1].name(), "mix");
    let guard = m.lock().await.unwrap();
    assert_eq!(guard.held_nodes(), vec![0, 1, 2]);
    // Each member wrote its own kind's data.
    let mut rw = nodes.servers[1].conn().await;
    let mode: Option<String> = redis::AsyncCommands::hget(&mut rw, "mix", "mode")
        .await
        .unwrap();
    assert_eq!(mode.as_deref(), Some("write"), "the write side's hash");
    assert_eq!(
        nodes.ours(0, "mix").await.len(),
        1,
        "the fair lock's holder"
    );
    assert!(
        c.get_fenced_lock("mix")
            .current_token()
            .await
            .unwrap()
            .is_some(),
        "the fenced lock's token"
    );
    // Another task: every member, and the multi-lock, are busy for it.
    let (b2, other) = (b.clone(), mixed());
    tokio::spawn(async move {
        let read = b2.get_read_write_lock("mix").read_lock();
        assert!(read.try_lock().await.unwrap().is_none(), "read vs write");
        assert!(other.try_lock().await.unwrap().is_none());
    })
    .await
    .unwrap();
    guard.unlock().await.unwrap();
    for node in 0..3 {
        assert!(nodes.ours(node, "mix").await.is_empty(), "node {node}");
    }

    // Read sides are shared: two tasks hold one multi-lock of them at once.
    let reads = move || -> MultiLock {
        MultiLock::new([
            a.get_read_write_lock("shared").read_lock(),
            b.get_read_write_lock("shared").read_lock(),
        ])
        .unwrap()
    };
    let first = reads().lock().await.unwrap();
    let second = tokio::spawn(async move { reads().try_lock().await.unwrap().map(|_| ()) })
        .await
        .unwrap();
    assert!(second.is_some(), "a second reader shares the members");
    first.unlock().await.unwrap();
}
