//! Helpers shared by the MultiLock and RedLock tests: `n` real redis-servers, one client each
//! (independent masters), foreign holders written by hand, and probes of what each node holds.
#![allow(dead_code)]

use std::time::Duration;

use redis::AsyncCommands;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use redisson_lock::{
    Client, Config, LockError, MultiLock, MultiLockGuard, QuorumError, QuorumPolicy, RLock,
};

use crate::support::{eventually, servers, TestServer};

/// How long cleanup after a dropped or failed acquire may take.
pub const SETTLE: Duration = Duration::from_secs(15);

/// The hash field a foreign owner (another Redisson client) writes.
pub const FOREIGN: &str = "0e1f2a3b-aaaa-bbbb-cccc-000000000000:1";

/// Short timeouts so that dead nodes are noticed quickly.
pub fn fast(config: Config) -> Config {
    config
        .with_response_timeout(Duration::from_secs(1))
        .with_connection_timeout(Duration::from_millis(500))
        .with_retry_attempts(2)
        .with_retry_delay(Duration::from_millis(20))
}

/// Independent masters, one client each.
pub struct Nodes {
    pub servers: Vec<TestServer>,
    pub clients: Vec<Client>,
}

pub async fn nodes(n: usize) -> Nodes {
    nodes_with(n, fast).await
}

pub async fn nodes_with(n: usize, config: impl Fn(Config) -> Config) -> Nodes {
    let servers = servers(n);
    let mut clients = Vec::new();
    for s in &servers {
        clients.push(s.client_with(&config).await);
    }
    Nodes { servers, clients }
}

impl Nodes {
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// The lock `name` on every node, in node order.
    pub fn locks(&self, name: &str) -> Vec<RLock> {
        self.clients.iter().map(|c| c.get_lock(name)).collect()
    }

    /// Holds `name` on `node` for a foreign owner, as a Java client would: `HSET` + `PEXPIRE`.
    pub async fn hold_foreign(&self, node: usize, name: &str, ttl: Duration) {
        let mut c = self.servers[node].conn().await;
        let _: () = c.hset(name, FOREIGN, 1).await.unwrap();
        let _: () = c.pexpire(name, ttl.as_millis() as i64).await.unwrap();
    }

    pub async fn foreign_still_holds(&self, node: usize, name: &str) -> bool {
        let mut c = self.servers[node].conn().await;
        c.hexists(name, FOREIGN).await.unwrap()
    }

    /// Every hash field of `name` on `node`.
    pub async fn fields(&self, node: usize, name: &str) -> Vec<String> {
        let mut c = self.servers[node].conn().await;
        c.hkeys(name).await.unwrap()
    }

    /// Fields of `name` on `node` written by our client of that node.
    pub async fn ours(&self, node: usize, name: &str) -> Vec<String> {
        let id = self.clients[node].id().to_owned();
        self.fields(node, name)
            .await
            .into_iter()
            .filter(|f| f.starts_with(&id))
            .collect()
    }

    pub async fn pttl(&self, node: usize, name: &str) -> i64 {
        let mut c = self.servers[node].conn().await;
        c.pttl(name).await.unwrap()
    }

    /// Nodes among `live` where one of our fields of `name` remains.
    pub async fn nodes_with_ours(&self, live: &[usize], name: &str) -> Vec<usize> {
        let mut found = Vec::new();
        for &i in live {
            if !self.ours(i, name).await.is_empty() {
                found.push(i);
            }
        }
        found
    }

    /// Nodes where one of our fields of `name` remains, among all of them.
    pub async fn ours_anywhere(&self, name: &str) -> Vec<usize> {
        self.nodes_with_ours(&self.all(), name).await
    }

    /// Whether none of our fields of `name` remains on any node within `within`.
    pub async fn none_ours_within(&self, name: &str, within: Duration) -> bool {
        crate::support::eventually(within, || async {
            self.ours_anywhere(name).await.is_empty()
        })
        .await
    }

    /// The member key `name` on `node` vanishes behind the holder's back and that node's client
    /// renews now, so the holder learns of it.
    pub async fn lose_member(&self, node: usize, name: &str) {
        self.delete(node, name).await;
        self.clients[node].renew_now().await;
    }

    /// A foreign owner holds `name` on each of the nodes `busy` for a minute.
    pub async fn hold_foreign_on(&self, busy: &[usize], name: &str) {
        for &i in busy {
            self.hold_foreign(i, name, Duration::from_secs(60)).await;
        }
    }

    /// Whether the foreign owner still holds `name` on every node of `busy`.
    pub async fn foreign_kept(&self, busy: &[usize], name: &str) -> bool {
        for &i in busy {
            if !self.foreign_still_holds(i, name).await {
                return false;
            }
        }
        true
    }

    pub async fn delete(&self, node: usize, name: &str) {
        let mut c = self.servers[node].conn().await;
        let _: () = c.del(name).await.unwrap();
    }

    pub fn all(&self) -> Vec<usize> {
        (0..self.len()).collect()
    }
}

/// Asserts that `guard` reports its hold lost (and `lost()` resolves), then releases it: the
/// release's quorum error.
pub async fn released_lost(guard: MultiLockGuard) -> QuorumError {
    assert!(guard.is_lost());
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .unwrap();
    quorum(guard.unlock().await.unwrap_err())
}

