//! Area 1: refusals when one subscription command carries several channels. Waiters on four
//! locks park at once, so that their channels go to the server in one `SUBSCRIBE` (their
//! subscriber connection is held out by the fault proxy while they register, and its first
//! pass subscribes them all), or come back in one resubscription after the subscriber
//! connection is killed and the ACL changed meanwhile. The server's ACL refuses one channel
//! (the third of four, in the order the registry sends them), so it refuses the whole command.
//! Every waiter must get its own truth: the refused channel's waiter `ChannelDenied` (at once,
//! not at its deadline), each other waiter subscribed for real (`PUBSUB NUMSUB`, `CLIENT LIST`'s
//! `sub=`) and woken by its own release from another client, long before the holder's 120 s
//! lease would have woken it, and unsubscribed once it is done.
//!
//! Bugs these catch: every channel of a refused batch marked refused; the refused one marked
//! confirmed (or left pending, its waiter asleep); refusals matched to the wrong names (an
//! off-by-one); channels confirmed by the one-by-one retry left out of the connection's active
//! set (never unsubscribed); a waiter already parked when its channel is refused on a
//! resubscription never told (asleep until its lease); the same on a cluster with sharded
//! pub/sub (`SSUBSCRIBE`, checked with `PUBSUB SHARDNUMSUB`).

use std::time::Duration;

use redisson_lock::{Client, Config, LockError, LockGuard, Reentrant};
use tokio::task::JoinHandle;

use crate::java::sync_ops::{calls_at_least, SCRIPTS};
use crate::support::cluster::TestCluster;
use crate::support::proxy::{Mode, Proxy};
use crate::support::redisson::{channel, reset_stats, sem_channel};
use crate::support::{eventually, kill_subscribers, numsub_on, rejected_calls, TestServer};

/// The holders' lease: a waiter no message wakes sleeps until it ends.
const HOLDER_LEASE: Duration = Duration::from_secs(120);
/// The waiters' budget: far beyond every bound of the test.
const PATIENCE: Duration = Duration::from_secs(300);
/// A refusal must reach its waiter within this bound (its budget is minutes).
const REFUSED_WITHIN: Duration = Duration::from_secs(60);
/// A waiter must have its lock within this bound after its release.
const WOKEN_WITHIN: Duration = Duration::from_secs(20);
/// A generous bound for server-side state to settle.
const WITHIN: Duration = Duration::from_secs(30);
/// The restricted user.
const USER: &str = "mc";
/// The lock names; the third one's channel is the refused one.
const NAMES: [&str; 4] = ["mc:a", "mc:b", "mc:c", "mc:d"];
const REFUSED: usize = 2;

/// `ACL SETUSER mc`: every command and key, and the channels of `NAMES` but those in `deny`.
fn acl_rule(deny: &[usize]) -> Vec<String> {
    let granted: Vec<String> = (0..NAMES.len())
        .filter(|i| !deny.contains(i))
        .map(|i| channel(NAMES[i]))
        .collect();
    acl_rule_for(&granted)
}

/// `ACL SETUSER mc`: every command and key, and exactly the channels `granted`.
fn acl_rule_for(granted: &[String]) -> Vec<String> {
    let mut rule: Vec<String> = ["on", ">pw", "+@all", "~*", "resetchannels"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    rule.extend(granted.iter().map(|c| format!("&{c}")));
    rule
}

async fn set_user(server: &TestServer, deny: &[usize]) {
    set_rule(server, acl_rule(deny)).await;
}

async fn set_rule(server: &TestServer, rule: Vec<String>) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(USER)
        .arg(rule)
        .query_async(&mut server.conn().await)
        .await
        .unwrap();
}

