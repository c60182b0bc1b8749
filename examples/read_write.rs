//! A read-write lock: readers share it, a writer waits for them and then excludes everyone, and
//! the write release (message `1`) wakes every waiting reader at once. Uses `REDIS_URL`, or a
//! throwaway `redis-server` on a free port. Run: `cargo run --example read_write`.
use std::process::Stdio;
use std::time::{Duration, Instant};

use redisson_lock::{Client, LockOwner};
use tokio::process::Child;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = redis_url().await?;
    let client = Client::connect(&url).await?;
    let rw = client.get_read_write_lock("example:config");
    let reader = |id| rw.read_lock().with_owner(LockOwner::new(id));
    let (r1, r2) = (reader(1).lock().await?, reader(2).lock().await?);
    println!("two readers hold it at once");
    let w = rw.write_lock().with_owner(LockOwner::new(3));
    let writer = tokio::spawn(async move { w.lock_with_lease(Duration::from_secs(60)).await });
    r1.unlock().await?;
    r2.unlock().await?; // the last reader out publishes `0`
    let w = writer.await??;
    println!("the writer is in (60 s lease); readers queue up behind it");
    let spawn_reader = |r: redisson_lock::Lock<_>| tokio::spawn(async move { r.lock().await });
    let waiting: Vec<_> = (10..13).map(|id| spawn_reader(reader(id))).collect();
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
