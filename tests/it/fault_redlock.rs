//! RedLock under node faults injected through the test proxy: three independent masters, one
//! proxy in front of each. Scenarios T23 and T24 of docs/reliability.md (T22, the quorum truth
//! table, lives in tests/it/redlock.rs).

use std::time::{Duration, Instant};

use crate::support::proxy::{Mode, Proxy};
use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{Client, Config, MultiLockGuard, RedLock};

const BOUND: Duration = Duration::from_secs(30);
const NODE_TIMEOUT: Duration = Duration::from_millis(300);

struct Nodes {
    servers: Vec<TestServer>,
    proxies: Vec<Proxy>,
}

impl Nodes {
    async fn start(n: usize) -> Nodes {
        let servers = servers(n);
        let mut proxies = Vec::new();
        for s in &servers {
            proxies.push(Proxy::start(s.port).await);
        }
        Nodes { servers, proxies }
    }

    /// One client per node, through the proxies.
    async fn clients(&self) -> Vec<Client> {
        let mut clients = Vec::new();
        for p in &self.proxies {
            let config = Config::new(p.url())
                .with_response_timeout(Duration::from_secs(1))
                .with_connection_timeout(Duration::from_secs(1));
            clients.push(Client::with_config(config).await.unwrap());
        }
        clients
    }

    /// One client per node, straight to the servers.
    async fn direct_clients(&self) -> Vec<Client> {
        let mut clients = Vec::new();
        for s in &self.servers {
            clients.push(s.client().await);
        }
        clients
    }

    /// Which nodes hold key `name` right now.
    async fn holding(&self, name: &str) -> Vec<usize> {
        let mut v = Vec::new();
        for (i, s) in self.servers.iter().enumerate() {
            let mut c = s.conn().await;
            if c.exists::<_, bool>(name).await.unwrap() {
                v.push(i);
            }
        }
        v
    }

    /// Heals the partition, then asserts that no node holds key `name` within [`BOUND`]; `what`
    /// says what a key left means.
    async fn heal_leaving_nothing(&self, name: &str, what: &str) {
        self.heal();
        assert!(
            eventually(BOUND, || async { self.holding(name).await.is_empty() }).await,
            "{what}: {:?}",
            self.holding(name).await
        );
    }

    /// Every proxy passes traffic again (the partition heals).
    fn heal(&self) {
        for p in &self.proxies {
            p.set(Mode::Pass);
        }
    }
}

/// `red` taken within 5 s with `lease`; `why` says why it must be.
async fn taken(red: &RedLock, lease: Duration, why: &str) -> MultiLockGuard {
    red.try_lock_with_lease(Duration::from_secs(5), lease)
        .await
        .unwrap()
        .expect(why)
}

/// `red`, free again, is taken on all three nodes and released.
async fn taken_on_every_node(red: &RedLock, lease: Duration, why: &str) {
    let g = taken(red, lease, why).await;
    assert_eq!(g.held_nodes().len(), 3);
    g.unlock().await.unwrap();
}

/// Tries `red` for `wait` with `lease`, which must answer within [`BOUND`] (`hang` says what
/// a hang means); its result.
async fn try_within_bound(
    red: &RedLock,
    wait: Duration,
    lease: Duration,
    hang: &str,
) -> Result<Option<MultiLockGuard>, redisson_lock::LockError> {
    tokio::time::timeout(BOUND, red.try_lock_with_lease(wait, lease))
        .await
        .expect(hang)
}

/// Three nodes behind proxies and the RedLock `name` over them (see [`redlock`]).
async fn redlock_on_three(name: &str) -> (Nodes, RedLock) {
    let nodes = Nodes::start(3).await;
    let red = redlock(&nodes.clients().await, name);
    (nodes, red)
}

fn redlock(clients: &[Client], name: &str) -> RedLock {
    RedLock::new(clients.iter().map(|c| c.get_lock(name)))
        .unwrap()
        .with_node_timeout(NODE_TIMEOUT)
}