/// The `sub=` counts of user `mc`'s pub/sub connections (`CLIENT LIST`).
async fn pubsub_clients(server: &TestServer) -> Vec<u64> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut server.conn().await)
        .await
        .unwrap();
    list.lines()
        .filter(|l| l.split(' ').any(|f| f == format!("user={USER}")))
        .filter_map(|l| {
            let sub: u64 = l
                .split(' ')
                .find_map(|f| f.strip_prefix("sub="))?
                .parse()
                .ok()?;
            let flags = l.split(' ').find_map(|f| f.strip_prefix("flags="))?;
            (flags.contains('P') || sub > 0).then_some(sub)
        })
        .collect()
}

type Waiter = JoinHandle<redisson_lock::Result<Option<LockGuard<Reentrant>>>>;

fn spawn_waiters(client: &Client) -> Vec<Waiter> {
    NAMES
        .iter()
        .map(|n| {
            let lock = client.get_lock(*n);
            tokio::spawn(async move { lock.try_lock_for(PATIENCE).await })
        })
        .collect()
}

/// The refused channel's waiter fails with `ChannelDenied` naming its channel, long before
/// its budget runs out.
async fn refused(waiter: Waiter, what: &str) {
    let r = tokio::time::timeout(REFUSED_WITHIN, waiter)
        .await
        .unwrap_or_else(|_| panic!("{what}: the refused channel's waiter was never told"))
        .unwrap();
    match r {
        Err(LockError::ChannelDenied { channel: c, detail }) => {
            assert_eq!(c, channel(NAMES[REFUSED]), "{what}");
            assert!(detail.contains("NOPERM"), "{what}: {detail}");
        }
        Err(e) => panic!("{what}: the refused waiter got {e:?}, not ChannelDenied"),
        Ok(Some(_)) => panic!("{what}: the refused waiter got a held lock"),
        Ok(None) => panic!("{what}: the refusal ended as a timed-out wait"),
    }
}

/// Server-side truth: each granted channel has exactly one subscriber (ours), the refused one
/// none, and `mc` has one pub/sub connection subscribed to three channels.
async fn subscribed_for_real(server: &TestServer, what: &str) {
    for (i, n) in NAMES.iter().enumerate() {
        let want = i64::from(i != REFUSED);
        let ok = eventually(WITHIN, || async {
            numsub_on(server, &channel(n)).await == want
        })
        .await;
        assert!(
            ok,
            "{what}: {} has {} subscribers, {want} expected",
            channel(n),
            numsub_on(server, &channel(n)).await
        );
    }
    assert_eq!(pubsub_clients(server).await, [3], "{what}: CLIENT LIST");
}

/// Releases each granted lock from the holders' client, one at a time: its own waiter (and no
/// other) gets it, by the message, then gives it back and its channel is unsubscribed.
async fn each_woken_by_its_release(
    server: &TestServer,
    holds: &mut [Option<LockGuard<Reentrant>>],
    waiters: &mut [Option<Waiter>],
    what: &str,
) {
    for i in (0..NAMES.len()).filter(|i| *i != REFUSED) {
        for (j, w) in waiters.iter().enumerate() {
            if let Some(w) = w {
                assert!(
                    !w.is_finished(),
                    "{what}: waiter {j} ended before its release"
                );
            }
        }
        holds[i].take().unwrap().unlock().await.unwrap();
        let w = waiters[i].take().unwrap();
        let guard = tokio::time::timeout(WOKEN_WITHIN, w)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{what}: the waiter on {} was not woken by its release (its holder's lease \
                     is {HOLDER_LEASE:?})",
                    NAMES[i]
                )
            })
            .unwrap()
            .unwrap()
            .expect("timed out");
        guard.unlock().await.unwrap();
        let gone = eventually(WITHIN, || async {
            numsub_on(server, &channel(NAMES[i])).await == 0
        })
        .await;
        assert!(gone, "{what}: {} still subscribed after its wait", NAMES[i]);
    }
}

/// The holders: another client holds every lock with a 120 s lease.
async fn hold_all(admin: &Client) -> Vec<Option<LockGuard<Reentrant>>> {
    let mut holds = Vec::new();
    for n in NAMES {
        holds.push(Some(
            admin
                .get_lock(n)
                .lock_with_lease(HOLDER_LEASE)
                .await
                .unwrap(),
        ));
    }
    holds
}

