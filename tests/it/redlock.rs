//! RedLock (policy `Majority`) against 3 and 5 real redis-servers, one client each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::multi_support::*;
use redisson_lock::{QuorumOperation, RedLock};

fn redlock(nodes: &Nodes, name: &str) -> RedLock {
    RedLock::new(nodes.locks(name)).unwrap()
}

/// For every subset of nodes held by a foreign owner: taken iff the free nodes are a majority;
/// taken exactly on the free nodes; after a miss, none of our fields remains anywhere.
async fn truth_table(n: usize, wait: Duration) {
    let nodes = nodes(n).await;
    let quorum = n / 2 + 1;
    assert_eq!(redlock(&nodes, "q").required(), quorum);
    for mask in 0u32..(1 << n) {
        let busy = members(mask, n);
        let free: Vec<usize> = (0..n).filter(|i| !busy.contains(i)).collect();
        let name = format!("truth:{n}:{mask}");
        nodes.hold_foreign_on(&busy, &name).await;
        let got = redlock(&nodes, &name).try_lock_for(wait).await.unwrap();
        match got {
            Some(guard) => {
                assert!(
                    free.len() >= quorum,
                    "mask {mask:b}: taken without a quorum"
                );
                assert_eq!(guard.held_nodes(), free, "mask {mask:b}");
                assert_eq!(nodes.ours_anywhere(&name).await, free);
                guard.unlock().await.unwrap();
            }
            None => assert!(free.len() < quorum, "mask {mask:b}: quorum free, not taken"),
        }
        assert!(
            nodes.ours_anywhere(&name).await.is_empty(),
            "mask {mask:b}: a member was left held"
        );
        assert!(nodes.foreign_kept(&busy, &name).await, "mask {mask:b}");
    }
}

#[tokio::test]
async fn quorum_truth_table_3_nodes() {
    truth_table(3, Duration::ZERO).await;
}

#[tokio::test]
async fn quorum_truth_table_3_nodes_with_a_wait() {
    truth_table(3, Duration::from_millis(150)).await;
}

#[tokio::test]
async fn quorum_truth_table_5_nodes() {
    truth_table(5, Duration::ZERO).await;
}

async fn minority_down(n: usize, kill: &[usize]) {
    let mut nodes = nodes(n).await;
    for &i in kill {
        nodes.servers[i].kill();
    }
    let live: Vec<usize> = (0..n).filter(|i| !kill.contains(i)).collect();
    let lease = Duration::from_secs(10);
    let guard = redlock(&nodes, "minority")
        .try_lock_with_lease(Duration::from_secs(5), lease)
        .await
        .unwrap()
        .expect("a live majority is enough");
    assert_eq!(guard.held_nodes(), live);
    let validity = guard.remaining_validity().unwrap();
    assert!(validity > Duration::ZERO && validity < lease);
    guard.unlock().await.unwrap();
    assert!(nodes.nodes_with_ours(&live, "minority").await.is_empty());
}

#[tokio::test]
async fn one_of_three_killed_still_acquires() {
    minority_down(3, &[0]).await;
}

#[tokio::test]
async fn two_of_five_killed_still_acquires() {
    minority_down(5, &[0, 3]).await;
}

async fn majority_down(n: usize, kill: &[usize]) {
    let mut nodes = nodes(n).await;
    for &i in kill {
        nodes.servers[i].kill();
    }
    let live: Vec<usize> = (0..n).filter(|i| !kill.contains(i)).collect();
    let q = fails_fast(redlock(&nodes, "majority")).await;
    assert_eq!(q.operation, QuorumOperation::Acquire);
    assert_eq!(q.required, n / 2 + 1);
    assert!(q.acquired < q.required);
    let failed: Vec<usize> = q.errors.iter().map(|(i, _)| *i).collect();
    assert_eq!(failed, kill);
    assert!(q.errors.iter().all(|(_, e)| e.is_connection_error()));
    assert!(nodes.nodes_with_ours(&live, "majority").await.is_empty());
}

#[tokio::test]
async fn two_of_three_killed_fails_fast() {
    majority_down(3, &[1, 2]).await;
}

#[tokio::test]
async fn three_of_five_killed_fails_fast() {
    majority_down(5, &[0, 2, 4]).await;
}

