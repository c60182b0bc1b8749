//! Server-side subscriptions after waiters are done (issue 23, area 3). Waiters of every kind
//! park behind another client's holds; then they either get what they waited for, time out, or
//! are cancelled. Each time the server must end with no subscription of ours: no shard channel
//! (`PUBSUB SHARDCHANNELS`, `SHARDNUMSUB` of the lock channel on its owning master, `CLIENT
//! LIST`'s `ssub=`) on a cluster with sharded pub/sub, no channel (`PUBSUB CHANNELS`, `NUMSUB`,
//! `sub=`) on a standalone server. A leak of one channel per name (an unsubscribe that goes
//! out as the wrong command, or never) fails here. And when a cluster client's subscriber
//! connection is cut, its waiters are still woken by the next release message, long before
//! their holder's TTL.

use std::time::Duration;

use tokio::task::JoinHandle;

use crate::support::cluster::TestCluster;
use crate::support::redisson::tagged;
use crate::support::*;
use redisson_lock::{Client, Config};

/// Generous bound for anything event-driven.
const WAIT: Duration = Duration::from_secs(30);
/// The holders' lease: far longer than any bound here, so only a message wakes a waiter.
const HELD: Duration = Duration::from_secs(120);

/// How the waiters' waits end.
#[derive(Clone, Copy, Debug)]
enum End {
    /// They get what they waited for, then give it back.
    Served,
    /// Their wait times out.
    TimedOut,
    /// Their tasks are aborted while parked.
    Cancelled,
}

/// Where subscriptions are counted: every master's URL, and whether they are sharded.
struct Servers {
    urls: Vec<String>,
    sharded: bool,
}

impl Servers {
    fn conns(&self) -> Vec<redis::Connection> {
        self.urls
            .iter()
            .map(|u| {
                redis::Client::open(u.as_str())
                    .unwrap()
                    .get_connection_with_timeout(Duration::from_secs(5))
                    .unwrap()
            })
            .collect()
    }

    /// (channels with a subscriber, subscriptions counted by `CLIENT LIST`) over every server.
    fn state(&self) -> (usize, i64) {
        let (list, field) = if self.sharded {
            ("SHARDCHANNELS", "ssub=")
        } else {
            ("CHANNELS", "sub=")
        };
        let (mut channels, mut subs) = (0, 0);
        for mut c in self.conns() {
            let ch: Vec<String> = redis::cmd("PUBSUB").arg(list).query(&mut c).unwrap();
            channels += ch.len();
            let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
            subs += clients
                .split_whitespace()
                .filter_map(|kv| kv.strip_prefix(field))
                .map(|n| n.parse::<i64>().unwrap())
                .sum::<i64>();
        }
        (channels, subs)
    }

    /// The lock channel's subscriber count on the server that owns it (`SHARDNUMSUB` summed
    /// over the masters, only the slot's owner can have any; `NUMSUB` standalone).
    fn lock_channel_subscribers(&self, name: &str) -> i64 {
        let channel = format!("redisson_lock__channel:{}", tagged(name));
        let mut total = 0;
        for mut c in self.conns() {
            // A shard channel lives on its slot's master only: the sum is that master's count.
            let cmd = if self.sharded {
                "SHARDNUMSUB"
            } else {
                "NUMSUB"
            };
            let v: Vec<redis::Value> = redis::cmd("PUBSUB")
                .arg(cmd)
                .arg(&channel)
                .query(&mut c)
                .unwrap();
            if let Some(redis::Value::Int(n)) = v.get(1) {
                total += n;
            }
        }
        total
    }

    /// Waits until nothing of ours is subscribed anywhere.
    async fn assert_none(&self, client: &Client, names: &[String], what: &str) {
        let clear = eventually(WAIT, || async {
            let (channels, subs) = self.state();
            channels == 0
                && subs == 0
                && names.iter().all(|n| self.lock_channel_subscribers(n) == 0)
        })
        .await;
        let (channels, subs) = self.state();
        assert!(
            clear,
            "{what}: {channels} channels and {subs} subscriptions left on the server"
        );
        assert_eq!(client.stats().subscribed_channels, 0, "{what}");
    }
}