/// `mc`'s client through the proxy (its subscriber can be held out) with a subscription
/// timeout beyond the test's bounds.
async fn restricted_client(proxy: &Proxy) -> Client {
    Client::with_config(
        Config::new(format!("redis://{USER}:pw@127.0.0.1:{}/", proxy.port))
            .with_subscription_timeout(PATIENCE),
    )
    .await
    .unwrap()
}

/// Four waiters register while their subscriber cannot connect; its first connection
/// subscribes all four in one `SUBSCRIBE`, which the server refuses for the third channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_parking_at_once_each_get_their_own_truth() {
    let server = TestServer::start();
    set_user(&server, &[REFUSED]).await;
    let admin = server.client().await;
    let mut holds = hold_all(&admin).await;
    let proxy = Proxy::start(server.port).await;
    let client = restricted_client(&proxy).await;
    reset_stats(&server).await;

    // The command connection is up; the subscriber's first connection is refused for now.
    proxy.set(Mode::Refuse);
    let waiters = spawn_waiters(&client);
    let registered = eventually(WITHIN, || async {
        client.stats().subscribed_channels == NAMES.len()
    })
    .await;
    assert!(
        registered,
        "the waiters never registered: {:?}",
        client.stats()
    );
    assert_eq!(client.stats().subscriber_connections, 0);
    proxy.set(Mode::Pass);

    let mut waiters: Vec<Option<Waiter>> = waiters.into_iter().map(Some).collect();
    refused(waiters[REFUSED].take().unwrap(), "first subscription").await;
    subscribed_for_real(&server, "first subscription").await;
    // They shared one command: the server refused it whole, then the refused channel alone.
    assert!(
        rejected_calls(&server, "subscribe").await >= 2,
        "the channels did not go in one SUBSCRIBE (rejected {})",
        rejected_calls(&server, "subscribe").await
    );
    // Each tried, subscribed, tried again: now only a message wakes it.
    calls_at_least(&server, &SCRIPTS, 2 * 3 + 1, "first subscription").await;
    each_woken_by_its_release(&server, &mut holds, &mut waiters, "first subscription").await;
    assert_eq!(
        client.stats().subscriber_connections,
        1,
        "a refusal is not a broken connection"
    );
}

/// Four waiters parked on granted channels; their subscriber connection is killed, and while
/// it is held out the ACL withdraws the third channel. The resubscription carries all four in
/// one `SUBSCRIBE`; the parked waiter whose channel is now refused must be told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resubscription_refused_for_one_channel_gives_each_waiter_its_own_truth() {
    let server = TestServer::start();
    set_user(&server, &[]).await;
    let admin = server.client().await;
    let mut holds = hold_all(&admin).await;
    let proxy = Proxy::start(server.port).await;
    let client = restricted_client(&proxy).await;
    reset_stats(&server).await;
    let waiters = spawn_waiters(&client);
    for n in NAMES {
        let ok = eventually(WITHIN, || async {
            numsub_on(&server, &channel(n)).await == 1
        })
        .await;
        assert!(ok, "{n}: never subscribed");
    }
    calls_at_least(&server, &SCRIPTS, 2 * 4, "parked").await;
    let before = client.stats().subscriber_connections;

    // The subscriber connection is cut and held out while the ACL changes.
    proxy.set(Mode::Refuse);
    assert!(
        kill_subscribers(&server).await >= 1,
        "no subscriber to kill"
    );
    for n in NAMES {
        let ok = eventually(WITHIN, || async {
            numsub_on(&server, &channel(n)).await == 0
        })
        .await;
        assert!(ok, "{n}: still subscribed after the kill");
    }
    set_user(&server, &[REFUSED]).await;
    reset_stats(&server).await;
    proxy.set(Mode::Pass);
    let back = eventually(WITHIN, || async {
        client.stats().subscriber_connections > before
    })
    .await;
    assert!(back, "the subscriber never reconnected");

    let mut waiters: Vec<Option<Waiter>> = waiters.into_iter().map(Some).collect();
    refused(waiters[REFUSED].take().unwrap(), "resubscription").await;
    subscribed_for_real(&server, "resubscription").await;
    assert!(
        rejected_calls(&server, "subscribe").await >= 2,
        "the channels did not go in one SUBSCRIBE (rejected {})",
        rejected_calls(&server, "subscribe").await
    );
    // Woken by the reconnect, each tried again: now only a message wakes it.
    calls_at_least(&server, &SCRIPTS, 3, "resubscription").await;
    each_woken_by_its_release(&server, &mut holds, &mut waiters, "resubscription").await;
}

