//! Locks on a Redis Cluster with sharded pub/sub. Uses `REDIS_CLUSTER_URLS` (comma-separated
//! seed nodes), or starts a throwaway 3-master cluster with redis-server and redis-cli.
//! Run: `cargo run --example cluster`.
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redisson_lock::{Client, Config};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut nodes: Vec<Child> = Vec::new();
    let urls: Vec<String> = match std::env::var("REDIS_CLUSTER_URLS") {
        Ok(v) => v.split(',').map(str::to_owned).collect(),
        Err(_) => {
            let ports = free_ports(3);
            for p in &ports {
                let dir = std::env::temp_dir().join(format!("rl-cluster-{p}"));
                std::fs::create_dir_all(&dir)?;
                let port = p.to_string();
                let args = [
                    "--port",
                    &port,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--cluster-enabled",
                    "yes",
                ];
                let node = Command::new("redis-server")
                    .args(args)
                    .arg("--dir")
                    .arg(&dir)
                    .stdout(Stdio::null())
                    .spawn();
                nodes.push(
                    node.map_err(|e| {
                        format!("redis-server: {e}; apt-get install -y redis-server")
                    })?,
                );
            }
            let cli = |args: &[&str]| {
                Command::new("redis-cli")
                    .args(args)
                    .stderr(Stdio::null())
                    .output()
            };
            let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
            for _ in 0..200 {
                if addrs.iter().all(|a| {
                    cli(&["-p", &a[10..], "ping"]).is_ok_and(|o| o.stdout.starts_with(b"PONG"))
                }) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Command::new("redis-cli")
                .args(["--cluster", "create"])
                .args(&addrs)
                .arg("--cluster-yes")
                .stdout(Stdio::null())
                .status()?;
            let ok = |a: &String| {
                cli(&["-p", &a[10..], "cluster", "info"])
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
            };
            for _ in 0..200 {
                if addrs.iter().all(ok) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            ports
                .iter()
                .map(|p| format!("redis://127.0.0.1:{p}/"))
                .collect()
        }
    };
    let client = Client::with_config(Config::cluster(urls)).await?;
    println!("connected; sharded pub/sub: {}", client.is_sharded_pubsub());
    for name in ["orders:1", "{user42}:profile", "inventory"] {
        let guard = client.get_lock(name).lock().await?;
        let other = client.get_lock(name);
        let waiter = tokio::spawn(async move { other.lock().await?.unlock().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        guard.unlock().await?; // SPUBLISH wakes the waiter on the slot's own node
        waiter.await??;
        println!("{name}: locked, handed over through sharded pub/sub, released");
    }
    for mut n in nodes {
        let _ = n.kill();
        let _ = n.wait();
    }
    Ok(())
}

/// Ports `p` whose cluster bus port `p + 10000` is free too.
fn free_ports(n: usize) -> Vec<u16> {
    let mut ports = Vec::new();
    while ports.len() < n {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        if p < 55000
            && std::net::TcpListener::bind(("127.0.0.1", p + 10000)).is_ok()
            && !ports.contains(&p)
        {
            ports.push(p);
        }
    }
    ports
}
