//! The rate limiter shared with real Redisson (`RRateLimiter`): a configuration set by either
//! side is read by the other, permits taken (or released) by one are gone (or back) for the
//! other, and the limit holds across both sides within one interval, waiting included.

use std::time::{Duration, Instant};

use redisson_lock::RateType;

use super::{peers, JavaPeer};
use crate::support::TestServer;

/// A generous bound for a wait that should end much sooner.
const WAIT: Duration = Duration::from_secs(20);

/// Both sides report `n` available permits of `name`.
async fn both_see(peer: &JavaPeer, rl: &redisson_lock::RateLimiter, n: i64, what: &str) {
    let name = rl.name();
    assert_eq!(rl.available_permits().await.unwrap(), n, "{what}: Rust's");
    let java = peer.int("a", &format!("rl.available {name}")).await;
    assert_eq!(java, n, "{what}: Java's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_set_by_one_side_is_read_by_the_other() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // Java sets (with a keep-alive), Rust reads and cannot set again.
        let name = format!("jrl:cfg-java:{v}");
        let rl = client.get_rate_limiter(&name);
        assert!(
            peer.bool("a", &format!("rl.trysetrate {name} OVERALL 5 60000 120000"))
                .await
        );
        let c = rl.config().await.unwrap().expect("Java's configuration");
        assert_eq!(c.rate_type, RateType::Overall, "{v}");
        assert_eq!((c.rate, c.interval), (5, Duration::from_secs(60)), "{v}");
        assert_eq!(c.keep_alive, Some(Duration::from_secs(120)), "{v}");
        assert!(!rl
            .try_set_rate(redisson_lock::RateLimiterConfig::new(
                RateType::PerClient,
                1,
                Duration::from_secs(1)
            ))
            .await
            .unwrap());

        // Rust sets, Java reads and cannot set again.
        let name = format!("jrl:cfg-rust:{v}");
        let rl = client.get_rate_limiter(&name);
        assert!(rl
            .try_set_rate(redisson_lock::RateLimiterConfig::new(
                RateType::PerClient,
                7,
                Duration::from_secs(30)
            ))
            .await
            .unwrap());
        let java = peer.ok("a", &format!("rl.config {name}")).await;
        assert_eq!(java, "PER_CLIENT 7 30000", "{v}");
        assert!(
            !peer
                .bool("a", &format!("rl.trysetrate {name} OVERALL 1 1000"))
                .await
        );
        // Not set at all: Java's default, our None.
        let unset = format!("jrl:cfg-none:{v}");
        assert_eq!(
            peer.ok("a", &format!("rl.config {unset}")).await,
            "OVERALL 0 0"
        );
        assert_eq!(
            client.get_rate_limiter(&unset).config().await.unwrap(),
            None
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_taken_by_one_side_are_gone_for_the_other() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("jrl:permits:{v}");
        let rl = client.get_rate_limiter(&name);
        assert!(
            peer.bool("a", &format!("rl.trysetrate {name} OVERALL 5 60000"))
                .await
        );
        both_see(&peer, &rl, 5, &v).await;
        assert!(peer.bool("a", &format!("rl.tryacquire {name} 2 0")).await);
        both_see(&peer, &rl, 3, &v).await;
        assert!(rl.try_acquire_many(2).await.unwrap(), "{v}");
        both_see(&peer, &rl, 1, &v).await;
        // Neither can take more than is left.
        assert!(!rl.try_acquire_many(2).await.unwrap(), "{v}");
        assert!(!peer.bool("a", &format!("rl.tryacquire {name} 2 0")).await);
        // Our release gives back to Java's window: the oldest take (Java's) first.
        rl.release_many(2).await.unwrap();
        both_see(&peer, &rl, 3, &v).await;
        assert!(peer.bool("a", &format!("rl.tryacquire {name} 3 0")).await);
        both_see(&peer, &rl, 0, &v).await;
        // More than the rate: Java's script and ours refuse it alike.
        let java = peer
            .call("a", &format!("rl.tryacquire {name} 6 0"))
            .await
            .unwrap_err();
        let rust = rl.try_acquire_many(6).await.unwrap_err();
        assert!(rust.is_rate_limiter_refused(), "{v}: {rust:?}");
        assert!(
            java.message
                .contains("Requested permits amount cannot exceed defined rate"),
            "{v}: {java:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_holds_across_both_sides_within_one_interval() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();

        // A burst from both sides at once, well inside one 60 s window: exactly the rate.
        let name = format!("jrl:burst:{v}");
        let rl = client.get_rate_limiter(&name);
        assert!(rl
            .try_set_rate(redisson_lock::RateLimiterConfig::new(
                RateType::Overall,
                10,
                Duration::from_secs(60)
            ))
            .await
            .unwrap());
        let rust = {
            let rl = rl.clone();
            tokio::spawn(async move {
                let mut n = 0;
                for _ in 0..15 {
                    n += usize::from(rl.try_acquire().await.unwrap());
                }
                n
            })
        };
        let mut java = 0;
        for _ in 0..15 {
            java += usize::from(peer.bool("a", &format!("rl.tryacquire {name} 1 0")).await);
        }
        let rust = rust.await.unwrap();
        assert_eq!(rust + java, 10, "{v}: Rust took {rust}, Java {java}");
        both_see(&peer, &rl, 0, &v).await;

        // Waiting: Java fills a 1.5 s window; a Rust acquire waits for it to move, then a Java
        // wait for the window the Rust take now fills.
        let name = format!("jrl:wait:{v}");
        let rl = client.get_rate_limiter(&name);
        let interval = Duration::from_millis(1500);
        assert!(
            peer.bool("a", &format!("rl.trysetrate {name} OVERALL 2 1500"))
                .await
        );
        let java_took = Instant::now();
        assert!(peer.bool("a", &format!("rl.tryacquire {name} 2 0")).await);
        tokio::time::timeout(WAIT, rl.acquire_many(2))
            .await
            .unwrap()
            .unwrap();
        let rust_took = Instant::now();
        assert!(
            java_took.elapsed() >= interval - Duration::from_millis(20),
            "{v}: Rust took Java's window after {:?}",
            java_took.elapsed()
        );
        assert!(
            !peer.bool("a", &format!("rl.tryacquire {name} 1 0")).await,
            "{v}: Rust's takes fill the window for Java"
        );
        let cmd = format!("rl.tryacquire {name} 1 {}", WAIT.as_millis());
        assert!(peer.bool("a", &cmd).await, "{v}: Java's wait");
        // `rust_took` is after Rust's take by the reply's latency: a looser bound, still far
        // above a take that did not wait.
        assert!(
            rust_took.elapsed() >= interval - Duration::from_millis(500),
            "{v}: Java took Rust's window after {:?}",
            rust_took.elapsed()
        );
    }
}

/// Our `delete` removes what Redisson's own `delete` removes: afterwards Java's `tryAcquire`
/// fails as on a limiter never configured, Java's `trySetRate` takes again, and the new window
/// is whole (no value or takes of the old one left behind to count against it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_delete_leaves_java_a_limiter_never_configured() {
    let server = TestServer::start();
    let client = server.client().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("jrl:delete:{v}");
        let rl = client.get_rate_limiter(&name);
        assert!(
            peer.bool("a", &format!("rl.trysetrate {name} OVERALL 5 60000"))
                .await
        );
        assert!(peer.bool("a", &format!("rl.tryacquire {name} 2 0")).await);
        assert!(rl.try_acquire_many(2).await.unwrap(), "{v}");
        both_see(&peer, &rl, 1, &v).await;

        assert!(rl.delete().await.unwrap(), "{v}");
        let java = peer
            .call("a", &format!("rl.tryacquire {name} 1 0"))
            .await
            .unwrap_err();
        assert!(
            java.message.contains("RateLimiter is not initialized"),
            "{v}: {java:?}"
        );
        assert!(
            !rl.delete().await.unwrap(),
            "{v}: a second delete found something"
        );

        assert!(
            peer.bool("a", &format!("rl.trysetrate {name} OVERALL 3 60000"))
                .await,
            "{v}: Java could not configure it again"
        );
        both_see(&peer, &rl, 3, &v).await;
    }
}
