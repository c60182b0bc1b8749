//! `inspect`: each kind as the crate leaves its data, waiters, queues, read holds, tokens.

use crate::cli::*;
use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::LockOwner;
use serde_json::Value;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_a_reentrant_hold_with_its_count_ttl_and_owner() {
    let (server, client) = with_client().await;
    let lock = client.get_lock("cli:orders");
    let (outer, inner) = held_twice(&lock).await;
    let owner = field(&client, outer.owner());

    let v = json(args(&server, &["inspect", "cli:orders"])).await;
    assert_eq!(v["name"], "cli:orders");
    assert_eq!(v["kind"], "reentrant");
    assert_eq!(v["redis_type"], "hash");
    let ttl = v["ttl_ms"].as_i64().unwrap();
    assert!(ttl > 0 && ttl <= 30_000, "ttl {ttl}");
    assert_eq!(v["holders"].as_array().unwrap().len(), 1);
    assert_eq!(v["holders"][0]["owner"], owner.as_str());
    assert_eq!(v["holders"][0]["count"], 2);
    assert_eq!(v["holders"][0]["role"], "exclusive");
    assert_eq!(v["token"], Value::Null);
    assert_eq!(v["channels"][0], lock_channel("cli:orders").as_str());
    assert_eq!(v["waiters"], 0);

    let human = cli(&args(&server, &["inspect", "cli:orders"])).await;
    assert_eq!(human.code, 0);
    assert!(human.stdout.contains("reentrant"), "{}", human.stdout);
    assert!(
        human.stdout.contains(&format!("{owner}  exclusive  x2")),
        "{}",
        human.stdout
    );
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_of_a_missing_key_says_not_locked_and_unknown_keys_show_their_value() {
    let server = TestServer::start();
    let v = json(args(&server, &["inspect", "cli:nothing"])).await;
    assert_eq!(v["name"], "cli:nothing");
    assert_eq!(v["kind"], Value::Null);
    assert_eq!(v["holders"].as_array().unwrap().len(), 0);
    let human = cli(&args(&server, &["inspect", "cli:nothing"])).await;
    assert_eq!(human.code, 0);
    assert!(human.stdout.contains("not locked"), "{}", human.stdout);

    // A string that is no synchronizer's: reported as it is, never mistaken for a lock.
    let mut raw = server.conn().await;
    let _: () = raw.set("cli:note", "hello").await.unwrap();
    let v = json(args(&server, &["inspect", "cli:note"])).await;
    assert_eq!(v["kind"], "unknown");
    assert_eq!(v["redis_type"], "string");
    assert_eq!(v["value"], "hello");
    assert_eq!(v["ttl_ms"], -1);
}

/// Redisson's synchronizers, detected from their data as the crate leaves it: a permit
/// semaphore by its `{NAME}:timeout` zset (permits with their leases), a semaphore or a latch by
/// whose channel has waiters (Redisson stores both as an integer string), neither when nobody
/// waits; force-unlock leaves them alone and `list` shows them only with `--all`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_tells_the_synchronizers_apart() {
    let (server, client) = with_client().await;

    let pes = client.get_permit_expirable_semaphore("cli:pes");
    assert!(pes.try_set_permits(3).await.unwrap());
    let leased = pes
        .with_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    let forever = pes.acquire().await.unwrap();
    let v = json(args(&server, &["inspect", "cli:pes"])).await;
    assert_eq!(v["kind"], "permit_semaphore");
    assert_eq!(v["count"], 1);
    let permits = v["permits"].as_array().unwrap();
    assert_eq!(permits.len(), 2, "{v}");
    let lease_of = |id: &str| {
        permits
            .iter()
            .find(|p| p["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in {v}"))["lease_ms"]
            .clone()
    };
    let lease = lease_of(leased.as_str()).as_i64().unwrap();
    assert!(lease > 500_000 && lease <= 600_000, "{lease}");
    assert_eq!(lease_of(forever.as_str()), Value::Null);
    assert_eq!(v["channels"], serde_json::json!(["redisson_sc:{cli:pes}"]));
    let human = cli(&args(&server, &["inspect", "cli:pes"])).await;
    assert!(
        human.stdout.contains("permits  1 available"),
        "{}",
        human.stdout
    );
    assert!(
        human.stdout.contains(&format!("{forever}  no lease")),
        "{}",
        human.stdout
    );

    // A semaphore with a waiter, a latch with a waiter, and an integer nobody waits on.
    let sem = client.get_semaphore("cli:sem");
    sem.try_set_permits(0).await.unwrap();
    let s = sem.clone();
    let sem_waiter = tokio::spawn(async move { s.acquire().await });
    let latch = client.get_count_down_latch("cli:latch");
    latch.try_set_count(2).await.unwrap();
    let l = latch.clone();
    let latch_waiter = tokio::spawn(async move { l.wait().await });
    wait_subscribers(&server, "redisson_sc:{cli:sem}", 1).await;
    wait_subscribers(&server, "redisson_countdownlatch__channel__{cli:latch}", 1).await;
    let v = json(args(&server, &["inspect", "cli:sem"])).await;
    assert_eq!(
        (v["kind"].clone(), v["count"].clone()),
        ("semaphore".into(), 0.into())
    );
    assert_eq!(v["waiters"], 1);
    let v = json(args(&server, &["inspect", "cli:latch"])).await;
    assert_eq!(
        (v["kind"].clone(), v["count"].clone()),
        ("count_down_latch".into(), 2.into())
    );
    assert_eq!(v["waiters"], 1);
    let mut raw = server.conn().await;
    let _: () = raw.set("cli:quiet", "5").await.unwrap();
    let v = json(args(&server, &["inspect", "cli:quiet"])).await;
    assert_eq!(v["kind"], "semaphore_or_latch");
    assert_eq!(v["count"], 5);

    // Not locks: force-unlock refuses and changes nothing; list shows them with --all only.
    let out = cli(&args(&server, &["force-unlock", "cli:sem", "--yes"])).await;
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("not a lock"), "{}", out.stderr);
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    let v_list = json(args(&server, &["list", "cli:*"])).await;
    assert_eq!(listed(&v_list).len(), 0, "{v_list}");
    let all = listed(&json(args(&server, &["list", "cli:*", "--all"])).await);
    let kinds: Vec<&str> = all.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"permit_semaphore") && kinds.contains(&"semaphore"),
        "{kinds:?}"
    );

    sem.release().await.unwrap();
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    finished(sem_waiter, WAIT, "semaphore waiter").await;
    finished(latch_waiter, WAIT, "latch waiter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_counts_the_waiters_subscribed_on_the_unlock_channel() {
    let server = TestServer::start();
    let (_holder, guard, waiter) = held_with_waiter(&server, "cli:busy").await;

    let v = json(args(&server, &["inspect", "cli:busy"])).await;
    assert_eq!(v["waiters"], 1);
    guard.unlock().await.unwrap();
    finished(waiter, WAIT, "the task did not finish in time").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_a_fair_lock_queue_and_force_unlock_wakes_its_head() {
    let (server, holder) = with_client().await;
    let guard = holder.get_fair_lock("cli:fair").lock().await.unwrap();
    let other = server.client().await;
    let waiter_field = field(&other, LockOwner::new(7));
    let lock = other
        .get_fair_lock("cli:fair")
        .with_owner(LockOwner::new(7));
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) });
    let waiter_channel = format!("{}:{waiter_field}", lock_channel("cli:fair"));
    wait_subscribers(&server, &waiter_channel, 1).await;

    let v = json(args(&server, &["inspect", "cli:fair"])).await;
    assert_eq!(v["kind"], "fair");
    assert_eq!(
        v["holders"][0]["owner"],
        field(&holder, guard.owner()).as_str()
    );
    assert_eq!(v["queue"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["queue"][0]["owner"], waiter_field.as_str());
    // Redisson's default fairLockWaitTimeout is 5 minutes; the deadline is ahead.
    let left = v["queue"][0]["timeout_ms"].as_i64().unwrap();
    assert!(left > 0 && left <= 400_000, "timeout_ms {left}");
    assert!(v["channels"]
        .as_array()
        .unwrap()
        .contains(&Value::from(waiter_channel)));
    assert_eq!(v["waiters"], 1);

    // force-unlock wakes the queue head on its own channel (Redisson's fair forceUnlock); the
    // holder's 30 s lease would end the wait only well after WAIT.
    let out = cli(&args(&server, &["force-unlock", "cli:fair", "--yes"])).await;
    assert!(out.stdout.contains("unlocked"), "{}", out.stdout);
    finished(waiter, WAIT, "the queued waiter was not woken").await;
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_two_readers_with_their_timeout_keys() {
    let (server, client) = with_client().await;
    let rw = client.get_read_write_lock("cli:rw");
    let mut readers = Vec::new();
    for owner in [1, 2] {
        let read = rw.read_lock().with_owner(LockOwner::new(owner));
        readers.push(read.lock().await.unwrap());
    }

    let v = json(args(&server, &["inspect", "cli:rw"])).await;
    assert_eq!(v["kind"], "read_write");
    assert_eq!(v["mode"], "read");
    let holders = v["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 2);
    for (h, owner) in holders.iter().zip([1, 2]) {
        assert_eq!(h["owner"], field(&client, LockOwner::new(owner)).as_str());
        assert_eq!(h["role"], "read");
        assert_eq!(h["count"], 1);
        let timeouts = h["read_timeouts_ms"].as_array().unwrap();
        assert_eq!(timeouts.len(), 1);
        assert!(timeouts[0].as_i64().unwrap() > 0, "{h}");
    }
    assert_eq!(v["channels"][0], "redisson_rwlock:{cli:rw}");
    for r in readers {
        r.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_the_fencing_token() {
    let (server, client) = with_client().await;
    let lock = client.get_fenced_lock("cli:fenced");
    lock.lock().await.unwrap().unlock().await.unwrap();
    let guard = lock.lock().await.unwrap();
    let v = json(args(&server, &["inspect", "cli:fenced"])).await;
    assert_eq!(v["kind"], "fenced");
    assert_eq!(v["token"], guard.token());
    assert_eq!(v["token"], 2);
    guard.unlock().await.unwrap();
}
