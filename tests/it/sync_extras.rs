//! The synchronizers' Redisson 4.x extras: `RSemaphore.trySetPermits(n, ttl)` and
//! `releaseIfExists`, and `expire` / `clearExpire` / `remainTimeToLive` on the semaphore, the
//! permit-expirable semaphore (both its keys) and the latch, as a Java client sees the data.
//! Java's side of the same names: `java::sync_extras`.

use std::time::Duration;

use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::KeyTtl;

const WAIT: Duration = Duration::from_secs(10);
const QUIET: Duration = Duration::from_millis(300);
const HOUR: Duration = Duration::from_secs(3600);

fn channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

/// `ttl` is in `(hour - 10 s, hour]`.
fn about_an_hour(ttl: i64) -> bool {
    ttl > 3_590_000 && ttl <= 3_600_000
}

async fn get(raw: &mut MultiplexedConnection, key: &str) -> Option<i64> {
    raw.get(key).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_set_permits_with_a_ttl() {
    let (server, client, mut raw) = fixture().await;
    let name = "sx:ttl";
    let mut listener = Listener::start(&server, &channel(name)).await;
    let sem = client.get_semaphore(name);
    // Bad TTLs are refused before anything is sent.
    for bad in [Duration::ZERO, Duration::from_secs(101 * 365 * 24 * 3600)] {
        let e = sem.try_set_permits_with_ttl(3, bad).await.unwrap_err();
        assert!(e.is_invalid_argument(), "{e:?}");
    }
    assert!(!raw.exists::<_, bool>(name).await.unwrap());
    assert!(listener.next(QUIET).await.is_none());

    assert!(sem.try_set_permits_with_ttl(3, HOUR).await.unwrap());
    assert_eq!(get(&mut raw, name).await, Some(3));
    assert!(about_an_hour(pttl(&mut raw, name).await));
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("3"));
    // Set already: nothing changes, nothing is published.
    assert!(!sem.try_set_permits_with_ttl(9, HOUR).await.unwrap());
    assert!(!sem.try_set_permits(9).await.unwrap());
    assert_eq!(get(&mut raw, name).await, Some(3));
    assert!(listener.next(QUIET).await.is_none());
    // Acquires and releases keep the TTL (DECRBY / INCRBY).
    sem.acquire_many(2).await.unwrap();
    sem.release().await.unwrap();
    assert_eq!(get(&mut raw, name).await, Some(2));
    assert!(about_an_hour(pttl(&mut raw, name).await));
    // The key really goes when the TTL ends.
    let short = client.get_semaphore("sx:short");
    assert!(short
        .try_set_permits_with_ttl(1, Duration::from_millis(300))
        .await
        .unwrap());
    let gone = eventually(WAIT, || async {
        !raw.clone().exists::<_, bool>("sx:short").await.unwrap()
    })
    .await;
    assert!(gone, "the semaphore outlived its TTL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_if_exists_never_creates_the_semaphore() {
    let (server, client, mut raw) = fixture().await;
    let name = "sx:rie";
    let mut listener = Listener::start(&server, &channel(name)).await;
    let sem = client.get_semaphore(name);
    assert!(!sem.release_if_exists(2).await.unwrap());
    assert!(!raw.exists::<_, bool>(name).await.unwrap(), "created");
    assert!(listener.next(QUIET).await.is_none(), "published");
    // Its receipt is cleaned up like a release's.
    let receipts = eventually(WAIT, || async {
        let keys: Vec<String> = raw
            .clone()
            .keys("redisson_semaphore_latch:*")
            .await
            .unwrap();
        keys.is_empty()
    })
    .await;
    assert!(receipts, "a receipt was left behind");

    assert!(sem.try_set_permits_with_ttl(1, HOUR).await.unwrap());
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("1"));
    assert!(sem.release_if_exists(2).await.unwrap());
    assert_eq!(get(&mut raw, name).await, Some(3));
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("3"), "new count");
    assert!(about_an_hour(pttl(&mut raw, name).await), "TTL lost");
    // Zero sends nothing and says false (Redisson's); too many is refused.
    assert!(!sem.release_if_exists(0).await.unwrap());
    let e = sem.release_if_exists(u32::MAX).await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    assert_eq!(get(&mut raw, name).await, Some(3));
    assert!(listener.next(QUIET).await.is_none());
    // A waiter is woken by it.
    let _: () = raw.set(name, 0).await.unwrap();
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.try_acquire_for(Duration::from_secs(30)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(sem.release_if_exists(1).await.unwrap());
    let got = tokio::time::timeout(WAIT, waiter).await.expect("not woken");
    assert!(got.unwrap().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_clear_expire_and_remain_time_to_live() {
    let (_server, client, mut raw) = fixture().await;
    let sem = client.get_semaphore("sx:sem");
    let latch = client.get_count_down_latch("sx:latch");
    let pes = client.get_permit_expirable_semaphore("sx:pes");
    let timeouts = "{sx:pes}:timeout";

    // Missing: nothing to expire.
    assert_eq!(sem.remain_time_to_live().await.unwrap(), KeyTtl::NoKey);
    assert!(!sem.expire(HOUR).await.unwrap());
    assert!(!latch.expire(HOUR).await.unwrap());
    assert!(!pes.expire(HOUR).await.unwrap());
    assert!(!raw.exists::<_, bool>("sx:sem").await.unwrap());

    sem.try_set_permits(2).await.unwrap();
    latch.try_set_count(2).await.unwrap();
    pes.try_set_permits(2).await.unwrap();
    let id = pes.acquire().await.unwrap();
    for (what, ttl) in [
        ("sem", sem.remain_time_to_live().await.unwrap()),
        ("latch", latch.remain_time_to_live().await.unwrap()),
        ("pes", pes.remain_time_to_live().await.unwrap()),
    ] {
        assert_eq!(ttl, KeyTtl::NoExpiry, "{what}");
    }
    assert!(sem.expire(HOUR).await.unwrap());
    assert!(latch.expire(HOUR).await.unwrap());
    assert!(pes.expire(HOUR).await.unwrap());
    for key in ["sx:sem", "sx:latch", "sx:pes", timeouts] {
        assert!(about_an_hour(pttl(&mut raw, key).await), "{key}");
    }
    for (what, ttl) in [
        ("sem", sem.remain_time_to_live().await.unwrap()),
        ("latch", latch.remain_time_to_live().await.unwrap()),
        ("pes", pes.remain_time_to_live().await.unwrap()),
    ] {
        let KeyTtl::Expires(left) = ttl else {
            panic!("{what}: {ttl:?}")
        };
        assert!(
            left > HOUR - Duration::from_secs(10) && left <= HOUR,
            "{what}"
        );
    }
    // A zero or too long TTL is refused and changes nothing.
    let e = sem.expire(Duration::ZERO).await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    assert!(about_an_hour(pttl(&mut raw, "sx:sem").await));

    assert!(sem.clear_expire().await.unwrap());
    assert!(latch.clear_expire().await.unwrap());
    assert!(pes.clear_expire().await.unwrap());
    for key in ["sx:sem", "sx:latch", "sx:pes", timeouts] {
        assert_eq!(pttl(&mut raw, key).await, -1, "{key}");
    }
    assert!(!sem.clear_expire().await.unwrap(), "nothing to clear");
    assert_eq!(pes.remain_time_to_live().await.unwrap(), KeyTtl::NoExpiry);
    pes.release(&id).await.unwrap();
    // An expired synchronizer is gone.
    assert!(sem.expire(Duration::from_millis(200)).await.unwrap());
    let gone = eventually(WAIT, || async {
        sem.remain_time_to_live().await.unwrap() == KeyTtl::NoKey
    })
    .await;
    assert!(gone);
}