#[tokio::test]
async fn a_stalled_node_counts_as_failed_and_does_not_stall_the_call() {
    // A response timeout far above the node timeout: only the node timeout can end the wait.
    let response_timeout = Duration::from_secs(5);
    let nodes = nodes_with(3, |c| fast(c).with_response_timeout(response_timeout)).await;
    nodes.servers[1].pause();
    let started = Instant::now();
    // Default node timeout: 5 % of the 20 s lease (1 s), below the response timeout.
    let got = redlock(&nodes, "stalled")
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(20))
        .await;
    let elapsed = started.elapsed();
    nodes.servers[1].resume();
    let guard = got.unwrap().expect("the two live nodes are a quorum");
    assert!(
        elapsed < response_timeout,
        "the stalled node held up the call for {elapsed:?}"
    );
    assert_eq!(guard.held_nodes(), vec![0, 2]);
    guard.unlock().await.unwrap();
    // The stalled node ran our queued acquire when it resumed: trimmed back, or expired.
    assert!(nodes.none_ours_within("stalled", SETTLE).await);

    // Same with an explicit node timeout and a watchdog lease.
    nodes.servers[2].pause();
    let started = Instant::now();
    let got = redlock(&nodes, "stalled2")
        .with_node_timeout(Duration::from_secs(1))
        .try_lock()
        .await;
    let elapsed = started.elapsed();
    nodes.servers[2].resume();
    let guard = got.unwrap().expect("quorum");
    assert!(elapsed < response_timeout, "{elapsed:?}");
    assert_eq!(guard.held_nodes(), vec![0, 1]);
    guard.unlock().await.unwrap();
    assert!(nodes.none_ours_within("stalled2", SETTLE).await);
}

#[tokio::test]
async fn validity_follows_the_redlock_rule() {
    let nodes = nodes(3).await;
    let lease = Duration::from_secs(10);
    let guard = redlock(&nodes, "valid")
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap()
        .unwrap();
    // Drift: 1 % of the lease + 2 ms.
    let validity = guard.remaining_validity().unwrap();
    assert!(validity > Duration::ZERO && validity <= lease - Duration::from_millis(102));
    for i in 0..3 {
        let ttl = nodes.pttl(i, "valid").await;
        assert!(ttl > 0 && ttl <= 10_000, "node {i}: {ttl}");
    }
    guard.unlock().await.unwrap();

    // A lease shorter than the drift allowance can never be valid: given back, a miss.
    let got = redlock(&nodes, "too-short")
        .with_node_timeout(Duration::from_secs(1))
        .try_lock_with_lease(Duration::ZERO, Duration::from_millis(1))
        .await
        .unwrap();
    assert!(got.is_none());
    assert!(nodes.none_ours_within("too-short", SETTLE).await);
}

#[tokio::test]
async fn lost_only_below_the_quorum() {
    let nodes = nodes(3).await;
    let guard = redlock(&nodes, "lost").lock().await.unwrap();
    assert_eq!(guard.held_nodes(), vec![0, 1, 2]);
    nodes.lose_member(0, "lost").await;
    assert!(!guard.is_lost(), "two of three still held");
    nodes.lose_member(2, "lost").await;
    let q = released_lost(guard).await;
    let failed: Vec<usize> = q.errors.iter().map(|(i, _)| *i).collect();
    assert_eq!(failed, vec![0, 2]);
    assert!(nodes.fields(1, "lost").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_contenders_exactly_one_wins() {
    let nodes = Arc::new(nodes(3).await);
    for (name, wait) in [("ten", Duration::from_secs(3)), ("ten-now", Duration::ZERO)] {
        let winners = contend(nodes.clone(), name, redlock, wait).await;
        if wait.is_zero() {
            // Simultaneous tries may split the votes: never two winners (that some zero-wait
            // try can win at all is checked below).
            assert!(winners <= 1, "{name}: {winners} winners");
        } else {
            assert_eq!(winners, 1, "{name}");
        }
        assert!(nodes.ours_anywhere(name).await.is_empty());
    }
}

#[tokio::test]
async fn unlock_reports_an_unreachable_node_and_releases_the_rest() {
    let mut nodes = nodes(3).await;
    let guard = redlock(&nodes, "partial").lock().await.unwrap();
    nodes.servers[2].kill();
    let q = quorum(guard.unlock().await.unwrap_err());
    assert_eq!(q.operation, QuorumOperation::Unlock);
    assert_eq!((q.acquired, q.required), (2, 3));
    assert_eq!(q.errors.len(), 1);
    assert_eq!(q.errors[0].0, 2);
    for i in [0, 1] {
        assert!(nodes.fields(i, "partial").await.is_empty(), "node {i}");
    }
}

#[tokio::test]
async fn dropped_acquire_leaves_nothing_behind() {
    let nodes = nodes(3).await;
    // Nodes 1 and 2 are busy: the acquire holds node 0 and waits for node 1.
    drop_while_waiting(&nodes, redlock(&nodes, "dropped"), "dropped", &[1, 2]).await;
}

/// Zero-wait tries that split the votes may all lose, but not forever: one alone wins at once.
#[tokio::test]
async fn a_lone_zero_wait_try_wins() {
    let nodes = nodes(3).await;
    let g = redlock(&nodes, "lone")
        .try_lock()
        .await
        .unwrap()
        .expect("a lone try on free nodes lost");
    g.unlock().await.unwrap();
}

/// Mutual exclusion over time: five contenders take the RedLock four times each; never two
/// inside at once, and every acquisition happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contenders_take_turns_one_at_a_time() {
    take_turns(redlock).await;
}