/// T23: one of three nodes blackholed. The RedLock is still taken (2 of 3) with a positive
/// validity, excludes a second RedLock contender, and once released and healed no member key is
/// left anywhere (the request held by the partition and delivered late is undone or expires).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_a_minority_blackholed_is_taken_and_exclusive() {
    let name = "fault:redlock-minority";
    let lease = Duration::from_secs(5);
    let (nodes, red) = redlock_on_three(name).await;

    nodes.proxies[0].set(Mode::Blackhole);
    let started = Instant::now();
    let guard = taken(&red, lease, "a majority was reachable").await;
    assert!(started.elapsed() < BOUND);
    let held = guard.held_nodes();
    assert_eq!(held, vec![1, 2], "{held:?}");
    assert!(guard.remaining_validity().unwrap() > Duration::ZERO);
    assert_eq!(nodes.holding(name).await, vec![1, 2]);

    // A second contender (reaching every node directly) cannot form a quorum.
    let others = nodes.direct_clients().await;
    let rival = redlock(&others, name);
    let r = rival
        .try_lock_with_lease(Duration::from_millis(500), lease)
        .await;
    assert!(!matches!(r, Ok(Some(_))), "two RedLock holders at once");

    guard.unlock().await.unwrap();
    nodes
        .heal_leaving_nothing(name, "member keys left behind")
        .await;
    // And the rival gets it now.
    taken_on_every_node(&rival, lease, "free RedLock not taken").await;
}

/// T23 with a dead node: one of three servers SIGKILLed; the RedLock is still taken, in about
/// the node timeout rather than a whole response timeout per attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_a_minority_killed_is_taken() {
    let name = "fault:redlock-killed";
    let (mut nodes, red) = redlock_on_three(name).await;
    nodes.servers[2].kill();
    let g = taken(&red, Duration::from_secs(5), "a majority was alive").await;
    assert_eq!(g.held_nodes(), vec![0, 1]);
    // Releasing reports the dead node or not, but frees the live ones.
    let _ = g.unlock().await;
    for s in &nodes.servers[..2] {
        let mut c = s.conn().await;
        assert!(!c.exists::<_, bool>(name).await.unwrap());
    }
}

/// T24: two of three nodes blackholed. The RedLock is refused promptly (an error or `None`,
/// never a hang), and keeps nothing on the reachable node; after the partition heals, no member
/// key is left anywhere and the lock can be taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_a_majority_blackholed_fails_fast_and_leaves_nothing() {
    let name = "fault:redlock-majority";
    let lease = Duration::from_secs(5);
    let (nodes, red) = redlock_on_three(name).await;

    nodes.proxies[0].set(Mode::Blackhole);
    nodes.proxies[1].set(Mode::Blackhole);
    let started = Instant::now();
    let r = try_within_bound(
        &red,
        Duration::from_secs(2),
        lease,
        "RedLock hung with a majority of nodes partitioned",
    )
    .await;
    match r {
        Ok(Some(g)) => panic!("RedLock taken without a majority: {:?}", g.held_nodes()),
        Ok(None) => {}
        Err(e) => assert!(e.is_quorum() || e.is_connection_error(), "{e}"),
    }
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        eventually(BOUND, || async { !nodes.holding(name).await.contains(&2) }).await,
        "the reachable member was kept"
    );

    nodes
        .heal_leaving_nothing(name, "member keys left behind after healing")
        .await;
    taken_on_every_node(&red, lease, "RedLock not taken after healing").await;
}

/// T25: one node answers slower than the node timeout (the proxy delays each chunk by twice
/// the node timeout). It counts as failed; the other two form the quorum with validity left, and
/// the slow node's late acquire does not outlive the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_a_slow_node_treats_it_as_failed() {
    let name = "fault:redlock-slow";
    let lease = Duration::from_secs(5);
    let (nodes, red) = redlock_on_three(name).await;
    nodes.proxies[0].set(Mode::Delay(NODE_TIMEOUT * 2));
    let g = taken(&red, lease, "a fast majority was there").await;
    assert_eq!(g.held_nodes(), vec![1, 2]);
    assert!(g.remaining_validity().unwrap() > Duration::ZERO);
    g.unlock().await.unwrap();
    nodes
        .heal_leaving_nothing(name, "member keys left behind")
        .await;
}

