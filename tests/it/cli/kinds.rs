//! `inspect`/`list`/`force-unlock` on the kinds Redisson 4.x added: the non-reentrant locks
//! share the RLock and fair-lock data (so they show as `reentrant` / `fair`, and force-unlock
//! wakes their waiters the same way), and the synchronizers' TTLs show in `ttl_ms`.

use std::time::Duration;

use crate::cli::{args, cli, json, lock_channel, wait_subscribers, WAIT};
use crate::support::*;
use redisson_lock::LockOwner;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_locks_show_as_their_reentrant_data_and_force_unlock_wakes() {
    let (server, holder) = with_client().await;
    let plain = holder
        .get_non_reentrant_lock("cli:nr")
        .lock()
        .await
        .unwrap();
    let v = json(args(&server, &["inspect", "cli:nr"])).await;
    assert_eq!(v["kind"], "reentrant", "{v}");
    assert_eq!(
        v["holders"][0]["owner"],
        field(&holder, plain.owner()).as_str()
    );
    assert_eq!(v["holders"][0]["count"], 1);
    let v = json(args(&server, &["list", "cli:nr*"])).await;
    assert_eq!(crate::cli::listed(&v)[0]["kind"], "reentrant", "{v}");

    // A non-reentrant fair lock with a queued waiter: the fair data, and force-unlock wakes the
    // head on its own channel long before the holder's 30 s watchdog lease would.
    let _fair = holder
        .get_non_reentrant_fair_lock("cli:nrf")
        .lock()
        .await
        .unwrap();
    let other = server.client().await;
    let waiter_field = field(&other, LockOwner::new(9));
    let lock = other
        .get_non_reentrant_fair_lock("cli:nrf")
        .with_owner(LockOwner::new(9));
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) });
    wait_subscribers(
        &server,
        &format!("{}:{waiter_field}", lock_channel("cli:nrf")),
        1,
    )
    .await;
    let v = json(args(&server, &["inspect", "cli:nrf"])).await;
    assert_eq!(v["kind"], "fair", "{v}");
    assert_eq!(v["queue"][0]["owner"], waiter_field.as_str());
    let out = cli(&args(&server, &["force-unlock", "cli:nrf", "--yes"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    tokio::time::timeout(WAIT, waiter)
        .await
        .expect("the queue head was not woken")
        .unwrap()
        .unwrap();
    let v = json(args(&server, &["inspect", "cli:nrf"])).await;
    assert_eq!(v["holders"][0]["owner"], waiter_field.as_str(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronizer_ttls_and_batches_show_in_inspect() {
    let (server, client) = with_client().await;
    let sem = client.get_semaphore("cli:ttl-sem");
    assert!(sem
        .try_set_permits_with_ttl(4, Duration::from_secs(3600))
        .await
        .unwrap());
    let v = json(args(&server, &["inspect", "cli:ttl-sem"])).await;
    assert_eq!(v["kind"], "semaphore_or_latch", "{v}");
    assert_eq!(v["count"], 4);
    let ttl = v["ttl_ms"].as_i64().unwrap();
    assert!(ttl > 0 && ttl <= 3_600_000, "{v}");

    let gpus = client.get_permit_expirable_semaphore("cli:ttl-pes");
    gpus.try_set_permits(3).await.unwrap();
    let ids = gpus
        .with_lease(Duration::from_secs(600))
        .acquire_many(2)
        .await
        .unwrap();
    assert!(gpus.expire(Duration::from_secs(3600)).await.unwrap());
    let v = json(args(&server, &["inspect", "cli:ttl-pes"])).await;
    assert_eq!(v["kind"], "permit_semaphore", "{v}");
    assert_eq!(v["count"], 1);
    let shown: Vec<&str> = v["permits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    for id in &ids {
        assert!(shown.contains(&id.as_str()), "{id} not in {v}");
    }
    assert!(v["ttl_ms"].as_i64().unwrap() > 0, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limiter_shows_its_rate_and_window_and_force_unlock_leaves_it_alone() {
    use redisson_lock::RateType;
    let (server, client) = with_client().await;
    let limiter = client.get_rate_limiter("cli:rate");
    assert!(limiter
        .try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            5,
            Duration::from_secs(60)
        ))
        .await
        .unwrap());
    assert!(limiter.try_acquire_many(2).await.unwrap());
    let v = json(args(&server, &["inspect", "cli:rate"])).await;
    assert_eq!(v["kind"], "rate_limiter", "{v}");
    assert_eq!(v["value"]["rate"], 5, "{v}");
    assert_eq!(v["value"]["interval_ms"], 60_000, "{v}");
    assert_eq!(v["value"]["type"], "OVERALL", "{v}");
    // What is left of the window, as Redisson's availablePermits would say.
    assert_eq!(
        v["count"],
        limiter.available_permits().await.unwrap(),
        "{v}"
    );
    assert_eq!(v["count"], 3, "{v}");
    let human = cli(&args(&server, &["inspect", "cli:rate"])).await;
    assert!(human.stdout.contains("rate_limiter"), "{}", human.stdout);
    assert!(
        human.stdout.contains("3 left in the current window"),
        "{}",
        human.stdout
    );

    // Not a lock: force-unlock refuses and the configuration stays.
    let out = cli(&args(&server, &["force-unlock", "cli:rate", "--yes"])).await;
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(out.stderr.contains("rate limiter"), "{}", out.stderr);
    assert!(limiter.config().await.unwrap().is_some());

    // A PER_CLIENT limiter has a window per client: no shared count is shown.
    let per_client = client.get_rate_limiter("cli:rate-pc");
    assert!(per_client
        .try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::PerClient,
            2,
            Duration::from_secs(60)
        ))
        .await
        .unwrap());
    let v = json(args(&server, &["inspect", "cli:rate-pc"])).await;
    assert_eq!(v["kind"], "rate_limiter", "{v}");
    assert_eq!(v["value"]["type"], "PER_CLIENT", "{v}");
    assert!(v["count"].is_null(), "{v}");
}
