//! The rest of RPermitExpirableSemaphore against real Redisson on the same names: totals,
//! `setPermits`, `getLeaseTime`, releasing several ids at once, ids of either side. The peer
//! calls these by reflection: where a pinned 3.x lacks one, its refusal is checked and the
//! 4.7 run carries the claim.

use std::time::Duration;

use redisson_lock::PermitId;

use super::peers;
use super::sync_extras::newer;
use crate::support::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_totals_lease_times_and_release_lists_across_the_fence() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("ipx:{v}");
        let pes = client.get_permit_expirable_semaphore(&name);
        assert!(pes.try_set_permits(6).await.unwrap(), "{v}");
        // One permit on each side, leased a minute.
        let ours = pes
            .with_lease(Duration::from_secs(60))
            .acquire()
            .await
            .unwrap();
        let theirs = peer.ok("a", &format!("pes.acquire {name} 60000")).await;
        let theirs_id = PermitId::parse(&theirs).unwrap();

        // Totals agree.
        if let Some(t) = newer(&peer, &format!("pes.getpermits {name}")).await {
            assert_eq!(t, "6", "{v}");
            assert_eq!(pes.get_permits().await.unwrap(), 6, "{v}");
        }
        if let Some(t) = newer(&peer, &format!("pes.acquired {name}")).await {
            assert_eq!(t, "2", "{v}");
            assert_eq!(pes.acquired_permits().await.unwrap(), 2, "{v}");
        }
        // Lease times of either side's permit agree (both are what is left of the minute).
        for id in [&ours, &theirs_id] {
            let cmd = format!("pes.leasetime {name} {id}");
            if let Some(java) = newer(&peer, &cmd).await {
                let java: i64 = java.parse().unwrap();
                let rust = pes.get_lease_time(id).await.unwrap().unwrap().as_millis() as i64;
                assert!(
                    java > 50_000 && java <= 60_000 && (java - rust).abs() < 5_000,
                    "{v}: Java {java} ms, ours {rust} ms"
                );
            }
        }
        // Java's setPermits: ours sees the total.
        if newer(&peer, &format!("pes.setpermits {name} 9"))
            .await
            .is_some()
        {
            assert_eq!(pes.get_permits().await.unwrap(), 9, "{v}");
            assert_eq!(pes.available_permits().await.unwrap(), 7, "{v}");
        }
        // Ours sets it back; Java sees it.
        pes.set_permits(6).await.unwrap();
        assert_eq!(
            peer.int("a", &format!("pes.available {name}")).await,
            4,
            "{v}"
        );

        // Ours releases both ids at once (one of them Java's).
        assert_eq!(
            pes.try_release_many(&[ours, theirs_id]).await.unwrap(),
            2,
            "{v}"
        );
        assert_eq!(
            peer.int("a", &format!("pes.available {name}")).await,
            6,
            "{v}"
        );
        // Java releases a list of our ids.
        let x = pes.acquire().await.unwrap();
        let y = pes.acquire().await.unwrap();
        let cmd = format!("pes.tryreleasemany {name} {x},{y}");
        if let Some(n) = newer(&peer, &cmd).await {
            assert_eq!(n, "2", "{v}");
            assert_eq!(pes.available_permits().await.unwrap(), 6, "{v}");
            // Released already: Java's release(List) refuses, as ours does. (Redisson 4.7's
            // synchronous call wraps its IllegalArgumentException in a RedisException
            // "Unexpected exception while processing command"; the async one fails with it.)
            let e = peer
                .call("a", &format!("pes.releasemany {name} {x},{y}"))
                .await
                .unwrap_err();
            assert!(
                ["IllegalArgumentException", "RedisException"].contains(&e.class.as_str()),
                "{v}: {e:?}"
            );
            assert!(pes.release_many(&[x, y]).await.is_err(), "{v}");
        } else {
            pes.release_many(&[x, y]).await.unwrap();
        }

        // Several ids at once: Java's acquire(n, lease) released by ours, ours by Java.
        if let Some(ids) = newer(&peer, &format!("pes.acquiremany {name} 3 60000")).await {
            let ids: Vec<PermitId> = ids
                .split(',')
                .map(|i| PermitId::parse(i).unwrap())
                .collect();
            assert_eq!(ids.len(), 3, "{v}");
            assert_eq!(pes.acquired_permits().await.unwrap(), 3, "{v}");
            pes.release_many(&ids).await.unwrap();
        }
        let ids = pes
            .with_lease(Duration::from_secs(60))
            .acquire_many(3)
            .await
            .unwrap();
        assert_eq!(
            peer.int("a", &format!("pes.available {name}")).await,
            3,
            "{v}"
        );
        let list: Vec<&str> = ids.iter().map(PermitId::as_str).collect();
        let cmd = format!("pes.tryreleasemany {name} {}", list.join(","));
        match newer(&peer, &cmd).await {
            Some(n) => assert_eq!(n, "3", "{v}"),
            None => pes.release_many(&ids).await.unwrap(),
        }
        assert_eq!(pes.available_permits().await.unwrap(), 6, "{v}");
    }
}