/// T9 (Redlock step 3): every reply comes back later than the lease itself, so by the time the
/// quorum is confirmed the lock may already have expired. The acquire must be refused and every
/// member given back: stale "OK" replies never make a holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_whose_replies_arrive_after_the_lease_is_refused() {
    let nodes = Nodes::start(3).await;
    let clients = nodes.clients().await;
    let name = "fault:redlock-late";
    let lease = Duration::from_millis(800);
    let red = RedLock::new(clients.iter().map(|c| c.get_lock(name)))
        .unwrap()
        .with_node_timeout(Duration::from_secs(5));
    for p in &nodes.proxies {
        p.set(Mode::Delay(Duration::from_millis(500)));
    }
    let r = try_within_bound(
        &red,
        Duration::from_secs(2),
        lease,
        "RedLock hung on slow replies",
    )
    .await;
    if let Ok(Some(g)) = r {
        panic!(
            "RedLock granted after its validity ran out: nodes {:?}, validity {:?}",
            g.held_nodes(),
            g.remaining_validity()
        );
    }
    nodes
        .heal_leaving_nothing(name, "member keys left behind")
        .await;
}

/// T26 without a restart guard (the hazard, documented): A holds a RedLock on nodes 0 and 1
/// (node 2 partitioned from A). Node 0 restarts empty. B then takes nodes 0 and 2: a second
/// majority while A's is still valid. The crate has no delayed-restart guard; this test pins
/// that the hazard is real, so the docs keep saying so (docs/reliability.md, docs/redlock.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_node_restarted_empty_allows_a_second_majority() {
    let mut nodes = Nodes::start(3).await;
    let a_clients = nodes.clients().await;
    let name = "fault:redlock-restart";
    let lease = Duration::from_secs(20);
    nodes.proxies[2].set(Mode::Blackhole);
    let a = taken(
        &redlock(&a_clients, name),
        lease,
        "A should get nodes 0 and 1",
    )
    .await;
    assert_eq!(a.held_nodes(), vec![0, 1]);

    nodes.servers[0].restart();
    let b_clients = nodes.direct_clients().await;
    let b = redlock(&b_clients, name)
        .try_lock_with_lease(Duration::from_secs(2), lease)
        .await
        .unwrap();
    let b = b.expect("with node 0 forgotten, B finds a second majority (the F4 hazard)");
    crate::multi_support::assert_double_grant(a, b).await;
    nodes.heal();
}

/// T21: a MultiLock (all members) whose second node is partitioned at release time. The release
/// reports which node failed, frees the reachable members at once, and the partitioned member is
/// released once the partition heals (or expires with its lease), never kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multilock_release_with_a_node_partitioned_reports_it_and_frees_the_rest() {
    let nodes = Nodes::start(3).await;
    let clients = nodes.clients().await;
    let name = "fault:multilock-release";
    let multi: redisson_lock::MultiLock =
        redisson_lock::MultiLock::new(clients.iter().map(|c| c.get_lock(name)))
            .unwrap()
            .with_node_timeout(NODE_TIMEOUT);
    let g = multi
        .try_lock_with_lease(Duration::from_secs(5), Duration::from_secs(10))
        .await
        .unwrap()
        .expect("all nodes were up");
    assert_eq!(g.held_nodes(), vec![0, 1, 2]);

    nodes.proxies[1].set(Mode::Blackhole);
    let err = tokio::time::timeout(BOUND, g.unlock())
        .await
        .expect("release hung on a partitioned node")
        .expect_err("a release that could not reach node 1 reported success");
    match &err {
        redisson_lock::LockError::Quorum(q) => {
            assert_eq!(
                q.errors.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
                vec![1]
            );
            assert_eq!((q.acquired, q.required), (2, 3));
        }
        other => panic!("expected a quorum error, got {other}"),
    }
    assert_eq!(nodes.holding(name).await, vec![1]);
    nodes
        .heal_leaving_nothing(name, "node 1 kept the member")
        .await;
}
