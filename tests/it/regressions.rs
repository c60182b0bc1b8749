//! Regression tests for bugs found after they landed.

use std::time::Duration;

use crate::support::{
    take_and_release, take_and_release_with_lease, with_client, TestServer, SPLIT_NAMES,
};
use redisson_lock::{Client, Config};

/// `try_lock_for(Duration::MAX)` and huge leases used to panic on `Instant + Duration`
/// overflow (found by the MultiLock work).
#[tokio::test]
async fn huge_waits_and_leases_do_not_panic() {
    let (server, client) = with_client().await;
    let lock = client.get_lock("huge");
    let g = lock
        .try_lock_for(Duration::MAX)
        .await
        .unwrap()
        .expect("free lock");
    g.unlock().await.unwrap();
    let err = lock.lock_with_lease(Duration::MAX).await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let err = lock
        .try_lock_with_lease(Duration::MAX, Duration::MAX)
        .await
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let g = lock
        .lock_with_lease(Duration::from_secs(365 * 24 * 3600))
        .await
        .unwrap();
    g.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    let err = Client::with_config(Config::new(server.url()).with_watchdog_timeout(Duration::MAX))
        .await
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
}

async fn evalsha_calls(server: &TestServer) -> u64 {
    crate::support::redisson::calls(server, "evalsha").await
}

/// A release used to wake two local waiters: one directly, one by the echo of its own `0`
/// message, whose try was wasted (found by the benchmarks: 2.99 scripts per acquisition with
/// many waiters). Now a release costs its own script plus exactly one waiter's try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_one_local_waiter_not_two() {
    use redisson_lock::LockOwner;
    let (server, client) = with_client().await;
    let lease = Duration::from_secs(60);
    let lock = client.get_lock("one-wake");
    // Load the scripts first: a NOSCRIPT round counts as an EVALSHA call too.
    take_and_release_with_lease(&lock, lease).await;
    let held = lock
        .with_owner(LockOwner::new(1))
        .lock_with_lease(lease)
        .await
        .unwrap();
    let before = evalsha_calls(&server).await;
    let mut waiters = Vec::new();
    for id in [2, 3] {
        let l = lock.with_owner(LockOwner::new(id));
        waiters.push(tokio::spawn(async move {
            l.lock_with_lease(lease).await.unwrap().detach()
        }));
    }
    // Each waiter tries once, subscribes, tries again, then sleeps on the channel.
    assert!(
        crate::support::eventually(Duration::from_secs(10), || async {
            evalsha_calls(&server).await >= before + 4
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let parked = evalsha_calls(&server).await;
    assert_eq!(parked, before + 4, "waiters sleep, they do not poll");
    held.unlock().await.unwrap();
    assert!(
        crate::support::eventually(Duration::from_secs(10), || async {
            waiters.iter().any(|w| w.is_finished())
        })
        .await,
        "one waiter took the lock"
    );
    // Give a second, wasted wake-up (the echo) every chance to happen.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        evalsha_calls(&server).await,
        parked + 2,
        "the release and one waiter's try, nothing else"
    );
    assert_eq!(waiters.iter().filter(|w| w.is_finished()).count(), 1);
}

/// Outside a cluster every key lives on one server, so Redisson's names with unbalanced or
/// empty braces work as they do in Java (only a cluster refuses them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brace_names_work_on_a_single_server() {
    let (_server, client) = with_client().await;
    for name in SPLIT_NAMES {
        let guard = client.get_lock(name).lock().await.unwrap();
        guard.unlock().await.unwrap();
        let rw = client.get_read_write_lock(name);
        take_and_release(&rw.write_lock()).await;
        take_and_release(&client.get_fair_lock(name)).await;
    }
}

/// An acquire whose reply came later than the watchdog's lease (queued behind a server pause)
/// used to hand out a guard that read lost at once: its validity counted from when the script
/// was sent had run out, though the server applied the lease when it ran the script. A lost
/// guard is neither renewed nor released, so the lock stayed taken by nobody until its lease
/// ran out (found by the fault campaign: a hold taken just after a server's long stop). Now
/// such a grant is confirmed by a renewal before the guard is handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_whose_reply_came_late_is_confirmed_not_lost() {
    let server = TestServer::start();
    let client = Client::with_config(
        Config::new(server.url())
            .with_watchdog_timeout(Duration::from_millis(1500))
            .with_response_timeout(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let lock = client.get_lock("late-grant");
    // The scripts are loaded: the acquire below is one EVALSHA, queued by the pause.
    take_and_release(&lock).await;
    let mut raw = server.conn().await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(2500)
        .arg("WRITE")
        .query_async(&mut raw)
        .await
        .unwrap();
    let g = lock.lock().await.unwrap();
    assert!(
        !g.is_lost(),
        "a grant Redis made with a full lease reads lost because its reply came late"
    );
    g.unlock().await.unwrap();
    assert!(
        !lock.is_locked().await.unwrap(),
        "the release deleted the lock"
    );
}

/// The late-grant rule's edge, on both sides: a watchdog grant whose reply took one renewal
/// period (lease / 3) or more is confirmed by one renewal before its guard is handed out; a
/// reply quicker than that is not. The test above only tries a reply later than the whole
/// lease, so a rule with the wrong bound (the whole lease, two periods, any delay at all)
/// passed it. Here the lease is 6 s (period 2 s): a reply held back 0.5 s costs one script
/// (the acquire), one held back 3.2 s (past the period, well inside the lease) two (the
/// acquire and its confirming renewal), counted before the watchdog's own first pass is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_is_confirmed_exactly_when_its_reply_took_a_renewal_period() {
    let server = TestServer::start();
    let client = Client::with_config(
        Config::new(server.url())
            .with_watchdog_timeout(Duration::from_secs(6))
            .with_response_timeout(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let lock = client.get_lock("late-grant-edge");
    take_and_release(&lock).await;
    let mut raw = server.conn().await;
    for (pause_ms, scripts, why) in [
        (500, 1, "a reply quicker than a period was confirmed"),
        (3200, 2, "a reply later than a period was not confirmed"),
    ] {
        let before = evalsha_calls(&server).await;
        crate::support::pause_writes(&mut raw, pause_ms).await;
        let g = lock.lock().await.unwrap();
        let sent = evalsha_calls(&server).await - before;
        assert_eq!(sent, scripts, "{why} (paused {pause_ms} ms)");
        assert!(!g.is_lost(), "paused {pause_ms} ms");
        g.unlock().await.unwrap();
    }
}
