//! A semaphore bounds how many workers (in any process, Java ones included) use a resource at
//! once: five workers share two permits; a release wakes a waiter by pub/sub. Uses `REDIS_URL`,
//! or a throwaway `redis-server` on a free port. Run: `cargo run --example semaphore`.
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redisson_lock::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis_url().await?;
    let client = Client::connect(&url).await?;
    let pool = client.get_semaphore("example:pool");
    pool.delete().await?;
    assert!(pool.try_set_permits(2).await?);
    println!("2 permits for 5 workers");

    let busy = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for n in 0..5 {
        let pool = client.get_semaphore("example:pool");
        let busy = busy.clone();
        workers.push(tokio::spawn(async move {
            pool.acquire().await?;
            let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
            assert!(now <= 2, "more holders than permits");
            println!("worker {n} works ({now} busy)");
            tokio::time::sleep(Duration::from_millis(100)).await;
            busy.fetch_sub(1, Ordering::SeqCst);
            pool.release().await
        }));
    }
    for w in workers {
        w.await??;
    }
    assert_eq!(pool.available_permits().await?, 2);
    println!(
        "done: {} permits available again",
        pool.available_permits().await?
    );
    pool.delete().await?;
    Ok(())
}
