//! Test harness: real `redis-server` (or `valkey-server`, `family.rs`) processes on free loopback ports, each in its own temp
//! directory, killed on drop. No fake Redis anywhere.
#![allow(dead_code)]

pub mod checker;
pub mod cluster;
pub mod family;
pub mod netns;
pub mod probes;
pub mod proxy;
pub mod redisson;
pub mod tls;
pub mod waiters;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use family::{family, is_valkey, redis_cli_bin, redis_server_bin};
pub use probes::*;
use redisson_lock::{Client, Config, CountDownLatch, PermitExpirableSemaphore, Semaphore};
pub use waiters::*;

/// The hash field a client writes for an owner: `<client uuid>:<owner id>` (what a Java client
/// sees in the lock hash).
pub fn field(client: &Client, owner: redisson_lock::LockOwner) -> String {
    format!("{}:{}", client.id(), owner.id())
}

/// `client`'s lock `name` as owner `id`, with the hash field that owner writes.
pub fn owned_lock(client: &Client, name: &str, id: u64) -> (redisson_lock::RLock, String) {
    let owner = redisson_lock::LockOwner::new(id);
    (
        client.get_lock(name).with_owner(owner),
        field(client, owner),
    )
}

/// libfaketime's preload library (Debian's `faketime` package), if installed.
pub fn faketime_lib() -> Option<String> {
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    ]
    .iter()
    .find(|p| std::path::Path::new(p).exists())
    .map(|p| p.to_string())
}

/// How to get `redis-server` when it is missing.
pub const INSTALL_HINT: &str =
    "redis-server not found: install it with `apt-get update && apt-get install -y redis-server` \
     (or set REDIS_SERVER_BIN to its path; REDISSON_LOCK_SERVER=valkey after scripts/ensure-valkey \
     runs the suite on Valkey)";

/// A free loopback port (bound, then released for a server to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// `cmd` with the arguments of every test server (`TestServer`'s and the netns `NetServer`'s):
/// `port` on `bind`, no persistence, `dir`, `DEBUG` allowed.
pub fn server_args<'c>(cmd: &'c mut Command, port: u16, bind: &str, dir: &Path) -> &'c mut Command {
    let port = port.to_string();
    cmd.args([
        "--port",
        &port,
        "--bind",
        bind,
        "--save",
        "",
        "--appendonly",
        "no",
    ])
    .args(["--enable-debug-command", "yes", "--dir"])
    .arg(dir)
}

/// One real redis-server.
pub struct TestServer {
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    env: Vec<(String, String)>,
    bin: String,
}

impl TestServer {
    /// Starts a server with persistence off, on a free port.
    pub fn start() -> TestServer {
        TestServer::start_with(&[])
    }

    /// Starts a server with extra `--option value` arguments.
    pub fn start_with(extra: &[&str]) -> TestServer {
        TestServer::start_env(&[], extra)
    }

    /// Starts a server with these environment variables (e.g. libfaketime's) and arguments.
    pub fn start_env(env: &[(&str, &str)], extra: &[&str]) -> TestServer {
        TestServer::start_bin(redis_server_bin(), env, extra)
    }

    /// Starts the pinned Valkey 9.1 (whatever server this run tests), for Valkey 9 features.
    pub fn start_valkey9(extra: &[&str]) -> TestServer {
        TestServer::start_bin(family::valkey9_server_bin(), &[], extra)
    }

    fn start_bin(bin: String, env: &[(&str, &str)], extra: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut server = TestServer {
            port: 0,
            child: None,
            dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            bin,
        };
        server.spawn_on(free_port());
        server
    }

