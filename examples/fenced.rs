//! A fenced lock hands out a strictly increasing token with every acquisition; a resource that
//! remembers the highest token it saw rejects a holder whose lease ran out. Uses `REDIS_URL`, or
//! a throwaway `redis-server` on a free port. Run: `cargo run --example fenced`.
mod support;

use std::time::Duration;

use redisson_lock::{Client, LockOwner};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis_url().await?;
    let client = Client::connect(&url).await?;
    let lock = client.get_fenced_lock("example:ledger");
    let mut highest = 0; // kept by the resource: writes with an older token are refused
    let mut write = |who: &str, token: i64| {
        let accepted = token >= highest;
        highest = highest.max(token);
        println!("{who} writes with token {token}: accepted = {accepted}");
        accepted
    };
    let (alice, bob) = (
        lock.with_owner(LockOwner::unique()),
        lock.with_owner(LockOwner::unique()),
    );
    let a = alice.lock_with_lease(Duration::from_millis(300)).await?;
    assert!(write("alice", a.token()));
    tokio::time::sleep(Duration::from_millis(500)).await; // alice stalls past her lease
    let b = bob.lock().await?;
    let b2 = bob.lock().await?; // a re-entry takes a new token too
    assert!(a.token() < b.token() && b.token() < b2.token());
    assert!(write("bob", b2.token()));
    assert!(a.is_lost() && !write("alice (stale)", a.token()));
    b2.unlock().await?;
    b.unlock().await?;
    Ok(())
}
