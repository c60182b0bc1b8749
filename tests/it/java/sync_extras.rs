//! The synchronizers' extras against real Redisson on the same names: `trySetPermits(n, ttl)`
//! and `releaseIfExists` (called by reflection in the peer: where a pinned Redisson lacks one,
//! its refusal is checked instead and the 4.7 run carries the claim), `expire`, `clearExpire`
//! and `remainTimeToLive` on RSemaphore and RPermitExpirableSemaphore both ways.

use std::time::Duration;

use redisson_lock::KeyTtl;

use super::{peers, JavaPeer};
use crate::support::{pttl, TestServer};

const HOUR: Duration = Duration::from_secs(3600);

fn about_an_hour(ttl: i64) -> bool {
    ttl > 3_590_000 && ttl <= 3_600_000
}

/// The value of `cmd`, or `None` when this Redisson lacks the method (3.x only; 4.7 must have
/// it).
pub(super) async fn newer(peer: &JavaPeer, cmd: &str) -> Option<String> {
    match peer.call("a", cmd).await {
        Ok(v) => Some(v),
        Err(e)
            if e.class == "UnsupportedOperationException" && peer.version().starts_with("3.") =>
        {
            None
        }
        Err(e) => panic!("Redisson {}: `{cmd}`: {e:?}", peer.version()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_ttls_and_release_if_exists_across_the_fence() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        // Java sets with a TTL: ours sees the permits and the TTL.
        let name = format!("ix:ttl:j:{v}");
        let sem = client.get_semaphore(&name);
        let set = format!("sem.trysetpermitsttl {name} 4 3600000");
        if let Some(r) = newer(&peer, &set).await {
            assert_eq!(r, "true", "{v}");
            assert_eq!(sem.available_permits().await.unwrap(), 4, "{v}");
            let KeyTtl::Expires(left) = sem.remain_time_to_live().await.unwrap() else {
                panic!("{v}: no TTL")
            };
            assert!(left > HOUR - Duration::from_secs(10), "{v}: {left:?}");
            // Ours cannot set it again; Java's releaseIfExists finds it.
            assert!(!sem.try_set_permits_with_ttl(9, HOUR).await.unwrap(), "{v}");
            // (3.52 has trySetPermits(n, Duration) but not releaseIfExists.)
            let rie = format!("sem.releaseifexists {name} 2");
            if let Some(r) = newer(&peer, &rie).await {
                assert_eq!(r, "true", "{v}");
                assert_eq!(sem.available_permits().await.unwrap(), 6, "{v}");
            }
        }
        // Ours sets with a TTL: Java sees the permits and the TTL.
        let name = format!("ix:ttl:r:{v}");
        let sem = client.get_semaphore(&name);
        assert!(sem.try_set_permits_with_ttl(5, HOUR).await.unwrap(), "{v}");
        assert_eq!(
            peer.int("a", &format!("sem.available {name}")).await,
            5,
            "{v}"
        );
        let ttl = peer.int("a", &format!("remainttl sem {name}")).await;
        assert!(about_an_hour(ttl), "{v}: Java's remainTimeToLive {ttl}");
        // Both sides' releaseIfExists on a missing semaphore: false, nothing created.
        let missing = format!("ix:missing:{v}");
        let rie = format!("sem.releaseifexists {missing} 1");
        if let Some(r) = newer(&peer, &rie).await {
            assert_eq!(r, "false", "{v}");
        }
        let ours = client.get_semaphore(&missing);
        assert!(!ours.release_if_exists(1).await.unwrap(), "{v}");
        assert_eq!(pttl(&mut raw, &missing).await, -2, "{v}: created");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_and_clear_expire_across_the_fence() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        // RSemaphore: Java expires, ours reads and clears; ours expires, Java reads and clears.
        let name = format!("ix:exp:sem:{v}");
        let sem = client.get_semaphore(&name);
        sem.try_set_permits(1).await.unwrap();
        assert!(
            peer.bool("a", &format!("expire sem {name} 3600000")).await,
            "{v}"
        );
        assert!(matches!(
            sem.remain_time_to_live().await.unwrap(),
            KeyTtl::Expires(_)
        ));
        assert!(sem.clear_expire().await.unwrap(), "{v}");
        assert_eq!(
            peer.int("a", &format!("remainttl sem {name}")).await,
            -1,
            "{v}"
        );
        assert!(sem.expire(HOUR).await.unwrap(), "{v}");
        assert!(about_an_hour(
            peer.int("a", &format!("remainttl sem {name}")).await
        ));
        assert!(
            peer.bool("a", &format!("clearexpire sem {name}")).await,
            "{v}"
        );
        assert_eq!(sem.remain_time_to_live().await.unwrap(), KeyTtl::NoExpiry);

        // RPermitExpirableSemaphore: both keys, whichever side expires them.
        let name = format!("ix:exp:pes:{v}");
        let timeouts = format!("{{{name}}}:timeout");
        let pes = client.get_permit_expirable_semaphore(&name);
        pes.try_set_permits(2).await.unwrap();
        let _id = pes.acquire().await.unwrap();
        assert!(
            peer.bool("a", &format!("expire pes {name} 3600000")).await,
            "{v}"
        );
        for key in [&name, &timeouts] {
            assert!(
                about_an_hour(pttl(&mut raw, key).await),
                "{v}: Java left {key}"
            );
        }
        assert!(pes.clear_expire().await.unwrap(), "{v}");
        for key in [&name, &timeouts] {
            assert_eq!(pttl(&mut raw, key).await, -1, "{v}: ours left {key}");
        }
        assert!(pes.expire(HOUR).await.unwrap(), "{v}");
        for key in [&name, &timeouts] {
            assert!(
                about_an_hour(pttl(&mut raw, key).await),
                "{v}: ours left {key}"
            );
        }
        let ttl = peer.int("a", &format!("remainttl pes {name}")).await;
        assert!(about_an_hour(ttl), "{v}: {ttl}");
        assert!(
            peer.bool("a", &format!("clearexpire pes {name}")).await,
            "{v}"
        );
        for key in [&name, &timeouts] {
            assert_eq!(pttl(&mut raw, key).await, -1, "{v}: Java left {key}");
        }
    }
}
