//! The rest of `RPermitExpirableSemaphore`: `getPermits`, `acquiredPermits`, `setPermits`,
//! `getLeaseTime`, `release(List)` / `tryRelease(List)`, as a Java client sees the data.
//! Java's side of the same names: `java::permit_extras`.

use std::time::Duration;

use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::PermitId;

const WAIT: Duration = Duration::from_secs(10);
const QUIET: Duration = Duration::from_millis(300);

fn channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totals_count_held_and_expired_permits() {
    let (_server, client, mut raw, pes) = pes_fixture("px:totals", 5).await;
    let short = pes
        .with_lease(Duration::from_millis(400))
        .acquire()
        .await
        .unwrap();
    let _long = pes.acquire().await.unwrap();
    assert_eq!(pes.get_permits().await.unwrap(), 5);
    assert_eq!(pes.acquired_permits().await.unwrap(), 2);
    assert_eq!(pes.available_permits().await.unwrap(), 3);
    // The short lease ends: the reads reclaim it.
    let back = eventually(WAIT, || async {
        pes.acquired_permits().await.unwrap() == 1
    })
    .await;
    assert!(back, "the expired permit was never reclaimed");
    assert_eq!(pes.get_permits().await.unwrap(), 5);
    let n: Option<i64> = raw.get("px:totals").await.unwrap();
    assert_eq!(n, Some(4));
    assert!(pes
        .get_lease_time(&short)
        .await
        .unwrap_err()
        .is_invalid_argument());
    // A missing semaphore has no permits.
    let none = client.get_permit_expirable_semaphore("px:none");
    assert_eq!(none.get_permits().await.unwrap(), 0);
    assert_eq!(none.acquired_permits().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_permits_sets_the_total() {
    let (server, client, mut raw, pes) = pes_fixture("px:set", 3).await;
    let mut listener = Listener::start(&server, &channel("px:set")).await;
    let _held = pes.acquire().await.unwrap();
    pes.set_permits(8).await.unwrap();
    assert_eq!(pes.get_permits().await.unwrap(), 8);
    assert_eq!(pes.available_permits().await.unwrap(), 7);
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("8"), "the total");
    // Same total: nothing changes, nothing is published.
    pes.set_permits(8).await.unwrap();
    assert!(listener.next(QUIET).await.is_none());
    // Below what is held: the available count goes negative, the held permit stays.
    pes.set_permits(0).await.unwrap();
    assert_eq!(pes.available_permits().await.unwrap(), -1);
    assert_eq!(pes.acquired_permits().await.unwrap(), 1);
    // Negative is refused before anything is sent.
    let e = pes.set_permits(-1).await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    assert_eq!(pes.get_permits().await.unwrap(), 0);
    // A missing semaphore is created.
    let fresh = client.get_permit_expirable_semaphore("px:fresh");
    fresh.set_permits(2).await.unwrap();
    let n: Option<i64> = raw.get("px:fresh").await.unwrap();
    assert_eq!(n, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_time_of_a_permit() {
    let (_server, _client, _raw, pes) = pes_fixture("px:lease", 3).await;
    let minute = Duration::from_secs(60);
    let leased = pes.with_lease(minute).acquire().await.unwrap();
    let left = pes.get_lease_time(&leased).await.unwrap().unwrap();
    assert!(
        left <= minute && left > minute - Duration::from_secs(10),
        "{left:?}"
    );
    let forever = pes.acquire().await.unwrap();
    assert_eq!(pes.get_lease_time(&forever).await.unwrap(), None);
    pes.release(&forever).await.unwrap();
    let e = pes.get_lease_time(&forever).await.unwrap_err();
    assert!(
        matches!(e, redisson_lock::LockError::UnknownPermit { .. }),
        "{e:?}"
    );
    let unknown = PermitId::parse("00112233445566778899aabbccddeeff").unwrap();
    assert!(pes.get_lease_time(&unknown).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_several_permits_at_once() {
    let (server, _client, mut raw, pes) = pes_fixture("px:many", 4).await;
    let mut listener = Listener::start(&server, &channel("px:many")).await;
    let a = pes.acquire().await.unwrap();
    let b = pes.acquire().await.unwrap();
    let c = pes.acquire().await.unwrap();
    assert_eq!(
        pes.try_release_many(&[a.clone(), b.clone()]).await.unwrap(),
        2
    );
    assert_eq!(
        listener.next(WAIT).await.as_deref(),
        Some("2"),
        "the amount"
    );
    assert_eq!(pes.available_permits().await.unwrap(), 3);
    // Released already: none of them counts, nothing changes.
    assert_eq!(pes.try_release_many(&[a.clone(), b]).await.unwrap(), 0);
    assert!(listener.next(QUIET).await.is_none());
    // One held, one not: the held one is released, and the call says not all were.
    let e = pes.release_many(&[c.clone(), a]).await.unwrap_err();
    assert!(
        matches!(e, redisson_lock::LockError::UnknownPermit { .. }),
        "{e:?}"
    );
    assert_eq!(pes.available_permits().await.unwrap(), 4);
    let zset: i64 = raw.zcard("{px:many}:timeout").await.unwrap();
    assert_eq!(zset, 0);
    let e = pes.try_release_many(&[]).await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    // All held: Ok.
    let d = pes.acquire().await.unwrap();
    let e2 = pes.acquire().await.unwrap();
    pes.release_many(&[d, e2]).await.unwrap();
    assert_eq!(pes.available_permits().await.unwrap(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_permits_are_taken_together() {
    let (_server, _client, mut raw, pes) = pes_fixture("px:acq", 3).await;
    let minute = Duration::from_secs(60);
    let ids = pes.with_lease(minute).acquire_many(2).await.unwrap();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert_eq!(pes.available_permits().await.unwrap(), 1);
    for id in &ids {
        let left = pes.get_lease_time(id).await.unwrap().unwrap();
        assert!(left > minute - Duration::from_secs(10), "{left:?}");
    }
    // Two are not there: none is taken.
    let none = pes.try_acquire_many(2).await.unwrap();
    assert!(none.is_empty());
    assert_eq!(pes.available_permits().await.unwrap(), 1);
    let held: i64 = raw.zcard("{px:acq}:timeout").await.unwrap();
    assert_eq!(held, 2, "a partial acquire");
    // A waiter for two gets both once one more comes back.
    let waiter = {
        let pes = pes.clone();
        tokio::spawn(async move { pes.try_acquire_many_for(2, Duration::from_secs(30)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "took two of one");
    pes.release(&ids[0]).await.unwrap();
    let got = tokio::time::timeout(WAIT, waiter)
        .await
        .expect("the waiter was not woken")
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(pes.available_permits().await.unwrap(), 0);
    assert_eq!(pes.acquired_permits().await.unwrap(), 3);
    // Bad input is refused before anything is sent.
    for n in [0, u32::MAX] {
        let e = pes.acquire_many(n).await.unwrap_err();
        assert!(e.is_invalid_argument(), "{n}: {e:?}");
    }
    let e = pes
        .with_lease(Duration::ZERO)
        .try_acquire_many(1)
        .await
        .unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    assert_eq!(pes.acquired_permits().await.unwrap(), 3);
}