/// Holds of every kind by `holder`, and one waiter of `client` behind each.
async fn park_all(
    holder: &Client,
    client: &Client,
    tag: &str,
    end: End,
) -> (
    Vec<JoinHandle<()>>,
    Vec<String>,
    impl std::future::Future<Output = ()>,
) {
    let wait = match end {
        End::TimedOut => Some(Duration::from_secs(4)),
        _ => None,
    };
    let names: Vec<String> = ["l", "f", "rw", "sem", "latch", "pes", "{x}l"]
        .iter()
        .map(|k| format!("sub:{tag}:{k}"))
        .collect();
    let (l, f, rw, sem, latch, pes, l2) = (
        &names[0], &names[1], &names[2], &names[3], &names[4], &names[5], &names[6],
    );
    let held_l = holder
        .get_lock(l.as_str())
        .lock_with_lease(HELD)
        .await
        .unwrap();
    let held_l2 = holder
        .get_lock(l2.as_str())
        .lock_with_lease(HELD)
        .await
        .unwrap();
    let held_f = holder
        .get_fair_lock(f.as_str())
        .lock_with_lease(HELD)
        .await
        .unwrap();
    let held_w = holder
        .get_read_write_lock(rw.as_str())
        .write_lock()
        .lock_with_lease(HELD)
        .await
        .unwrap();
    assert!(holder
        .get_semaphore(sem.as_str())
        .try_set_permits(0)
        .await
        .unwrap());
    assert!(holder
        .get_count_down_latch(latch.as_str())
        .try_set_count(1)
        .await
        .unwrap());
    assert!(holder
        .get_permit_expirable_semaphore(pes.as_str())
        .try_set_permits(0)
        .await
        .unwrap());

    let mut tasks = Vec::new();
    for (i, lock) in [client.get_lock(l.as_str()), client.get_lock(l2.as_str())]
        .into_iter()
        .enumerate()
    {
        tasks.push(tokio::spawn(async move {
            match wait {
                Some(w) => assert!(lock.try_lock_for(w).await.unwrap().is_none(), "lock {i}"),
                None => lock.lock().await.unwrap().unlock().await.unwrap(),
            }
        }));
    }
    let fair = client.get_fair_lock(f.as_str());
    tasks.push(tokio::spawn(async move {
        match wait {
            Some(w) => assert!(fair.try_lock_for(w).await.unwrap().is_none()),
            None => fair.lock().await.unwrap().unlock().await.unwrap(),
        }
    }));
    let read = client.get_read_write_lock(rw.as_str()).read_lock();
    tasks.push(tokio::spawn(async move {
        match wait {
            Some(w) => assert!(read.try_lock_for(w).await.unwrap().is_none()),
            None => read.lock().await.unwrap().unlock().await.unwrap(),
        }
    }));
    let s = client.get_semaphore(sem.as_str());
    tasks.push(tokio::spawn(async move {
        match wait {
            Some(w) => assert!(!s.try_acquire_for(w).await.unwrap()),
            None => {
                s.acquire().await.unwrap();
                s.release().await.unwrap();
            }
        }
    }));
    let cdl = client.get_count_down_latch(latch.as_str());
    tasks.push(tokio::spawn(async move {
        match wait {
            Some(w) => assert!(!cdl.wait_for(w).await.unwrap()),
            None => cdl.wait().await.unwrap(),
        }
    }));
    let p = client.get_permit_expirable_semaphore(pes.as_str());
    tasks.push(tokio::spawn(async move {
        match wait {
            Some(w) => assert!(p.try_acquire_for(w).await.unwrap().is_none()),
            None => {
                let id = p.acquire().await.unwrap();
                p.release(&id).await.unwrap();
            }
        }
    }));

    let (holder, sem, latch, pes) = (holder.clone(), sem.clone(), latch.clone(), pes.clone());
    let release = async move {
        held_l.unlock().await.unwrap();
        held_l2.unlock().await.unwrap();
        held_f.unlock().await.unwrap();
        held_w.unlock().await.unwrap();
        holder.get_semaphore(sem.as_str()).release().await.unwrap();
        holder
            .get_count_down_latch(latch.as_str())
            .count_down()
            .await
            .unwrap();
        holder
            .get_permit_expirable_semaphore(pes.as_str())
            .add_permits(1)
            .await
            .unwrap();
    };
    (tasks, names, release)
}

