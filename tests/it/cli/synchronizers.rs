//! The synchronizers' write commands, checked through the crate's own API (what a Java client
//! would read): semaphore permits, a permit-expirable semaphore's permit released by id, a
//! latch counted down (its waiter woken) and deleted, a rate limiter's window reset.

use std::time::Duration;

use crate::cli::*;
use crate::support::*;
use redisson_lock::RateType;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_and_permit_semaphore_permits_are_set_added_and_released() {
    let (server, client) = with_client().await;
    let sem = client.get_semaphore("cli:sem-w");
    let v = json(args(&server, &["semaphore", "set", "cli:sem-w", "5"])).await;
    assert_eq!(
        (v["count"].clone(), v["changed"].clone()),
        (5.into(), true.into())
    );
    assert_eq!(sem.available_permits().await.unwrap(), 5);
    json(args(&server, &["semaphore", "set", "cli:sem-w", "2"])).await;
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    json(args(&server, &["semaphore", "add", "cli:sem-w", "3"])).await;
    let v = json(args(&server, &["semaphore", "add", "cli:sem-w", "-1"])).await;
    assert_eq!(v["count"], 4);
    assert_eq!(sem.available_permits().await.unwrap(), 4);

    let pes = client.get_permit_expirable_semaphore("cli:pes-w");
    assert!(pes.try_set_permits(2).await.unwrap());
    let id = pes
        .with_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    assert_eq!(pes.available_permits().await.unwrap(), 1);
    let release = args(
        &server,
        &["permit-semaphore", "release", "cli:pes-w", id.as_str()],
    );
    let v = json(release.clone()).await;
    assert_eq!(
        (v["changed"].clone(), v["count"].clone()),
        (true.into(), 2.into())
    );
    assert_eq!(pes.available_permits().await.unwrap(), 2);
    let v = json(release).await;
    assert_eq!(v["changed"], false, "released already");
    json(args(
        &server,
        &["permit-semaphore", "set", "cli:pes-w", "7"],
    ))
    .await;
    assert_eq!(pes.available_permits().await.unwrap(), 7);
    json(args(
        &server,
        &["permit-semaphore", "add", "cli:pes-w", "1"],
    ))
    .await;
    assert_eq!(pes.available_permits().await.unwrap(), 8);

    let bad = cli(&args(
        &server,
        &["permit-semaphore", "release", "cli:pes-w", "nope"],
    ))
    .await;
    assert_eq!(bad.code, 1, "{}", bad.stderr);
    assert!(bad.stderr.contains("32 hex"), "{}", bad.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_count_down_wakes_its_waiter_and_delete_removes_it() {
    let (server, client) = with_client().await;
    let latch = client.get_count_down_latch("cli:latch-w");
    assert!(latch.try_set_count(2).await.unwrap());
    let l = latch.clone();
    let waiter = tokio::spawn(async move { l.wait().await });
    wait_subscribers(
        &server,
        "redisson_countdownlatch__channel__{cli:latch-w}",
        1,
    )
    .await;
    let v = json(args(&server, &["latch", "count-down", "cli:latch-w"])).await;
    assert_eq!(v["count"], 1);
    json(args(&server, &["latch", "count-down", "cli:latch-w"])).await;
    finished(waiter, WAIT, "the latch waiter was not woken").await;

    assert!(latch.try_set_count(3).await.unwrap());
    let v = json(args(&server, &["latch", "delete", "cli:latch-w"])).await;
    assert_eq!(v["changed"], true);
    assert_eq!(latch.get_count().await.unwrap(), 0);
    let v = json(args(&server, &["latch", "delete", "cli:latch-w"])).await;
    assert_eq!(v["changed"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limiter_reset_starts_a_fresh_window_and_delete_removes_it() {
    let (server, client) = with_client().await;
    let limiter = client.get_rate_limiter("cli:rate-w");
    limiter
        .set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            2,
            Duration::from_secs(3600),
        ))
        .await
        .unwrap();
    limiter.acquire_many(2).await.unwrap();
    assert_eq!(limiter.available_permits().await.unwrap(), 0);
    let v = json(args(&server, &["rate-limiter", "reset", "cli:rate-w"])).await;
    assert_eq!(v["count"], 2);
    assert_eq!(limiter.available_permits().await.unwrap(), 2);

    let missing = cli(&args(&server, &["rate-limiter", "reset", "cli:rate-none"])).await;
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("not a configured rate limiter"),
        "{}",
        missing.stderr
    );

    // `delete`: every key Redisson names goes (the configuration and the OVERALL window), so
    // a client's acquire now fails as on a limiter never configured; a second delete changes
    // nothing.
    let v = json(args(&server, &["rate-limiter", "delete", "cli:rate-w"])).await;
    assert_eq!(v["action"], "delete");
    assert_eq!(v["changed"], true);
    assert!(limiter.config().await.unwrap().is_none());
    let mut raw = server.conn().await;
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("*cli:rate-w*")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(left.is_empty(), "keys left after delete: {left:?}");
    assert!(limiter.try_acquire().await.is_err());
    let v = json(args(&server, &["rate-limiter", "delete", "cli:rate-w"])).await;
    assert_eq!(v["changed"], false);
}
