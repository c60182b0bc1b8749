//! The lease watchdog, measured from Redis and through a fault proxy (issue 10): renewals come
//! every third of the lease, and a guard's validity counts from when a renewal was *sent*, less
//! Redlock's drift allowance, never from when its reply came back.

use std::time::{Duration, Instant};

use crate::support::proxy::{proxied, Mode};
use crate::support::*;
use redis::AsyncCommands;

/// Under renewal the key's TTL never falls much below 2/3 of the lease: renewing every lease/3
/// keeps it above that, every lease/2 lets it fall to 1/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_keep_the_ttl_above_two_thirds_of_the_lease() {
    let lease = Duration::from_secs(6);
    let (_server, client, mut raw) = fixture_with(|c| c.with_watchdog_timeout(lease)).await;
    let guard = client.get_lock("wd:period").lock().await.unwrap();
    let mut lowest = i64::MAX;
    let until = Instant::now() + Duration::from_millis(8_500); // four renewal periods
    while Instant::now() < until {
        let ttl: i64 = raw.pttl("wd:period").await.unwrap();
        lowest = lowest.min(ttl);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // 2/3 of 6 s is 4 s; 600 ms of slack for a late tick on a loaded machine (lease/2: 3 s).
    assert!(lowest >= 3_400, "the TTL fell to {lowest} ms under renewal");
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}

/// With every reply delayed (not the requests' effect), confirmations come late. Validity counts
/// from the send: the server applied the renewal no later than the reply says, but possibly as
/// early as the send, so the guard must give up when send + lease (less drift) passes without a
/// newer confirmed send. Counting from the reply would keep it "valid" forever here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validity_counts_from_the_send_not_the_reply() {
    let lease = Duration::from_millis(1_500);
    let (_server, proxy, client) = proxied(|c| c.with_watchdog_timeout(lease)).await;
    let guard = client.get_lock("wd:send").lock().await.unwrap();
    // A fresh confirmed renewal first, so the guard starts the delayed phase fully valid (the
    // gap before the watchdog's first tick must not be what makes it lost).
    client.renew_now().await;
    // 400 ms each way: a renewal is confirmed 800 ms after it was sent and the next one is sent
    // 500 ms later, so confirmed sends are 1.3 s apart and each is confirmed 2.1 s after the
    // previous send: past the 1.48 s validity counted from the send, inside it from the reply.
    proxy.set(Mode::Delay(Duration::from_millis(400)));
    let lost = tokio::time::timeout(Duration::from_secs(8), guard.lost()).await;
    assert!(
        lost.is_ok(),
        "renewals confirmed 800 ms after their send kept the guard valid"
    );
    assert!(guard.is_lost());
    proxy.set(Mode::Pass);
}

/// The drift allowance: with renewals cut off right after a confirmed one, the guard is lost
/// before send + lease (by 1 % + 2 ms), not at it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validity_ends_a_drift_allowance_before_the_lease() {
    let lease = Duration::from_secs(5);
    let drift = lease / 100 + Duration::from_millis(2); // 52 ms
    let (_server, proxy, client) = proxied(|c| c.with_watchdog_timeout(lease)).await;
    let guard = client.get_lock("wd:drift").lock().await.unwrap();
    let before = Instant::now();
    client.renew_now().await;
    let after = Instant::now();
    proxy.set(Mode::Blackhole);
    // The confirmed renewal was sent in [before, after]: valid until at most
    // after + lease - drift. Check halfway into the allowance.
    let check = after + lease - drift / 2;
    tokio::time::sleep_until(check.into()).await;
    assert!(
        guard.is_lost(),
        "still valid {:?} after the last confirmed send (lease {lease:?}, drift {drift:?})",
        check - before
    );
    if after - before >= drift / 2 {
        eprintln!(
            "note: renew_now took {:?}; the drift check was not sharp",
            after - before
        );
    }
    proxy.set(Mode::Pass);
}

/// Script calls the server has run so far (EVAL and EVALSHA).
async fn script_calls(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
    info(raw, "commandstats")
        .await
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// `Config::with_watchdog_batch_size` (Redisson's `lockWatchdogBatchSize`): five watchdog
/// holds renewed two per script take three scripts, and every one of them is renewed; a batch
/// size of 0 is refused before connecting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_go_in_batches_of_the_configured_size() {
    // A lease so long that the watchdog's own tick (every 100 s) never comes during the test.
    let lease = Duration::from_secs(300);
    let (server, client, mut raw) =
        fixture_with(|c| c.with_watchdog_timeout(lease).with_watchdog_batch_size(2)).await;
    assert_eq!(client.config().watchdog_batch_size(), 2);
    let names: Vec<String> = (0..5).map(|i| format!("wd:batch:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.get_lock(name.as_str()).lock().await.unwrap());
    }
    // Shorter TTLs, so that each renewal shows.
    for name in &names {
        let _: () = raw.pexpire(name, 100_000).await.unwrap();
    }
    let before = script_calls(&mut raw).await;
    client.renew_now().await;
    let sent = script_calls(&mut raw).await - before;
    assert_eq!(sent, 3, "5 holds in batches of 2");
    for name in &names {
        let ttl: i64 = raw.pttl(name).await.unwrap();
        assert!(ttl > 200_000, "{name} was not renewed: PTTL {ttl}");
    }
    for g in guards {
        g.unlock().await.unwrap();
    }

    let e = redisson_lock::Client::with_config(server.config().with_watchdog_batch_size(0))
        .await
        .unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    assert_eq!(
        redisson_lock::Config::new("redis://x/").watchdog_batch_size(),
        redisson_lock::DEFAULT_WATCHDOG_BATCH_SIZE
    );
}

/// A renewal that fails (its reply lost, the connection closed: as after a failover, when the
/// new master is not reachable yet) is tried again about a second later, not a whole period
/// later: the hold's fate is not left to the next regular tick. With a 30 s lease (period 10 s)
/// the first pass loses its reply; another renewal must reach the server well before the
/// next regular pass would (10 s after the first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_renewal_is_tried_again_before_the_next_period() {
    let (server, proxy, client) =
        proxied(|c| c.with_watchdog_timeout(Duration::from_secs(30))).await;
    let mut raw = server.conn().await;
    let guard = client.get_lock("wd:retry").lock().await.unwrap();
    proxy.drop_reply_after(b"wd:retry");
    assert!(
        proxy.wait_dropped(1, Duration::from_secs(30)).await,
        "the first renewal pass never came"
    );
    let failed_at = Instant::now();
    let calls = script_calls(&mut raw).await;
    let retried = eventually(Duration::from_secs(6), || {
        let mut raw = raw.clone();
        async move { script_calls(&mut raw).await > calls }
    })
    .await;
    assert!(
        retried,
        "no renewal within {:?} of the failed one (the next regular pass is 10 s after it)",
        failed_at.elapsed()
    );
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}
