//! Synchronizer wake-ups by message, both ways: a release of the semaphore or of the
//! permit-expirable semaphore, and the last count-down of the latch, wake the other side's
//! parked waiter long before its wait (50 s) or the holder's lease (60 s) would have ended it.
//! Parked means: subscribed (`PUBSUB NUMSUB` on the channel) and the second try made (the
//! server's command counts since a reset, after one warm-up call of each script).

use std::time::{Duration, Instant};

use redisson_lock::PermitId;

use super::peers;
use super::sync_ops::{calls_at_least, SCRIPTS};
use super::wakeups::{HOLDER_LEASE, WOKEN_WITHIN};
use crate::support::redisson::{latch_channel, reset_stats, sem_channel};
use crate::support::{channel_subscribers, TestServer};

/// How long a waiter waits: one not woken by the message would wait until the end.
const WAIT: Duration = Duration::from_secs(50);

/// Waits until `channel` has one subscriber and the waiter made its second try.
async fn parked(server: &TestServer, channel: &str, commands: &[&str], what: &str) {
    assert!(
        channel_subscribers(server, channel, 1).await,
        "{what}: no waiter subscribed to {channel}"
    );
    calls_at_least(server, commands, 2, what).await;
}

/// The waiter must have finished within [`WOKEN_WITHIN`] of `released`.
fn in_time(released: Instant, at: Instant, what: &str) {
    let after = at.saturating_duration_since(released);
    assert!(
        after < WOKEN_WITHIN,
        "{what}: the waiter took {after:?} after the release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_release_wakes_the_other_side() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // Java release wakes a Rust waiter.
        let name = format!("isw:j2r:{v}");
        let sem = client.get_semaphore(&name);
        assert!(sem.try_set_permits(1).await.unwrap(), "{v}");
        sem.acquire().await.unwrap(); // warm-up of the acquire script
        sem.release().await.unwrap();
        assert!(peer.bool("h", &format!("sem.tryacquire {name} 1 0")).await);
        reset_stats(&server).await;
        let waiter = tokio::spawn({
            let sem = sem.clone();
            async move {
                let got = sem.try_acquire_for(WAIT).await.unwrap();
                (got, Instant::now())
            }
        });
        parked(&server, &sem_channel(&name), &SCRIPTS, &v).await;
        let released = Instant::now();
        assert!(peer.bool("h", &format!("sem.release {name} 1")).await);
        let (got, at) = waiter.await.unwrap();
        assert!(got, "{v}: the Rust waiter timed out");
        in_time(released, at, &format!("{v} java->rust"));
        assert_eq!(sem.available_permits().await.unwrap(), 0, "{v}");

        // Rust release wakes a Java waiter.
        let name = format!("isw:r2j:{v}");
        let sem = client.get_semaphore(&name);
        assert!(peer.bool("w", &format!("sem.trysetpermits {name} 1")).await);
        assert!(peer.bool("w", &format!("sem.tryacquire {name} 1 0")).await); // warm-up
        assert!(peer.bool("w", &format!("sem.release {name} 1")).await);
        sem.acquire().await.unwrap();
        reset_stats(&server).await;
        let reply = peer.send(
            "w",
            &format!("sem.tryacquire {name} 1 {}", WAIT.as_millis()),
        );
        parked(&server, &sem_channel(&name), &SCRIPTS, &v).await;
        let released = Instant::now();
        sem.release().await.unwrap();
        assert_eq!(reply.await, Ok("true".to_owned()), "{v}: the Java waiter");
        in_time(released, Instant::now(), &format!("{v} rust->java"));
        assert_eq!(sem.available_permits().await.unwrap(), 0, "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_semaphore_release_wakes_the_other_side() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // Java release wakes a Rust waiter; the Java permit has a 60 s lease.
        let name = format!("ipw:j2r:{v}");
        let pes = client.get_permit_expirable_semaphore(&name);
        assert!(pes.try_set_permits(1).await.unwrap(), "{v}");
        let warm = pes.acquire().await.unwrap(); // warm-up of the acquire script
        pes.release(&warm).await.unwrap();
        let id = peer
            .ok(
                "h",
                &format!("pes.acquire {name} {}", HOLDER_LEASE.as_millis()),
            )
            .await;
        reset_stats(&server).await;
        let waiter = tokio::spawn({
            let pes = pes.clone();
            async move {
                let got = pes.try_acquire_for(WAIT).await.unwrap();
                (got, Instant::now())
            }
        });
        parked(&server, &sem_channel(&name), &SCRIPTS, &v).await;
        let released = Instant::now();
        assert!(peer.bool("h", &format!("pes.tryrelease {name} {id}")).await);
        let (got, at) = waiter.await.unwrap();
        let got = got.unwrap_or_else(|| panic!("{v}: the Rust waiter timed out"));
        in_time(released, at, &format!("{v} java->rust"));
        assert_ne!(got.as_str(), id, "{v}: a fresh id");
        pes.release(&got).await.unwrap();

        // Rust release wakes a Java waiter; the Rust permit has a 60 s lease.
        let name = format!("ipw:r2j:{v}");
        let pes = client.get_permit_expirable_semaphore(&name);
        assert!(peer.bool("w", &format!("pes.trysetpermits {name} 1")).await);
        let warm = peer.ok("w", &format!("pes.tryacquire {name} 0 -1")).await; // warm-up
        assert!(
            peer.bool("w", &format!("pes.tryrelease {name} {warm}"))
                .await
        );
        let held: PermitId = pes.with_lease(HOLDER_LEASE).acquire().await.unwrap();
        reset_stats(&server).await;
        let reply = peer.send(
            "w",
            &format!("pes.tryacquire {name} {} -1", WAIT.as_millis()),
        );
        parked(&server, &sem_channel(&name), &SCRIPTS, &v).await;
        let released = Instant::now();
        pes.release(&held).await.unwrap();
        let id = reply.await.unwrap_or_else(|e| panic!("{v}: {e:?}"));
        in_time(released, Instant::now(), &format!("{v} rust->java"));
        assert_ne!(id, "null", "{v}: the Java waiter timed out");
        assert!(peer.bool("w", &format!("pes.tryrelease {name} {id}")).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_count_down_wakes_the_other_side() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // Java's last count-down wakes a Rust waiter.
        let name = format!("ilw:j2r:{v}");
        let latch = client.get_count_down_latch(&name);
        assert!(peer.bool("h", &format!("latch.trysetcount {name} 2")).await);
        assert!(peer.bool("h", &format!("latch.countdown {name}")).await);
        reset_stats(&server).await;
        let waiter = tokio::spawn({
            let latch = latch.clone();
            async move {
                let open = latch.wait_for(WAIT).await.unwrap();
                (open, Instant::now())
            }
        });
        parked(&server, &latch_channel(&name), &["get"], &v).await;
        let released = Instant::now();
        assert!(peer.bool("h", &format!("latch.countdown {name}")).await);
        let (open, at) = waiter.await.unwrap();
        assert!(open, "{v}: the Rust waiter timed out");
        in_time(released, at, &format!("{v} java->rust"));

        // Rust's last count-down wakes a Java waiter.
        let name = format!("ilw:r2j:{v}");
        let latch = client.get_count_down_latch(&name);
        assert!(latch.try_set_count(2).await.unwrap(), "{v}");
        latch.count_down().await.unwrap();
        reset_stats(&server).await;
        let reply = peer.send("w", &format!("latch.await {name} {}", WAIT.as_millis()));
        parked(&server, &latch_channel(&name), &["get"], &v).await;
        let released = Instant::now();
        latch.count_down().await.unwrap();
        assert_eq!(reply.await, Ok("true".to_owned()), "{v}: the Java waiter");
        in_time(released, Instant::now(), &format!("{v} rust->java"));
    }
}