    fn spawn_on(&mut self, port: u16) {
        // Reads (and prints, once per run) which server family this run uses.
        family();
        let mut last_err = None;
        let mut port = port;
        for attempt in 0..5 {
            // A first start that lost its port to another process (the suites of two servers
            // run side by side) tries another; a restart keeps its port.
            if attempt > 0 && self.port == 0 {
                port = free_port();
            }
            let mut cmd = Command::new(&self.bin);
            cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
            server_args(&mut cmd, port, "127.0.0.1", self.dir.path())
                .args(&self.extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL_HINT}"),
                Err(e) => panic!("cannot start redis-server: {e}"),
            };
            // Ready, and ours: a server of another process on the port answers too.
            if wait_ready(port, Duration::from_secs(10)) && serves(port, child.id()) {
                self.port = port;
                self.child = Some(child);
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            last_err = Some(port);
        }
        panic!("redis-server did not come up on port {last_err:?}");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// A raw redis-rs client (what a Java client would see on the wire).
    pub fn raw(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap()
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        raw_conn(&self.raw()).await
    }

    /// Config with short timeouts suited to tests.
    pub fn config(&self) -> Config {
        Config::new(self.url())
    }

    pub async fn client(&self) -> Client {
        Client::with_config(self.config()).await.unwrap()
    }

    pub async fn client_with(&self, f: impl FnOnce(Config) -> Config) -> Client {
        Client::with_config(f(self.config())).await.unwrap()
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restarts an empty server on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let port = self.port;
        self.spawn_on(port);
    }

    /// SIGSTOP / SIGCONT.
    pub fn pause(&self) {
        signal(self.pid(), "STOP");
    }
    pub fn resume(&self) {
        signal(self.pid(), "CONT");
    }
}

/// A test's own connection to a server, with generous timeouts: redis-rs's defaults (a 500 ms
/// reply, a 1 s connect) ran out under load (an `INFO commandstats` of
/// `java::rw::rust_write_release_wakes_every_java_reader` timed out in a local CI run, both
/// server passes and their JVMs running). A test that needs a short bound sets its own.
pub async fn raw_conn(client: &redis::Client) -> redis::aio::MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_ref() {
            signal(c.id(), "CONT");
        }
        self.kill();
    }
}

/// Whether the server answering on `port` is process `pid` (`INFO server`'s `process_id`);
/// `true` when it cannot tell (a server that wants a password first).
fn serves(port: u16, pid: u32) -> bool {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let Ok(mut c) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
        return false;
    };
    match redis::cmd("INFO").arg("server").query::<String>(&mut c) {
        Ok(info) => info_field(&info, "process_id").is_none_or(|p| p == pid.to_string()),
        Err(_) => true,
    }
}

