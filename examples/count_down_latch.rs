//! A count-down latch: a coordinator waits until three workers have reported ready; the last
//! count-down publishes `0`, which wakes every waiter at once. Uses `REDIS_URL`, or a throwaway
//! `redis-server` on a free port. Run: `cargo run --example count_down_latch`.
mod support;

use std::time::Duration;

use redisson_lock::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis_url().await?;
    let client = Client::connect(&url).await?;
    let ready = client.get_count_down_latch("example:ready");
    ready.delete().await?;
    assert!(ready.try_set_count(3).await?);

    let coordinator = {
        let ready = ready.clone();
        tokio::spawn(async move { ready.wait().await })
    };
    for n in 0..3 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        ready.count_down().await?;
        println!("worker {n} ready, {} to go", ready.get_count().await?);
    }
    coordinator.await??;
    println!("coordinator: everyone is ready");
    assert!(ready.wait_for(Duration::ZERO).await?);
    Ok(())
}