/// `PUBSUB SHARDNUMSUB channel`, summed over every node (each counts its own subscribers).
fn shard_subscribers(cluster: &TestCluster, channel: &str) -> i64 {
    cluster
        .nodes
        .iter()
        .map(|node| {
            let (_, n): (String, i64) = redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg(channel)
                .query(&mut node.conn())
                .unwrap();
            n
        })
        .sum()
}

async fn shard_subscribers_are(cluster: &TestCluster, channel: &str, n: i64) -> bool {
    eventually(WITHIN, || async {
        shard_subscribers(cluster, channel) == n
    })
    .await
}

/// On a cluster with sharded pub/sub (`SSUBSCRIBE`, one channel per command): four waiters
/// parked; every node's pub/sub connections are killed after the ACL withdraws the third
/// channel, so the resubscription pass carries all four names and one is refused. The refused
/// waiter is told, the others are subscribed on their shards and woken by their releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_resubscription_refused_for_one_channel_gives_each_waiter_its_own_truth() {
    let cluster = TestCluster::start(0);
    let set_user = |deny: &[usize]| {
        for node in &cluster.nodes {
            let _: () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg(USER)
                .arg(acl_rule(deny))
                .query(&mut node.conn())
                .unwrap();
        }
    };
    set_user(&[]);
    let urls: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("redis://{USER}:pw@127.0.0.1:{}/", n.port))
        .collect();
    let admin = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let client = Client::with_config(Config::cluster(urls).with_subscription_timeout(PATIENCE))
        .await
        .unwrap();
    assert!(
        client.is_sharded_pubsub(),
        "Redis 7+ clusters shard pub/sub"
    );
    let mut holds = hold_all(&admin).await;
    let waiters = spawn_waiters(&client);
    for n in NAMES {
        assert!(
            shard_subscribers_are(&cluster, &channel(n), 1).await,
            "{n}: never subscribed"
        );
    }
    let before = client.stats().subscriber_connections;

    set_user(&[REFUSED]);
    let mut killed = 0;
    for node in &cluster.nodes {
        killed += redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query::<i64>(&mut node.conn())
            .unwrap();
    }
    let back = eventually(WITHIN, || async {
        client.stats().subscriber_connections > before
    })
    .await;
    assert!(back, "the subscriber never reconnected (killed {killed})");

    let mut waiters: Vec<Option<Waiter>> = waiters.into_iter().map(Some).collect();
    refused(waiters[REFUSED].take().unwrap(), "sharded resubscription").await;
    for (i, n) in NAMES.iter().enumerate() {
        let want = i64::from(i != REFUSED);
        assert!(
            shard_subscribers_are(&cluster, &channel(n), want).await,
            "{n}: {} shard subscribers, {want} expected",
            shard_subscribers(&cluster, &channel(n))
        );
    }
    for i in (0..NAMES.len()).filter(|i| *i != REFUSED) {
        holds[i].take().unwrap().unlock().await.unwrap();
        let w = waiters[i].take().unwrap();
        let guard = tokio::time::timeout(WOKEN_WITHIN, w)
            .await
            .unwrap_or_else(|_| panic!("the waiter on {} was not woken by its release", NAMES[i]))
            .unwrap()
            .unwrap()
            .expect("timed out");
        guard.unlock().await.unwrap();
        assert!(
            shard_subscribers_are(&cluster, &channel(NAMES[i]), 0).await,
            "{} still subscribed after its wait",
            NAMES[i]
        );
    }
}

