//! Failover awareness through Sentinel: a hold the promoted replica lacks is reported lost at
//! the switch, not at the watchdog's next renewal.
//!
//! How the hold vanishes across the failover: replica sync is off, and the promoted replica
//! must not have the lock's key, the hazard of a failover that comes before the write reached
//! the replica. After the lock is taken (and replicated, `WAIT`), the replica is made writable
//! (`replica-read-only no`) and the key is deleted *on the replica only*: a write on a replica
//! never travels back to its master, so the master still has the hold (its renewals succeed)
//! while the replica, the future master, does not. `SENTINEL FAILOVER` then promotes that
//! replica. The watchdog's period is 30 s (a 90 s watchdog timeout) and the whole test runs in
//! the first few seconds after the lock is taken, so no periodic renewal can explain the loss:
//! only the out-of-turn pass that the switch triggers can.

use std::time::{Duration, Instant};

use redis::Commands;
use redisson_lock::{Client, Config};

use crate::support::cluster::{wait_until, TestSentinel, MASTER_NAME};

/// How soon after the switch the loss must be reported: generous for a loaded machine, far
/// below the watchdog's 30 s period.
const BOUND: Duration = Duration::from_secs(5);

async fn client(s: &TestSentinel, aware: bool) -> Client {
    Client::with_config(
        Config::sentinel(s.sentinel_urls(), MASTER_NAME)
            .with_watchdog_timeout(Duration::from_secs(90))
            .with_replica_sync(None)
            .with_response_timeout(Duration::from_secs(1))
            .with_connection_timeout(Duration::from_secs(1))
            .with_failover_awareness(aware),
    )
    .await
    .expect("client through sentinels")
}

/// Whether every sentinel (by port) has a pub/sub subscriber: the client's `+switch-master`
/// listeners (the sentinels subscribe to nothing on one another).
fn sentinels_watched(ports: &[u16]) -> bool {
    ports.iter().all(|p| {
        let c = redis::Client::open(format!("redis://127.0.0.1:{p}/")).unwrap();
        let Ok(mut c) = c.get_connection_with_timeout(Duration::from_secs(2)) else {
            return false;
        };
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut c)
            .unwrap_or_default();
        list.lines().any(|l| l.contains(" sub=1 "))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_the_new_master_lacks_is_lost_at_the_switch() {
    let s = TestSentinel::start();
    let client = client(&s, true).await;
    let guard = client.get_lock("fa-1").lock().await.unwrap();

    // The hold reaches the replica, then the replica alone loses it.
    let mut master = s.master.conn();
    let _: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut master)
        .unwrap();
    let mut replica = s.replica.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-read-only")
        .arg("no")
        .query(&mut replica)
        .unwrap();
    let _: i64 = replica.del("fa-1").unwrap();
    let on_master: bool = master.exists("fa-1").unwrap();
    assert!(on_master, "the master still has the hold");

    // The client listens on every sentinel before the switch.
    let ports: Vec<u16> = s.sentinels.iter().map(|n| n.port).collect();
    let watched = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(20), || sentinels_watched(&ports))
    })
    .await
    .unwrap();
    assert!(
        watched,
        "the client subscribed to +switch-master on every sentinel"
    );
    assert!(!guard.is_lost());

    // The failover (retried while the sentinels do not yet count the replica as good).
    let old = s.master.port;
    let replica_port = s.replica.port;
    let sentinel_port = s.sentinels[0].port;
    let switched = tokio::task::spawn_blocking(move || {
        let mut sentinel = redis::Client::open(format!("redis://127.0.0.1:{sentinel_port}/"))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap();
        let asked = wait_until(Duration::from_secs(30), || {
            redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(MASTER_NAME)
                .query::<()>(&mut sentinel)
                .is_ok()
        });
        assert!(asked, "SENTINEL FAILOVER accepted");
        let promoted = wait_until(Duration::from_secs(30), || {
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query::<(String, u16)>(&mut sentinel)
                .is_ok_and(|(_, p)| p != old)
        });
        assert!(promoted, "the sentinels promoted the replica");
        Instant::now()
    });
    // Bounded well past the watchdog's first tick (30 s), so that with awareness off the
    // test still ends, and reports how late the regular renewal told.
    let lost = async {
        let _ = tokio::time::timeout(Duration::from_secs(45), guard.lost()).await;
        Instant::now()
    };
    let (switched, lost) = tokio::join!(switched, lost);
    let switched = switched.unwrap();
    let detect = lost.saturating_duration_since(switched);
    eprintln!("time from the switch to lost(): {detect:?}");
    assert!(
        detect < BOUND,
        "lost() {detect:?} after the switch; the watchdog's period is 30 s"
    );
    assert!(guard.is_lost());
    let port = s.master_port();
    assert_eq!(port, Some(replica_port));
}
