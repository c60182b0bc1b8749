//! Two clients contend for one lock; the waiter is woken by the release message (pub/sub), and
//! the watchdog keeps a lease alive past its length. Uses `REDIS_URL`, or starts a throwaway
//! `redis-server` on a free port. Run: `cargo run --example quickstart`.
use std::time::{Duration, Instant};

use redisson_lock::{Client, Config, LockTtl};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = redis_url()?;
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

/// `REDIS_URL`, or a throwaway redis-server killed when the guard drops.
fn redis_url() -> Result<(String, Option<Server>), Box<dyn std::error::Error>> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return Ok((url, None));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| {
            format!("cannot start redis-server ({e}); install it: apt-get install -y redis-server")
        })?;
    let url = format!("redis://127.0.0.1:{port}/");
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((url, Some(Server(child))));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err("redis-server did not start".into())
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