/// The same for a semaphore waiter (the synchronizers' wait loop): parked beside a lock waiter
/// on granted channels; the subscriber connection is killed and, while it is held out, the ACL
/// withdraws the semaphore's channel. The resubscription carries both channels in one
/// `SUBSCRIBE`; the semaphore waiter is told (not left polling until its budget ends), the
/// lock waiter is subscribed and woken by its release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_waiter_refused_on_a_resubscription_is_told() {
    let server = TestServer::start();
    let (lock_name, sem_name) = (NAMES[0], "mc:s");
    let granted = [channel(lock_name), sem_channel(sem_name)];
    set_rule(&server, acl_rule_for(&granted)).await;
    let admin = server.client().await;
    let hold = admin
        .get_lock(lock_name)
        .lock_with_lease(HOLDER_LEASE)
        .await
        .unwrap();
    assert!(admin
        .get_semaphore(sem_name)
        .try_set_permits(0)
        .await
        .unwrap());
    let proxy = Proxy::start(server.port).await;
    let client = restricted_client(&proxy).await;
    let lock_waiter = {
        let lock = client.get_lock(lock_name);
        tokio::spawn(async move { lock.try_lock_for(PATIENCE).await })
    };
    let sem_waiter = {
        let sem = client.get_semaphore(sem_name);
        tokio::spawn(async move { sem.try_acquire_for(PATIENCE).await })
    };
    for c in &granted {
        let ok = eventually(WITHIN, || async { numsub_on(&server, c).await == 1 }).await;
        assert!(ok, "{c}: never subscribed");
    }
    let before = client.stats().subscriber_connections;

    proxy.set(Mode::Refuse);
    assert!(
        kill_subscribers(&server).await >= 1,
        "no subscriber to kill"
    );
    for c in &granted {
        let ok = eventually(WITHIN, || async { numsub_on(&server, c).await == 0 }).await;
        assert!(ok, "{c}: still subscribed after the kill");
    }
    set_rule(&server, acl_rule_for(&granted[..1])).await;
    reset_stats(&server).await;
    proxy.set(Mode::Pass);
    let back = eventually(WITHIN, || async {
        client.stats().subscriber_connections > before
    })
    .await;
    assert!(back, "the subscriber never reconnected");

    let r = tokio::time::timeout(REFUSED_WITHIN, sem_waiter)
        .await
        .expect("the semaphore waiter whose channel was refused was never told")
        .unwrap();
    match r {
        Err(LockError::ChannelDenied { channel: c, detail }) => {
            assert_eq!(c, granted[1]);
            assert!(detail.contains("NOPERM"), "{detail}");
        }
        other => panic!("the refused semaphore waiter got {other:?}, not ChannelDenied"),
    }
    let ok = eventually(WITHIN, || async {
        numsub_on(&server, &granted[0]).await == 1
    })
    .await;
    assert!(ok, "the lock waiter's channel is not subscribed again");
    assert_eq!(numsub_on(&server, &granted[1]).await, 0);
    assert_eq!(pubsub_clients(&server).await, [1], "CLIENT LIST");
    assert!(
        rejected_calls(&server, "subscribe").await >= 2,
        "the channels did not go in one SUBSCRIBE (rejected {})",
        rejected_calls(&server, "subscribe").await
    );
    calls_at_least(&server, &SCRIPTS, 1, "resubscription").await;
    assert!(
        !lock_waiter.is_finished(),
        "the lock waiter ended before its release"
    );
    hold.unlock().await.unwrap();
    let guard = tokio::time::timeout(WOKEN_WITHIN, lock_waiter)
        .await
        .expect("the lock waiter was not woken by its release")
        .unwrap()
        .unwrap()
        .expect("timed out");
    guard.unlock().await.unwrap();
}
