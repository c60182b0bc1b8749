//! The early warning before loss: a watchdog hold whose renewals fail or are late is *at risk*
//! (`LockGuard::is_at_risk`, `at_risk()`) while its lease is still valid, before it is lost;
//! a confirmed renewal clears it. Faults come from the test proxy between client and server.

use std::time::Duration;

use crate::support::proxy::{proxied, Mode};
use crate::support::*;
use redis::AsyncCommands;

const BOUND: Duration = Duration::from_secs(30);

/// Renewals blackholed for good: `at_risk()` resolves first, while the key is still in Redis and
/// the guard not lost; `lost()` resolves after, and the hold stays at risk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackholed_renewals_go_at_risk_before_the_hold_is_lost() {
    // A short reply timeout: the blackholed renewal fails well before the lease ends.
    let lease = Duration::from_secs(3);
    let (server, proxy, client) =
        proxied(|c| fail_fast(c, lease, Duration::from_millis(500))).await;
    let name = "atrisk:blackhole";
    let mut raw = server.conn().await;
    let guard = client.get_lock(name).lock().await.unwrap();
    assert!(!guard.is_at_risk());

    proxy.set(Mode::Blackhole);
    tokio::time::timeout(BOUND, guard.at_risk())
        .await
        .expect("at_risk() did not resolve");
    // Observed at once: the warning came while the hold was still valid and still in Redis.
    let lost_then = guard.is_lost();
    let existed: bool = raw.exists(name).await.unwrap();
    assert!(!lost_then, "at risk was reported only with the loss");
    assert!(
        existed,
        "at risk was reported after Redis had expired the hold"
    );

    tokio::time::timeout(BOUND, guard.lost())
        .await
        .expect("lost() did not resolve");
    assert!(guard.is_lost() && guard.is_at_risk());
    proxy.set(Mode::Pass);
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
}

/// Renewals stuck (blackholed, the reply timeout longer than the lease) until the hold goes at
/// risk by lateness, then restored before the lease ends: the late renewal is confirmed, the
/// risk clears, and the hold is never lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_renewal_confirmed_in_time_clears_the_risk() {
    let lease = Duration::from_millis(4500);
    let (server, proxy, client) = proxied(|c| {
        c.with_watchdog_timeout(lease)
            .with_response_timeout(Duration::from_secs(20))
    })
    .await;
    let name = "atrisk:late";
    let guard = client.get_lock(name).lock().await.unwrap();

    proxy.set(Mode::Blackhole);
    tokio::time::timeout(BOUND, guard.at_risk())
        .await
        .expect("at_risk() did not resolve");
    proxy.set(Mode::Pass);
    assert!(!guard.is_lost(), "at risk was reported only with the loss");

    // The held renewal gets through: confirmed, the risk clears.
    assert!(
        eventually(BOUND, || async { !guard.is_at_risk() }).await,
        "a confirmed renewal did not clear the risk"
    );
    assert!(!guard.is_lost());
    // And renewals go on: the key's TTL is pushed up again, no loss meanwhile.
    let mut raw = server.conn().await;
    let mut last: i64 = raw.pttl(name).await.unwrap();
    let renewed = tokio::time::timeout(BOUND, async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let ttl: i64 = raw.pttl(name).await.unwrap();
            if ttl > last {
                return;
            }
            last = ttl;
        }
    })
    .await;
    assert!(renewed.is_ok(), "renewals did not resume");
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
    assert!(!exists_on(&server, name).await);
}

/// A healthy hold never goes at risk over several renewal periods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_hold_never_goes_at_risk() {
    let lease = Duration::from_secs(3);
    let (_server, client, mut raw) = fixture_with(|c| c.with_watchdog_timeout(lease)).await;
    let name = "atrisk:healthy";
    let guard = client.get_lock(name).lock().await.unwrap();
    // Three renewals seen from Redis (the TTL pushed up), and no warning meanwhile.
    let renewals = async {
        let mut last: i64 = raw.pttl(name).await.unwrap();
        let mut seen = 0;
        while seen < 3 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let ttl: i64 = raw.pttl(name).await.unwrap();
            if ttl > last {
                seen += 1;
            }
            last = ttl;
        }
    };
    tokio::select! {
        _ = guard.at_risk() => panic!("a healthy hold went at risk"),
        r = tokio::time::timeout(BOUND, renewals) => r.expect("no renewals"),
    }
    assert!(!guard.is_at_risk());
    guard.unlock().await.unwrap();
}

/// A watched permit (`PermitGuard`) warns the same way: its renewals blackholed, it goes at risk
/// while still valid, and is lost after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_permit_goes_at_risk_before_it_is_lost() {
    let lease = Duration::from_secs(3);
    let (_server, proxy, client) =
        proxied(|c| fail_fast(c, lease, Duration::from_millis(500))).await;
    let sem = client.get_permit_expirable_semaphore("atrisk:permits");
    assert!(sem.try_set_permits(1).await.unwrap());
    let permit = sem.acquire_guarded().await.unwrap();
    assert!(!permit.is_at_risk());

    proxy.set(Mode::Blackhole);
    tokio::time::timeout(BOUND, permit.at_risk())
        .await
        .expect("at_risk() did not resolve");
    assert!(!permit.is_lost(), "at risk was reported only with the loss");
    tokio::time::timeout(BOUND, permit.lost())
        .await
        .expect("lost() did not resolve");
    assert!(permit.is_at_risk());
    proxy.set(Mode::Pass);
    drop(permit);
}