/// One round per way a wait can end; after each, nothing of ours is subscribed.
async fn every_ending_unsubscribes(servers: &Servers, holder: &Client, client: &Client, tag: &str) {
    for end in [End::Served, End::TimedOut, End::Cancelled] {
        let what = format!("{tag}, {end:?}");
        let round = format!("{tag}{end:?}");
        let (tasks, names, release) = park_all(holder, client, &round, end).await;
        // Seven waiters on seven channels, seen by the client and by the server.
        assert!(subscribed(client, 7).await, "{what}: {:?}", client.stats());
        assert!(
            eventually(WAIT, || async { servers.state().0 >= 7 }).await,
            "{what}: the server does not show the waiters' channels: {:?}",
            servers.state()
        );
        assert_eq!(servers.lock_channel_subscribers(&names[0]), 1, "{what}");
        match end {
            End::Served => {
                release.await;
                for t in tasks {
                    tokio::time::timeout(WAIT, t).await.expect(&what).unwrap();
                }
            }
            End::TimedOut => {
                for t in tasks {
                    tokio::time::timeout(WAIT, t).await.expect(&what).unwrap();
                }
                release.await;
            }
            End::Cancelled => {
                for t in &tasks {
                    t.abort();
                }
                for t in tasks {
                    assert!(t.await.unwrap_err().is_cancelled(), "{what}");
                }
                release.await;
            }
        }
        servers.assert_none(client, &names, &what).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_waiters_leave_no_channel_subscribed() {
    let (server, [holder, client]) = two_clients().await;
    let servers = Servers {
        urls: vec![server.url()],
        sharded: false,
    };
    every_ending_unsubscribes(&servers, &holder, &client, "sa").await;
}

/// The masters of `cluster`.
fn masters(cluster: &TestCluster) -> Vec<String> {
    cluster
        .nodes
        .iter()
        .filter(|n| n.info("replication").contains("role:master"))
        .map(|n| n.url())
        .collect()
}

/// Sharded pub/sub (Redis 7 cluster, `ShardedPubSub` auto): no shard channel survives a wait.
pub async fn cluster_waiters_leave_no_shard_channel_subscribed(cluster: &TestCluster) {
    let holder = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let client = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    assert!(
        client.is_sharded_pubsub(),
        "Redis 7 cluster: sharded pub/sub"
    );
    let servers = Servers {
        urls: masters(cluster),
        sharded: true,
    };
    assert_eq!(servers.urls.len(), 3);
    every_ending_unsubscribes(&servers, &holder, &client, "cl").await;
}

/// Kills every connection of the cluster's masters that holds a shard subscription; returns
/// how many were killed.
fn kill_shard_subscribers(servers: &Servers) -> usize {
    let mut killed = 0;
    for mut c in servers.conns() {
        let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        for line in clients.lines() {
            let subscribed = line
                .split_whitespace()
                .filter_map(|kv| kv.strip_prefix("ssub="))
                .any(|n| n != "0");
            if !subscribed {
                continue;
            }
            let id = line
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix("id="))
                .unwrap();
            let n: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query(&mut c)
                .unwrap();
            killed += n as usize;
        }
    }
    killed
}

/// The cluster client's subscriber connection is cut while two waiters are parked behind
/// holds with a two-minute lease. One hold is released at once (its message may be lost with
/// the connection: the reconnect must make the waiter try again), the other after the
/// subscription is back on the server. Both waiters get their lock within a bound far below the
/// holders' TTL: they were woken by the release, not by the expiry.
pub async fn cluster_waiters_survive_a_cut_subscriber(cluster: &TestCluster) {
    let holder = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let client = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let servers = Servers {
        urls: masters(cluster),
        sharded: true,
    };
    let (early, late) = ("cut:early", "{cut}:late");
    let held_early = holder.get_lock(early).lock_with_lease(HELD).await.unwrap();
    let held_late = holder.get_lock(late).lock_with_lease(HELD).await.unwrap();
    let spawn = |name: &'static str| {
        let lock = client.get_lock(name);
        tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) })
    };
    let (w_early, w_late) = (spawn(early), spawn(late));
    assert!(subscribed(&client, 2).await, "{:?}", client.stats());
    assert!(
        eventually(WAIT, || async {
            servers.lock_channel_subscribers(early) == 1
                && servers.lock_channel_subscribers(late) == 1
        })
        .await,
        "both waiters subscribed on the server"
    );
    assert!(
        kill_shard_subscribers(&servers) >= 1,
        "no subscriber connection was cut"
    );
    held_early.unlock().await.unwrap();
    finished(
        w_early,
        WAIT,
        "the early waiter was not woken after the cut",
    )
    .await;
    assert!(
        eventually(WAIT, || async {
            servers.lock_channel_subscribers(late) == 1
        })
        .await,
        "the late waiter's subscription did not come back"
    );
    held_late.unlock().await.unwrap();
    finished(
        w_late,
        WAIT,
        "the late waiter was not woken by the release after the cut",
    )
    .await;
    // Both now hold; release them and nothing stays subscribed.
    for name in [early, late] {
        client
            .get_lock(name)
            .with_owner(redisson_lock::LockOwner::new(0))
            .force_unlock()
            .await
            .unwrap();
    }
    servers
        .assert_none(
            &client,
            &[early.to_owned(), late.to_owned()],
            "after the cut",
        )
        .await;
}
