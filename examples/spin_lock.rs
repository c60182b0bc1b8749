//! A spin lock works where pub/sub does not: waiters poll with a backoff instead of
//! subscribing, and releases publish nothing. Uses `REDIS_URL`, or a throwaway `redis-server`
//! on a free port. Run: `cargo run --example spin_lock`.
mod support;

use std::time::Duration;

use redisson_lock::{Backoff, Client};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis_url().await?;
    let client = Client::connect(&url).await?;
    let name = "example:spin";
    let held = client.get_spin_lock(name).lock().await?;
    // Another task polls every ~20 ms until the holder lets go.
    let lock = client.get_spin_lock_with(name, Backoff::constant(Duration::from_millis(20))?);
    let waiter = tokio::spawn(async move {
        let guard = lock.try_lock_for(Duration::from_secs(10)).await?;
        let got = guard.is_some();
        if let Some(g) = guard {
            g.unlock().await?;
        }
        Ok::<bool, redisson_lock::LockError>(got)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    println!(
        "waiting without a subscription: {} channels subscribed",
        client.stats().subscribed_channels
    );
    held.unlock().await?;
    println!("the waiter found it free: {}", waiter.await??);
    Ok(())
}
