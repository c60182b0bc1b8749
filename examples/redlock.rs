//! A RedLock over three masters (`REDIS_URLS`, comma separated, or three throwaway
//! `redis-server`s on free ports). Run: `cargo run --example redlock`.
mod support;

use redisson_lock::{Client, RedLock};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (urls, _servers) = support::redis_urls(3).await?;
    let mut locks = Vec::new();
    for url in &urls {
        locks.push(connect(url).await?.get_lock("example:redlock"));
    }
    let redlock = RedLock::new(locks)?;
    let guard = redlock.lock_with_lease(Duration::from_secs(10)).await?;
    println!("held on nodes {:?} of {}", guard.held_nodes(), urls.len());
    println!("valid for {:?}", guard.remaining_validity());
    let other = redlock.clone();
    let second = tokio::spawn(async move { other.try_lock().await.map(|g| g.is_some()) });
    println!("another owner got it too: {}", second.await??);
    guard.unlock().await?; // on every node, concurrently
    Ok(())
}

async fn connect(url: &str) -> Result<Client, redisson_lock::LockError> {
    for _ in 0..100 {
        // A freshly started server may need a moment.
        match Client::connect(url).await {
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            ok => return ok,
        }
    }
    Client::connect(url).await
}
