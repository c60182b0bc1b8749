//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`) of a slot that holds locks while
//! their holders renew and waiters are parked on the slot's unlock channels, sharded
//! (`SSUBSCRIBE`, which the source node ends with an `sunsubscribe` push when the slot leaves)
//! and plain (`SUBSCRIBE`). What the crate owes across the move: no waiter left asleep (the
//! holder's release after the move wakes the waiters by message, well before the 60 s lease
//! that a missed message would leave them to), no hold lost unreported (every hold keeps
//! renewing on the new owner: `is_lost()` false and the key's TTL refreshed there), and no lock
//! granted twice (a contender's tries all through the move take nothing). The cluster runs the
//! pinned Valkey 9.1.2 whatever `REDISSON_LOCK_SERVER` says (`TestCluster::start_valkey9`).
//! docs/guarantees.md (L12) and docs/reliability.md list the class.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::cluster_routing::Slot;
use redisson_lock::{Client, Config, RLock, ShardedPubSub};

use crate::support::cluster::{Node, TestCluster};
use crate::support::{eventually, hold_as_java, subscribed, JAVA_FIELD};

/// The main holder's watchdog lease: a waiter that missed the release message would sleep out
/// the TTL, up to a minute; woken by the message it takes the lock within [`WAKE`].
const LONG: Duration = Duration::from_secs(60);
/// The bound on a wake-up by message, far below what the TTL fallback would take (a renewal
/// period before the release refreshes the TTL to [`LONG`], so the fallback takes 40 s or more).
const WAKE: Duration = Duration::from_secs(15);
/// The short holds' watchdog lease (renewed every 2 s): renewals in flight while the slot moves.
const SHORT: Duration = Duration::from_secs(6);
/// Holds with [`SHORT`] leases in the migrated slot.
const SHORTS: usize = 4;
/// Waiters parked on the main lock's channel before the move (one more parks after it).
const WAITERS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_slot_migration_keeps_holds_and_wakes_sharded_waiters() {
    migrate_held_and_waited_slot(ShardedPubSub::On, "s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_slot_migration_keeps_holds_and_wakes_plain_waiters() {
    migrate_held_and_waited_slot(ShardedPubSub::Off, "p").await;
}

/// A Java release (`DEL`, `SPUBLISH <channel> 0`) sent to the slot's new owner as soon as that
/// node has seen the waiter's next try or its new subscription, whichever comes first: a waiter
/// woken by the `sunsubscribe` push before its subscription follows the slot would try, meet
/// the lock still held, and miss the release (it reaches no subscriber), sleeping out the 60 s
/// lease. The waiter must take the lock within [`WAKE`], and the subscriber must follow the
/// slot on its connection (not replace it: a reconnect wakes every waiter of the client). Each
/// round moves the slot of a fresh lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_the_instant_the_slot_lands_still_wakes_a_sharded_waiter() {
    const ROUNDS: usize = 6;
    let cluster = TestCluster::start_valkey9(0);
    let waiting = client(&cluster, ShardedPubSub::On, LONG).await;
    for round in 0..ROUNDS {
        let name = format!("slotmig:race:{round}");
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let slot = cluster.keyslot(&name);
        let mut at_source = node_conn(cluster.master_of(slot)).await;
        hold_as_java(&mut at_source, &name, JAVA_FIELD).await;
        let waiter = wait_for(&waiting, &name);
        assert!(subscribed(&waiting, 1).await, "round {round}: subscribed");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let connections = subscriber_connections(&[&waiting]);

        let mut at_target = cluster.other_master_of(slot).conn();
        let tries_before = evalsha_calls(&mut at_target);
        cluster.start_slot_migration(slot);
        let released = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                let tried = evalsha_calls(&mut at_target) > tries_before;
                let (_, subscribed): (String, i64) = redis::cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .arg(&channel)
                    .query(&mut at_target)
                    .unwrap();
                if tried || subscribed > 0 {
                    let n: i64 = redis::cmd("DEL").arg(&name).query(&mut at_target).unwrap();
                    assert_eq!(n, 1, "the Java hold moved with the slot");
                    let _: i64 = redis::cmd("SPUBLISH")
                        .arg(&channel)
                        .arg("0")
                        .query(&mut at_target)
                        .unwrap();
                    return Instant::now();
                }
            }
            panic!("neither the waiter's try nor its subscription reached the new owner");
        });
        let released = released.await.unwrap();
        let Ok(joined) = tokio::time::timeout(WAKE, waiter).await else {
            panic!(
                "round {round}: the waiter still asleep {:?} after the release ({:?})",
                released.elapsed(),
                waiting.stats()
            );
        };
        joined.unwrap().unwrap();
        assert_eq!(
            subscriber_connections(&[&waiting]),
            connections,
            "round {round}: the move replaced the subscriber connection instead of following \
             the moved channel"
        );
    }
}