fn wait_ready(port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    while Instant::now() < deadline {
        if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200)) {
            match redis::cmd("PING").query::<String>(&mut c) {
                // A server with `requirepass` answers too, with NOAUTH.
                Ok(_) => return true,
                Err(e) if e.code() == Some("NOAUTH") => return true,
                Err(_) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The usual test preamble in one call: a fresh server, a client of it and a raw connection
/// (what a Java client would see), as `(server, client, raw)`. Bind the server to a name (not
/// `_`): it is killed when dropped.
pub async fn fixture() -> (TestServer, Client, redis::aio::MultiplexedConnection) {
    fixture_with(|c| c).await
}

/// [`fixture`] plus a second, independent client (another process as far as Redis can tell):
/// `(server, client, raw, other)`.
pub async fn fixture_with_other() -> (
    TestServer,
    Client,
    redis::aio::MultiplexedConnection,
    Client,
) {
    let (server, client, raw) = fixture().await;
    let other = server.client().await;
    (server, client, raw, other)
}

/// [`fixture`] with the client's `Config` adjusted by `config` (e.g. a short watchdog lease).
pub async fn fixture_with(
    config: impl FnOnce(Config) -> Config,
) -> (TestServer, Client, redis::aio::MultiplexedConnection) {
    let server = TestServer::start();
    let client = server.client_with(config).await;
    let raw = server.conn().await;
    (server, client, raw)
}

/// A fresh server and one client of it, as `(server, client)`.
pub async fn with_client() -> (TestServer, Client) {
    let server = TestServer::start();
    let client = server.client().await;
    (server, client)
}

/// A fresh server and two independent clients of it (e.g. a holder's and a waiter's), as
/// `(server, [first, second])`.
pub async fn two_clients() -> (TestServer, [Client; 2]) {
    let (server, first) = with_client().await;
    let second = server.client().await;
    (server, [first, second])
}

/// What the synchronizer fixtures return: `(server, client, raw, synchronizer)`.
pub type Armed<T> = (TestServer, Client, redis::aio::MultiplexedConnection, T);

/// [`fixture`] plus the synchronizer `make` gets from its client, armed by `arm` (fresh, so
/// arming must take).
async fn armed<T: Clone, Fut>(
    make: impl FnOnce(&Client) -> T,
    arm: impl FnOnce(T) -> Fut,
) -> Armed<T>
where
    Fut: std::future::Future<Output = redisson_lock::Result<bool>>,
{
    let (server, client, raw) = fixture().await;
    let synchronizer = make(&client);
    assert!(arm(synchronizer.clone()).await.unwrap());
    (server, client, raw, synchronizer)
}

/// [`fixture`] plus its client's semaphore `name`, set to `permits`.
pub async fn semaphore_fixture(name: &str, permits: i32) -> Armed<Semaphore> {
    armed(
        |c| c.get_semaphore(name),
        |s| async move { s.try_set_permits(permits).await },
    )
    .await
}

/// [`fixture`] plus its client's permit-expirable semaphore `name`, set to `permits`.
pub async fn pes_fixture(name: &str, permits: i32) -> Armed<PermitExpirableSemaphore> {
    armed(
        |c| c.get_permit_expirable_semaphore(name),
        |s| async move { s.try_set_permits(permits).await },
    )
    .await
}

/// [`fixture`] plus its client's count-down latch `name`, armed with `count`.
pub async fn latch_fixture(name: &str, count: i64) -> Armed<CountDownLatch> {
    armed(
        |c| c.get_count_down_latch(name),
        |l| async move { l.try_set_count(count).await },
    )
    .await
}

/// [`fixture`] plus a listener already subscribed to `channel`: `(server, client, raw, listener)`.
pub async fn fixture_listening(
    channel: &str,
) -> (
    TestServer,
    Client,
    redis::aio::MultiplexedConnection,
    Listener,
) {
    let (server, client, raw) = fixture().await;
    let listener = Listener::start(&server, channel).await;
    (server, client, raw, listener)
}

/// `config` for fault tests: a watchdog lease of `lease`, and calls that give up after
/// `timeout` (both the response and the connection timeout).
pub fn fail_fast(config: Config, lease: Duration, timeout: Duration) -> Config {
    config
        .with_watchdog_timeout(lease)
        .with_response_timeout(timeout)
        .with_connection_timeout(timeout)
}

/// Names with unbalanced or empty braces: by Redisson's naming rule their channel or latch
/// lands in another cluster slot than the key (issue 10, defect 3).
pub const SPLIT_NAMES: [&str; 5] = ["a{b", "a}b", "{}x", "}{", "x{}y{z}"];

/// `n` independent servers (for RedLock).
pub fn servers(n: usize) -> Vec<TestServer> {
    (0..n).map(|_| TestServer::start()).collect()
}

/// Runs `task(t)` for every `t` in `0..n` as concurrent tokio tasks and waits for them all; a
/// panic in any of them fails the test.
pub async fn concurrently<Fut>(n: usize, task: impl Fn(usize) -> Fut)
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let tasks: Vec<_> = (0..n).map(|t| tokio::spawn(task(t))).collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// Polls `check` until it returns true or `within` passes; for waiting on *external* state that
/// has no event (e.g. a key's expiry). Returns whether it became true.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A SUBSCRIBE listener on a raw connection: records every message on `channel`.
pub struct Listener {
    rx: tokio::sync::mpsc::UnboundedReceiver<String>,
    _task: tokio::task::JoinHandle<()>,
}

impl Listener {
    pub async fn start(server: &TestServer, channel: &str) -> Listener {
        use futures_util::StreamExt;
        let mut pubsub = server.raw().get_async_pubsub().await.unwrap();
        pubsub.subscribe(channel).await.unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut stream = pubsub.into_on_message();
            while let Some(msg) = stream.next().await {
                let payload: String = msg.get_payload().unwrap_or_default();
                if tx.send(payload).is_err() {
                    break;
                }
            }
        });
        Listener { rx, _task: task }
    }

    /// The next message, or `None` if none arrives within `within`.
    pub async fn next(&mut self, within: Duration) -> Option<String> {
        tokio::time::timeout(within, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Messages already received, without waiting.
    pub fn drain(&mut self) -> Vec<String> {
        let mut v = Vec::new();
        while let Ok(m) = self.rx.try_recv() {
            v.push(m);
        }
        v
    }
}
