//! The Redis server under test: started here on a free loopback port (or given by `REDIS_URL`,
//! loopback only), plus the counters read from it (`INFO commandstats`, `INFO cpu`).

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::util::Result;

/// Where the server listens.
#[derive(Clone, Debug)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub url: String,
}

/// A redis-server this process started; killed (by its own pid) and its directory removed on drop.
pub struct Server {
    child: Child,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The server binary [`start`] runs (set per `--server` section); `REDIS_SERVER_BIN` or
/// `redis-server` until set.
static BIN: std::sync::RwLock<Option<String>> = std::sync::RwLock::new(None);

pub fn use_bin(path: &str) {
    if let Ok(mut b) = BIN.write() {
        *b = Some(path.to_owned());
    }
}

pub fn bin() -> String {
    BIN.read()
        .ok()
        .and_then(|b| b.clone())
        .or_else(|| {
            std::env::var("REDIS_SERVER_BIN")
                .ok()
                .filter(|b| !b.is_empty())
        })
        .unwrap_or_else(|| "redis-server".into())
}

/// Servers started so far: the next one's index for [`crate::pin::server_cpus`] (round robin).
static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Restarts the round robin of server CPUs (each cluster starts its masters from the first CPU).
pub fn reset_cpu_round_robin() {
    STARTED.store(0, std::sync::atomic::Ordering::Relaxed);
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts the chosen server binary ([`bin`]: `redis-server` unless
/// `--server` says otherwise; persistence off) on 127.0.0.1 and waits until it answers PING.
pub fn start() -> Result<(Server, Target)> {
    start_with(&[])
}

/// [`start`] with `extra` arguments (a cluster node's), pinned as the `index`-th server
/// ([`crate::pin::server_cpus`]). The port's bus port (`port + 10000`) is free too.
pub fn start_with(extra: &[&str]) -> Result<(Server, Target)> {
    let bin = bin();
    let index = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut last = String::from("no free port with a free bus port (port + 10000)");
    for attempt in 0..20 {
        let port = free_port()?;
        if port > 55_000 || TcpListener::bind(("127.0.0.1", port + 10_000)).is_err() {
            continue;
        }
        let dir = std::env::temp_dir().join(format!(
            "redisson-lock-bench-{}-{attempt}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir)?;
        let mut cmd = Command::new(&bin);
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--maxclients", "20000"])
            .args(extra)
            .arg("--dir")
            .arg(&dir);
        crate::pin::pin_server(&mut cmd, index);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {bin}: {e} (apt-get install redis-server)"))?;
        let server = Server { child, dir };
        let target = Target {
            host: "127.0.0.1".into(),
            port,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        if wait_ready(&target, Duration::from_secs(10)) {
            return Ok((server, target));
        }
        last = format!("{bin} on port {port} did not answer");
        drop(server);
    }
    Err(last.into())
}

/// `REDIS_URL`, if set: `redis://host:port[/db]`, loopback hosts only.
pub fn from_env() -> Result<Option<Target>> {
    let Ok(url) = std::env::var("REDIS_URL") else {
        return Ok(None);
    };
    let rest = url
        .strip_prefix("redis://")
        .ok_or("REDIS_URL must start with redis://")?;
    let authority = rest.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return Err("REDIS_URL with credentials is not supported by the benchmark".into());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_owned(), p.parse::<u16>()?),
        None => (authority.to_owned(), 6379),
    };
    let loopback = host == "localhost" || host.starts_with("127.") || host == "[::1]";
    if !loopback {
        return Err(
            "REDIS_URL must point at a loopback address (127.0.0.0/8, localhost, [::1])".into(),
        );
    }
    Ok(Some(Target { host, port, url }))
}

fn wait_ready(target: &Target, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(client) = redis::Client::open(target.url.as_str()) {
            if let Ok(mut c) = client.get_connection() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub async fn connect(target: &Target) -> Result<MultiplexedConnection> {
    // redis-rs's default reply timeout (500 ms) is too short for INFO while the scale curves
    // flood the server (100k waiters parking at once).
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(std::time::Duration::from_secs(30)));
    Ok(redis::Client::open(target.url.as_str())?
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// `INFO <section>` as a key -> value map.
pub async fn info(
    conn: &mut MultiplexedConnection,
    section: &str,
) -> Result<HashMap<String, String>> {
    let text: String = redis::cmd("INFO").arg(section).query_async(conn).await?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect())
}

/// Server counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// command -> (calls, usec), from `INFO commandstats` (script-internal calls included).
    pub cmds: HashMap<String, (u64, u64)>,
    /// used_cpu_user + used_cpu_sys, seconds.
    pub cpu_s: f64,
    /// total_commands_processed.
    pub total: u64,
}

pub async fn snapshot(conn: &mut MultiplexedConnection) -> Result<Snapshot> {
    let all = info(conn, "all").await?;
    let mut cmds = HashMap::new();
    for (k, v) in &all {
        if let Some(name) = k.strip_prefix("cmdstat_") {
            let field = |f: &str| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix(f))
                    .and_then(|x| x.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            cmds.insert(name.to_owned(), (field("calls="), field("usec=")));
        }
    }
    let num = |k: &str| {
        all.get(k)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok(Snapshot {
        cmds,
        cpu_s: num("used_cpu_user") + num("used_cpu_sys"),
        total: num("total_commands_processed") as u64,
    })
}

/// What happened between two snapshots.
#[derive(Clone, Debug, Default)]
pub struct Delta {
    pub calls: HashMap<String, u64>,
    pub usec: HashMap<String, u64>,
    pub cpu_s: f64,
    pub total: u64,
}

impl Delta {
    pub fn between(a: &Snapshot, b: &Snapshot) -> Delta {
        let mut d = Delta {
            cpu_s: b.cpu_s - a.cpu_s,
            total: b.total.saturating_sub(a.total),
            ..Delta::default()
        };
        for (name, &(calls, usec)) in &b.cmds {
            let (c0, u0) = a.cmds.get(name).copied().unwrap_or((0, 0));
            if calls > c0 {
                d.calls.insert(name.clone(), calls - c0);
                d.usec.insert(name.clone(), usec.saturating_sub(u0));
            }
        }
        d
    }

    pub fn calls(&self, cmd: &str) -> u64 {
        self.calls.get(cmd).copied().unwrap_or(0)
    }

    /// Every command call, script-internal ones included, minus the INFO probes themselves.
    pub fn all_calls(&self) -> u64 {
        self.calls
            .iter()
            .filter(|(k, _)| k.as_str() != "info")
            .map(|(_, v)| v)
            .sum()
    }

    /// "evalsha 2.00, del 1.00, ..." per `unit`, largest first (INFO excluded).
    pub fn per(&self, unit: f64) -> String {
        let mut v: Vec<(&String, &u64)> = self.calls.iter().filter(|(k, _)| *k != "info").collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.iter()
            .map(|(k, c)| format!("{k} {:.2}", **c as f64 / unit))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Number of connections currently subscribed to at least one channel (`CLIENT LIST`, `sub=`).
pub async fn subscriber_connections(conn: &mut MultiplexedConnection) -> Result<u64> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query_async(conn).await?;
    Ok(list
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .find_map(|kv| kv.strip_prefix("sub="))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n > 0)
        })
        .count() as u64)
}

pub async fn flushall(conn: &mut MultiplexedConnection) -> Result<()> {
    redis::cmd("FLUSHALL").query_async::<()>(conn).await?;
    Ok(())
}
