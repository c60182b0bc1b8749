//! Throwaway `redis-server`s for the examples: started on free loopback ports, killed on drop.
#![allow(dead_code)]

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// Servers started for an example; dropping this kills them.
pub struct Servers(Vec<Child>);

/// `REDIS_URL`, or one throwaway server.
pub async fn redis_url() -> Result<(String, Servers), Box<dyn std::error::Error>> {
    match std::env::var("REDIS_URL") {
        Ok(url) => Ok((url, Servers(Vec::new()))),
        Err(_) => {
            let (mut urls, servers) = start(1).await?;
            Ok((urls.remove(0), servers))
        }
    }
}

/// `REDIS_URLS` (comma separated), or `n` throwaway servers.
pub async fn redis_urls(n: usize) -> Result<(Vec<String>, Servers), Box<dyn std::error::Error>> {
    match std::env::var("REDIS_URLS") {
        Ok(urls) => Ok((
            urls.split(',').map(str::to_owned).collect(),
            Servers(Vec::new()),
        )),
        Err(_) => start(n).await,
    }
}

async fn start(n: usize) -> Result<(Vec<String>, Servers), Box<dyn std::error::Error>> {
    let mut servers = Servers(Vec::new());
    let mut urls = Vec::new();
    for _ in 0..n {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let port = addr.port().to_string();
        let child = Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start redis-server ({e}); install it: apt-get install -y redis-server"
                )
            })?;
        servers.0.push(child);
        let mut up = false;
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if !up {
            return Err("redis-server did not start".into());
        }
        urls.push(format!("redis://{addr}/"));
    }
    Ok((urls, servers))
}
