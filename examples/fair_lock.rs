//! A fair lock serves waiters in arrival order, each woken on its own channel. Uses `REDIS_URL`,
//! or a throwaway `redis-server` on a free port. Run: `cargo run --example fair_lock`.
mod support;

use std::time::Duration;

use redisson_lock::redis::AsyncCommands;
use redisson_lock::{Client, LockOwner};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis_url().await?;
    let client = Client::connect(&url).await?;
    let lock = client.get_fair_lock("example:fair");
    let queue = "redisson_lock_queue:{example:fair}"; // the LIST Java's RFairLock uses too
    let mut conn = client.connection();
    let guard = lock.lock().await?;
    let mut workers = Vec::new();
    for i in 1..=3u64 {
        let worker = lock.with_owner(LockOwner::unique());
        workers.push(tokio::spawn(async move {
            let g = worker.lock().await?;
            println!("worker {i} got the lock");
            g.unlock().await // hands over to the next in the queue
        }));
        while conn.llen::<_, u64>(queue).await? < i {
            tokio::time::sleep(Duration::from_millis(5)).await; // worker i queues before i + 1
        }
    }
    let queued: Vec<String> = conn.lrange(queue, 0, -1).await?;
    println!("queued in arrival order: {queued:?}");
    guard.unlock().await?; // wakes the queue head only, on its own channel
    for w in workers {
        w.await??;
    }
    Ok(())
}
