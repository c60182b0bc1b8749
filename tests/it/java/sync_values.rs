//! Synchronizer values agree on both sides: the semaphore's available permits after mixed
//! acquires and releases, permit-expirable semaphore ids released by the other side (Redisson
//! ties a permit to its id, not to a client), an expired permit coming back for both, and the
//! count-down latch's count.

use std::time::Duration;

use redisson_lock::PermitId;

use super::{peers, JavaPeer};
use crate::support::{eventually, TestServer};

/// Both sides report `n` available permits of semaphore `name` (`sem` or `pes` ops).
async fn both_see(peer: &JavaPeer, java_op: &str, name: &str, rust: i64, n: i64, what: &str) {
    assert_eq!(rust, n, "{what}: Rust's available permits");
    let java = peer.int("a", &format!("{java_op}.available {name}")).await;
    assert_eq!(java, n, "{what}: Java's available permits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_permits_agree_after_mixed_acquires_and_releases() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("isv:{v}");
        let sem = client.get_semaphore(&name);
        let avail = || async { sem.available_permits().await.unwrap() };

        assert!(peer.bool("a", &format!("sem.trysetpermits {name} 5")).await);
        assert!(!sem.try_set_permits(9).await.unwrap(), "{v}: already set");
        both_see(&peer, "sem", &name, avail().await, 5, &v).await;
        sem.acquire_many(2).await.unwrap();
        both_see(&peer, "sem", &name, avail().await, 3, &v).await;
        assert!(peer.bool("a", &format!("sem.acquire {name} 1")).await);
        both_see(&peer, "sem", &name, avail().await, 2, &v).await;
        sem.release_many(3).await.unwrap();
        both_see(&peer, "sem", &name, avail().await, 5, &v).await;
        assert!(peer.bool("a", &format!("sem.release {name} 2")).await);
        both_see(&peer, "sem", &name, avail().await, 7, &v).await;
        // Neither can take more than there is; each can take exactly all of it.
        assert!(!sem.try_acquire_many(8).await.unwrap(), "{v}");
        assert!(!peer.bool("a", &format!("sem.tryacquire {name} 8 0")).await);
        assert!(peer.bool("a", &format!("sem.tryacquire {name} 7 0")).await);
        both_see(&peer, "sem", &name, avail().await, 0, &v).await;
        sem.release_many(7).await.unwrap();
        assert!(sem.try_acquire_many(7).await.unwrap(), "{v}");
        both_see(&peer, "sem", &name, avail().await, 0, &v).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_ids_released_across_the_fence_and_permits_agree() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("ipv:{v}");
        let pes = client.get_permit_expirable_semaphore(&name);
        let avail = || async { pes.available_permits().await.unwrap() };

        assert!(pes.try_set_permits(3).await.unwrap(), "{v}");
        assert!(!peer.bool("a", &format!("pes.trysetpermits {name} 9")).await);
        both_see(&peer, "pes", &name, avail().await, 3, &v).await;

        // A Java permit (no lease) and a Rust permit (60 s lease).
        let java_id = peer.ok("a", &format!("pes.acquire {name} -1")).await;
        let rust_id = pes
            .with_lease(Duration::from_secs(60))
            .acquire()
            .await
            .unwrap();
        both_see(&peer, "pes", &name, avail().await, 1, &v).await;

        // Each side releases the other's id.
        let cmd = format!("pes.tryrelease {name} {}", rust_id.as_str());
        assert!(
            peer.bool("a", &cmd).await,
            "{v}: Java released the Rust permit"
        );
        both_see(&peer, "pes", &name, avail().await, 2, &v).await;
        let parsed = PermitId::parse(&java_id)
            .unwrap_or_else(|e| panic!("{v}: Java's id {java_id:?} does not parse: {e}"));
        assert!(
            pes.try_release(&parsed).await.unwrap(),
            "{v}: Rust released the Java permit"
        );
        both_see(&peer, "pes", &name, avail().await, 3, &v).await;

        // Released ids are gone for both sides.
        assert!(!pes.try_release(&rust_id).await.unwrap(), "{v}");
        assert!(
            !peer
                .bool("a", &format!("pes.tryrelease {name} {java_id}"))
                .await
        );
        // Redisson refuses a release of a gone id (4.7.0 as a RedisException wrapping its
        // IllegalArgumentException), and so do we.
        let refused = peer
            .call("a", &format!("pes.release {name} {}", rust_id.as_str()))
            .await;
        assert!(refused.is_err(), "{v}: {refused:?}");
        assert!(pes.release(&parsed).await.is_err(), "{v}");
        both_see(&peer, "pes", &name, avail().await, 3, &v).await;

        // A short Java lease runs out: both sides count the permit back.
        let _short = peer.ok("a", &format!("pes.acquire {name} 1500")).await;
        let _long = pes.acquire().await.unwrap();
        assert!(avail().await <= 1, "{v}");
        let back = eventually(Duration::from_secs(30), || async { avail().await == 2 }).await;
        assert!(
            back,
            "{v}: the expired Java permit never came back for Rust"
        );
        both_see(&peer, "pes", &name, avail().await, 2, &v).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_count_agrees() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("ilv:{v}");
        let latch = client.get_count_down_latch(&name);
        let count = |expected: i64| {
            let latch = latch.clone();
            let peer = &peer;
            let name = name.clone();
            let v = v.clone();
            async move {
                assert_eq!(
                    latch.get_count().await.unwrap(),
                    expected,
                    "{v}: Rust's count"
                );
                let java = peer.int("a", &format!("latch.count {name}")).await;
                assert_eq!(java, expected, "{v}: Java's count");
            }
        };

        assert!(latch.try_set_count(3).await.unwrap(), "{v}");
        assert!(!peer.bool("a", &format!("latch.trysetcount {name} 5")).await);
        count(3).await;
        assert!(peer.bool("a", &format!("latch.countdown {name}")).await);
        count(2).await;
        latch.count_down().await.unwrap();
        count(1).await;
        assert!(!peer.bool("a", &format!("latch.await {name} 0")).await);
        assert!(!latch.wait_for(Duration::ZERO).await.unwrap(), "{v}");
        assert!(peer.bool("a", &format!("latch.countdown {name}")).await);
        count(0).await;
        // Open for both, and a count-down past zero leaves it at zero.
        assert!(peer.bool("a", &format!("latch.await {name} 0")).await);
        assert!(latch.wait_for(Duration::ZERO).await.unwrap(), "{v}");
        latch.count_down().await.unwrap();
        count(0).await;
        // Zero means it can be set again, from either side.
        assert!(peer.bool("a", &format!("latch.trysetcount {name} 2")).await);
        assert!(!latch.try_set_count(4).await.unwrap(), "{v}");
        count(2).await;
    }
}