/// The quorum detail of an error, or a panic naming the unexpected error.
pub fn quorum(e: LockError) -> QuorumError {
    match e {
        LockError::Quorum(q) => q,
        other => panic!("expected a quorum error, got {other:?}"),
    }
}

/// A 60 s `try_lock_for` of `m` that must fail well before its wait ends (a dead member is
/// an error, not a reason to wait); its quorum detail.
pub async fn fails_fast<P: QuorumPolicy>(m: MultiLock<P>) -> QuorumError {
    let started = std::time::Instant::now();
    let err = m.try_lock_for(Duration::from_secs(60)).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "failed fast, not at the end of the wait"
    );
    quorum(err)
}

/// Nodes of `0..n` that are in `mask`.
pub fn members(mask: u32, n: usize) -> Vec<usize> {
    (0..n).filter(|i| mask & (1 << i) != 0).collect()
}

/// `tasks` contenders each take the lock `rounds` times (trying again until they get it) and
/// hold it for a moment, counting who is inside. Returns (most holders inside at once,
/// acquisitions): mutual exclusion means exactly 1 and `tasks * rounds`.
pub async fn exclusion<P: QuorumPolicy + 'static>(
    nodes: Arc<Nodes>,
    name: &'static str,
    make: fn(&Nodes, &str) -> MultiLock<P>,
    tasks: usize,
    rounds: usize,
) -> (usize, usize) {
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let wins = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (nodes, inside, most, wins) =
                (nodes.clone(), inside.clone(), most.clone(), wins.clone());
            tokio::spawn(async move {
                let m = make(&nodes, name);
                for _ in 0..rounds {
                    let guard = loop {
                        if let Some(g) = m.try_lock_for(Duration::from_secs(2)).await.unwrap() {
                            break g;
                        }
                    };
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    wins.fetch_add(1, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.await.unwrap();
    }
    (most.load(Ordering::SeqCst), wins.load(Ordering::SeqCst))
}

/// The "take turns" scenario on three fresh nodes: five contenders take the lock four times
/// each; never two inside at once, every acquisition happens, nothing of ours is left.
pub async fn take_turns<P: QuorumPolicy + 'static>(make: fn(&Nodes, &str) -> MultiLock<P>) {
    let nodes = Arc::new(nodes(3).await);
    let (most, wins) = exclusion(nodes.clone(), "turns", make, 5, 4).await;
    assert_eq!(most, 1, "two holders at once");
    assert_eq!(wins, 20);
    assert!(nodes
        .nodes_with_ours(&nodes.all(), "turns")
        .await
        .is_empty());
}

/// Ten tasks contend at once; the winner keeps the lock until everyone has answered.
pub async fn contend<P: QuorumPolicy + 'static>(
    nodes: Arc<Nodes>,
    name: &'static str,
    make: fn(&Nodes, &str) -> MultiLock<P>,
    wait: Duration,
) -> usize {
    let start = Arc::new(tokio::sync::Barrier::new(10));
    let done = Arc::new(tokio::sync::Barrier::new(10));
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (nodes, start, done) = (nodes.clone(), start.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let m = make(&nodes, name);
            start.wait().await;
            let got = m.try_lock_for(wait).await.unwrap();
            done.wait().await;
            let won = got.is_some();
            if let Some(g) = got {
                g.unlock().await.unwrap();
            }
            won
        }));
    }
    let mut winners = 0;
    for t in tasks {
        winners += usize::from(t.await.unwrap());
    }
    winners
}

/// Drops an acquire of `lock` while it holds member 0 and waits for the first of `busy` (held
/// by a foreign owner): nothing of ours may remain on any node, and the foreign holds stay.
pub async fn drop_while_waiting<P: QuorumPolicy + 'static>(
    nodes: &Nodes,
    lock: MultiLock<P>,
    name: &str,
    busy: &[usize],
) {
    for &i in busy {
        nodes.hold_foreign(i, name, Duration::from_secs(60)).await;
    }
    let task = tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(60)).await });
    assert!(
        eventually(Duration::from_secs(10), || async {
            !nodes.ours(0, name).await.is_empty()
        })
        .await
    );
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(
        eventually(SETTLE, || async {
            nodes.nodes_with_ours(&nodes.all(), name).await.is_empty()
        })
        .await
    );
    for &i in busy {
        assert!(nodes.foreign_still_holds(i, name).await);
    }
}

/// The Redlock hazard the fault tests provoke: A holds a majority on nodes 0 and 1, then B,
/// after node 0 forgot or expired A's member, takes a second majority on nodes 0 and 2. Both
/// guards believe they hold it, which no client-side check can see; both are released.
pub async fn assert_double_grant(a: MultiLockGuard, b: MultiLockGuard) {
    assert_eq!(b.held_nodes(), vec![0, 2]);
    assert!(a.remaining_validity().unwrap() > Duration::ZERO);
    assert!(b.remaining_validity().unwrap() > Duration::ZERO);
    assert!(!a.is_lost());
    let _ = b.unlock().await;
    let _ = a.unlock().await;
}
