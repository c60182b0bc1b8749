//! A RedLock over three masters (`REDIS_URLS`, comma separated, or three throwaway
//! `redis-server`s on free ports). Run: `cargo run --example redlock`.
use redisson_lock::{Client, RedLock};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut servers = Servers(Vec::new());
    let urls: Vec<String> = match std::env::var("REDIS_URLS") {
        Ok(urls) => urls.split(',').map(str::to_owned).collect(),
        Err(_) => vec![servers.start()?, servers.start()?, servers.start()?],
    };
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

struct Servers(Vec<Child>);

impl Servers {
    fn start(&mut self) -> Result<String, Box<dyn std::error::Error>> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let port = port.port().to_string();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port, "--save", ""]);
        self.0.push(cmd.stdout(Stdio::null()).spawn()?);
        Ok(format!("redis://127.0.0.1:{port}/"))
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill().and_then(|_| child.wait());
        }
    }
}