async fn client(cluster: &TestCluster, mode: ShardedPubSub, lease: Duration) -> Client {
    let config = Config::cluster(cluster.urls())
        .with_sharded_pubsub(mode)
        .with_watchdog_timeout(lease);
    Client::with_config(config).await.expect("cluster client")
}

/// `n` lock names (no hash tag: the channel shares the key's slot) in `slot`.
fn names_in_slot(slot: u16, prefix: &str, n: usize) -> Vec<String> {
    let slot = Slot::new(slot).expect("a slot");
    (0u64..)
        .map(|i| format!("{prefix}:{i}"))
        .filter(|name| Slot::for_key(name) == slot)
        .take(n)
        .collect()
}

async fn node_conn(node: &Node) -> redis::aio::MultiplexedConnection {
    redis::Client::open(node.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// `PTTL key` on `raw` (a node's own connection: `-2` when the key is not there).
async fn pttl(raw: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(raw).await.unwrap()
}

/// Asserts that `key`'s TTL on `raw`'s node rises (a renewal reached that node) within
/// `within`: polled every 20 ms, a reading above the one before it by more than the jitter.
async fn renewed_on(raw: &mut redis::aio::MultiplexedConnection, key: &str, within: Duration) {
    let first = pttl(raw, key).await;
    assert!(
        first > 0,
        "{key} is on the new owner with a TTL (PTTL {first})"
    );
    let deadline = Instant::now() + within;
    let mut last = first;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = pttl(raw, key).await;
        if now > last + 200 {
            return;
        }
        assert!(now > 0, "{key} expired on the new owner (PTTL {now})");
        last = now;
    }
    panic!("{key}: no renewal reached the new owner within {within:?} (PTTL was {first})");
}

/// Subscribers of `channel` on `raw`'s node (`PUBSUB SHARDNUMSUB` or `NUMSUB`), for a failure's
/// message.
async fn subscribers(
    raw: &mut redis::aio::MultiplexedConnection,
    channel: &str,
    sharded: bool,
) -> String {
    let sub = if sharded { "SHARDNUMSUB" } else { "NUMSUB" };
    let reply: redis::RedisResult<redis::Value> = redis::cmd("PUBSUB")
        .arg(sub)
        .arg(channel)
        .query_async(raw)
        .await;
    format!("{sub} {reply:?}")
}

/// The subscriber connections each of `clients` has opened so far.
fn subscriber_connections(clients: &[&Client]) -> Vec<u64> {
    clients
        .iter()
        .map(|c| c.stats().subscriber_connections)
        .collect()
}

/// `EVALSHA` calls the node behind `conn` has run (`INFO commandstats`).
fn evalsha_calls(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|v| v.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// A task of `client` that waits for the lock `name`, holds it 100 ms and releases it.
fn wait_for(client: &Client, name: &str) -> tokio::task::JoinHandle<redisson_lock::Result<()>> {
    let lock = client.get_lock(name);
    tokio::spawn(async move {
        let g = lock.lock().await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        g.unlock().await
    })
}

/// `PUBSUB SHARDNUMSUB channel`'s count on `raw`'s node.
async fn shard_subscribers(raw: &mut redis::aio::MultiplexedConnection, channel: &str) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query_async(raw)
        .await
        .unwrap();
    reply.1
}

/// A contender trying every lock in `locks` (held by others all along) until `stop`; how many
/// of its tries took one (a lock granted twice).
fn contend(
    locks: Vec<RLock>,
    stop: Arc<AtomicBool>,
) -> (Arc<AtomicUsize>, tokio::task::JoinHandle<usize>) {
    let taken = Arc::new(AtomicUsize::new(0));
    let count = taken.clone();
    let task = tokio::spawn(async move {
        let mut tries = 0;
        while !stop.load(Ordering::SeqCst) {
            for lock in &locks {
                tries += 1;
                // An error (a redirect not yet followed) takes nothing either.
                if let Ok(Some(g)) = lock.try_lock().await {
                    count.fetch_add(1, Ordering::SeqCst);
                    g.detach();
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tries
    });
    (taken, task)
}

/// The scenario of the module's header in one pub/sub mode (`tag` keeps the modes' names apart).
async fn migrate_held_and_waited_slot(mode: ShardedPubSub, tag: &str) {
    let cluster = TestCluster::start_valkey9(0);
    let holder = client(&cluster, mode, LONG).await;
    let renewer = client(&cluster, mode, SHORT).await;
    let waiting = client(&cluster, mode, LONG).await;
    let late = client(&cluster, mode, LONG).await;
    let contender = client(&cluster, mode, LONG).await;
    let sharded = waiting.is_sharded_pubsub();
    assert_eq!(sharded, mode == ShardedPubSub::On);

    let name = format!("slotmig:{tag}");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let slot = cluster.keyslot(&name);
    assert_eq!(slot, cluster.keyslot(&channel));
    let shorts = names_in_slot(slot, &format!("slotmig:{tag}:short"), SHORTS);

    let held = holder.get_lock(&name).lock().await.unwrap();
    let mut short_held = Vec::new();
    for n in &shorts {
        short_held.push(renewer.get_lock(n).lock().await.unwrap());
    }
    let mut waiters: Vec<_> = (0..WAITERS).map(|_| wait_for(&waiting, &name)).collect();
    assert!(subscribed(&waiting, 1).await, "the waiters subscribed");
    // Both waiters tried and parked (each tries once more after its subscription).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A client whose subscriber (and its slot map) is open before the move, on another slot:
    // it subscribes to the moved slot's channel only after the move.
    let other = format!("slotmig:{tag}:other");
    assert_ne!(cluster.keyslot(&other), slot);
    let other_held = holder.get_lock(&other).lock().await.unwrap();
    let other_waiter = wait_for(&late, &other);
    assert!(
        subscribed(&late, 1).await,
        "the other slot's waiter subscribed"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let all: Vec<RLock> = std::iter::once(&name)
        .chain(&shorts)
        .map(|n| contender.get_lock(n))
        .collect();
    let (taken, contending) = contend(all, stop.clone());
    let connections = subscriber_connections(&[&waiting, &late]);

    let old = cluster.master_of(slot).port;
    let started = Instant::now();
    let new = cluster.migrate_slot_atomically(slot);
    assert_ne!(old, new, "the slot moved");
    let migrated = started.elapsed();
    let new_node = cluster.nodes.iter().find(|n| n.port == new).unwrap();
    let old_node = cluster.nodes.iter().find(|n| n.port == old).unwrap();
    let mut at_new = node_conn(new_node).await;
    let mut at_old = node_conn(old_node).await;

    // Every hold survives and keeps renewing on the new owner.
    for (n, g) in shorts.iter().zip(&short_held) {
        renewed_on(&mut at_new, n, 3 * SHORT).await;
        assert!(!g.is_lost(), "{n}: the short hold was lost in the move");
    }
    renewed_on(&mut at_new, &name, LONG / 3 + Duration::from_secs(8)).await;
    waiters.push(wait_for(&late, &name));
    assert!(
        subscribed(&late, 2).await,
        "the late waiter subscribed after the move"
    );
    if sharded {
        // The old owner dropped its shard channel's subscription; both clients' subscribers
        // are at the new owner.
        let both = eventually(WAKE, || {
            let (mut at_new, mut at_old) = (at_new.clone(), at_old.clone());
            let channel = &channel;
            async move {
                shard_subscribers(&mut at_new, channel).await == 2
                    && shard_subscribers(&mut at_old, channel).await == 0
            }
        });
        assert!(
            both.await,
            "the shard channel's subscribers did not follow the slot: new owner {}, old owner {}",
            subscribers(&mut at_new, &channel, sharded).await,
            subscribers(&mut at_old, &channel, sharded).await,
        );
    }
    assert!(!held.is_lost(), "the main hold was lost in the move");

    stop.store(true, Ordering::SeqCst);
    let tries = contending.await.unwrap();
    assert!(tries > 0);
    assert_eq!(
        taken.load(Ordering::SeqCst),
        0,
        "a contender took a held lock during the move ({tries} tries)"
    );

    // The release after the move wakes the waiters, one after the other, by message.
    let released = Instant::now();
    held.unlock().await.unwrap();
    for (i, w) in waiters.into_iter().enumerate() {
        let left = WAKE.saturating_sub(released.elapsed());
        let Ok(joined) = tokio::time::timeout(left, w).await else {
            panic!(
                "waiter {i} still asleep {:?} after the release (the slot moved in {migrated:?}, \
                 {old} -> {new}): new owner {}, old owner {}, {:?}",
                released.elapsed(),
                subscribers(&mut at_new, &channel, sharded).await,
                subscribers(&mut at_old, &channel, sharded).await,
                waiting.stats(),
            );
        };
        joined.unwrap().unwrap();
    }
    // `late` may open its first subscriber connection only when it first waits (after the
    // move; under load its connect-time one may not be there when `connections` was read):
    // one connection, never a second.
    let after = subscriber_connections(&[&waiting, &late]);
    assert!(
        after[0] == connections[0] && after[1] <= connections[1].max(1),
        "the move replaced a subscriber connection (every channel resubscribed, every waiter \
         woken) instead of following the moved channel: {after:?} after, {connections:?} before"
    );
    for g in short_held {
        g.unlock().await.unwrap();
    }
    other_held.unlock().await.unwrap();
    tokio::time::timeout(WAKE, other_waiter)
        .await
        .expect("the other slot's waiter woken")
        .unwrap()
        .unwrap();
    assert_eq!(pttl(&mut at_new, &name).await, -2, "every hold released");
}
