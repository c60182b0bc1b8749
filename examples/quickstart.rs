//! Two clients contend for one lock; the waiter is woken by the release message (pub/sub), and
//! the watchdog keeps a lease alive past its length. Uses `REDIS_URL`, or starts a throwaway
//! `redis-server` on a free port. Run: `cargo run --example quickstart`.
mod support;

use std::time::{Duration, Instant};

use redisson_lock::{Client, Config, LockTtl};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis_url().await?;
    // A short watchdog lease so the renewal is visible within seconds (default: 30 s).
    let config = || Config::new(url.clone()).with_watchdog_timeout(Duration::from_millis(900));
    let alice = Client::with_config(config()).await?;
    let bob = Client::with_config(config()).await?;

    let guard = alice.get_lock("quickstart").lock().await?;
    println!("alice holds the lock (watchdog lease 900 ms)");

    let waiter = tokio::spawn(async move {
        let start = Instant::now();
        let guard = bob.get_lock("quickstart").lock().await?;
        println!(
            "bob acquired after {:?}, woken by alice's release",
            start.elapsed()
        );
        guard.unlock().await
    });

    // Hold for three leases: the watchdog renews every 300 ms, so the lock never expires.
    tokio::time::sleep(Duration::from_millis(2700)).await;
    let ttl = alice.get_lock("quickstart").remain_time_to_live().await?;
    assert!(matches!(ttl, LockTtl::Expires(_)) && !guard.is_lost());
    println!("after 2.7 s alice still holds it, {ttl:?} left (renewed)");

    guard.unlock().await?;
    println!("alice released");
    waiter.await??;
    assert!(!alice.get_lock("quickstart").is_locked().await?);
    println!("done: the lock is free");
    Ok(())
}
