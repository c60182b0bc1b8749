//! A fenced lock hands out a strictly increasing token with every acquisition; a resource that
//! remembers the highest token it saw rejects a holder whose lease ran out. Uses `REDIS_URL`, or
//! a throwaway `redis-server` on a free port. Run: `cargo run --example fenced`.
use std::process::Stdio;
use std::time::Duration;

use redisson_lock::{Client, LockOwner};
use tokio::process::Child;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = redis_url().await?;
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
        lock.with_owner(LockOwner::new(1)),
        lock.with_owner(LockOwner::new(2)),
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

/// `REDIS_URL`, or a throwaway `redis-server` on a free port (killed when the child drops).
async fn redis_url() -> Result<(String, Option<Child>), Box<dyn std::error::Error>> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return Ok((url, None));
    }
    let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let port = addr.port().to_string();
    let args = ["--port", &port, "--bind", "127.0.0.1", "--save", ""];
    let mut cmd = tokio::process::Command::new("redis-server");
    cmd.args(args).stdout(Stdio::null()).kill_on_drop(true);
    let server = cmd
        .spawn()
        .map_err(|e| format!("redis-server: {e} (apt-get install it)"))?;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok((format!("redis://{addr}/"), Some(server)));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err("redis-server did not start".into())
}
