//! A read-write lock: readers share it, a writer waits for them and then excludes everyone, and
//! the write release (message `1`) wakes every waiting reader at once. Uses `REDIS_URL`, or a
//! throwaway `redis-server` on a free port. Run: `cargo run --example read_write`.
mod support;

use std::time::{Duration, Instant};

use redisson_lock::{Client, LockOwner};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis_url().await?;
    let client = Client::connect(&url).await?;
    let rw = client.get_read_write_lock("example:config");
    let reader = || rw.read_lock().with_owner(LockOwner::unique());
    let (r1, r2) = (reader().lock().await?, reader().lock().await?);
    println!("two readers hold it at once");
    let w = rw.write_lock().with_owner(LockOwner::unique());
    let writer = tokio::spawn(async move { w.lock_with_lease(Duration::from_secs(60)).await });
    r1.unlock().await?;
    r2.unlock().await?; // the last reader out publishes `0`
    let w = writer.await??;
    println!("the writer is in (60 s lease); readers queue up behind it");
    let spawn_reader = |r: redisson_lock::Lock<_>| tokio::spawn(async move { r.lock().await });
    let waiting: Vec<_> = (0..3).map(|_| spawn_reader(reader())).collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = Instant::now();
    w.unlock().await?; // publishes `1`: every waiting reader retries at once
    for r in waiting {
        r.await??.unlock().await?;
    }
    println!(
        "3 readers in {:?} after the write release",
        released.elapsed()
    );
    Ok(())
}
