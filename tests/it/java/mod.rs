//! The Java interop tier: real Redisson (the peer in `interop/java/`, one JVM per Redisson
//! version) and the crate on the same lock names, on the harness's own servers.
//!
//! [`JavaPeer`] drives one peer process over its stdin protocol (`interop/java/README.md`).
//! Every scenario runs against every pinned Redisson version ([`peer_versions`]); without the
//! jars the tests fail and say to run `scripts/ensure-java` (`scripts/test --no-java` skips
//! this tier on machines without Java).

mod contention;
mod eviction;
mod fair;
mod fenced_multi;
mod force;
mod holders;
mod leases;
mod non_reentrant;
mod permit_extras;
mod permit_guard;
mod queries;
mod rate_limiter;
mod rw;
mod shutdown;
mod sync_extras;
pub(crate) mod sync_ops;
mod sync_values;
mod sync_wakeups;
mod tls;
mod topologies;
mod wakeups;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

/// The Redisson versions every scenario must run against: the newest 4.x and 3.x on Maven
/// Central (scripts/ensure-java builds their jars).
pub const PINNED: [&str; 2] = ["4.7.0", "3.52.0"];

/// How long the JVM may take to connect and print `ready`.
const READY: Duration = Duration::from_secs(60);
/// How long any one command may take before the test fails (a generous bound, never a hang).
const CALL: Duration = Duration::from_secs(120);

pub use crate::support::checker::{java_command, peer_dir, HOLDER_MAIN};

/// The Redisson versions whose peer jar exists (every pinned one, or the test fails).
pub fn peer_versions() -> Vec<String> {
    let dir = peer_dir();
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let v = name.strip_prefix("redisson-peer-")?.strip_suffix(".jar")?;
                    v.chars()
                        .next()
                        .filter(char::is_ascii_digit)
                        .map(|_| v.to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.reverse();
    let missing: Vec<&str> = PINNED
        .iter()
        .copied()
        .filter(|v| !found.iter().any(|f| f == v))
        .collect();
    assert!(
        missing.is_empty(),
        "no Redisson peer jar for {missing:?} in {}: run `scripts/ensure-java` to build them \
         (needs a JDK 17+ and Maven), or skip the Java tier with `scripts/test --no-java` \
         (`cargo test --test it -- --skip java::`)",
        dir.display()
    );
    found
}

/// What the peer connects to.
#[derive(Clone, Debug)]
pub enum PeerTarget {
    Single(String),
    Cluster(Vec<String>),
    Sentinel { urls: Vec<String>, master: String },
}

/// An `err` reply: the Java exception's simple class name and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JavaErr {
    pub class: String,
    pub message: String,
}

type Reply = Result<String, JavaErr>;
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

/// One running peer JVM (one `RedissonClient`); killed on drop.
pub struct JavaPeer {
    version: String,
    uuid: String,
    _child: Child,
    to_stdin: mpsc::UnboundedSender<String>,
    pending: Pending,
    next: AtomicU64,
    stderr: Arc<Mutex<Vec<String>>>,
    tids: Mutex<HashMap<String, u64>>,
}

/// A URL as Redisson wants it: no trailing slash.
fn redisson_url(url: &str) -> String {
    url.trim_end_matches('/').to_owned()
}

impl JavaPeer {
    /// Starts the peer of Redisson `version` against `target`, with Redisson's
    /// `lockWatchdogTimeout` set to `watchdog` when given, and waits for `ready`.
    pub async fn start(version: &str, target: PeerTarget, watchdog: Option<Duration>) -> JavaPeer {
        JavaPeer::start_with(version, target, watchdog, &[]).await
    }

    /// [`start`](Self::start) with more peer options (e.g. `--tls-ca <pem>`).
    pub async fn start_with(
        version: &str,
        target: PeerTarget,
        watchdog: Option<Duration>,
        extra: &[&str],
    ) -> JavaPeer {
        let jar = peer_dir().join(format!("redisson-peer-{version}.jar"));
        let mut cmd = Command::from(java_command(version, None));
        match &target {
            PeerTarget::Single(url) => {
                cmd.args(["--mode", "single", "--address", &redisson_url(url)]);
            }
            PeerTarget::Cluster(urls) => {
                let urls: Vec<String> = urls.iter().map(|u| redisson_url(u)).collect();
                cmd.args(["--mode", "cluster", "--address", &urls.join(",")]);
            }
            PeerTarget::Sentinel { urls, master } => {
                let urls: Vec<String> = urls.iter().map(|u| redisson_url(u)).collect();
                cmd.args(["--mode", "sentinel", "--address", &urls.join(",")]);
                cmd.args(["--master", master]);
            }
        }
        if let Some(w) = watchdog {
            cmd.args(["--watchdog-ms", &w.as_millis().to_string()]);
        }
        cmd.args(extra);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `java -jar {}`: {e}", jar.display()));

        let stderr = Arc::new(Mutex::new(Vec::new()));
        let err_lines = stderr.clone();
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = err.next_line().await {
                err_lines.lock().unwrap().push(line);
            }
        });

        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(READY, out.next_line()).await;
        let uuid = match first {
            Ok(Ok(Some(line))) if line.starts_with("ready ") => line["ready ".len()..].to_owned(),
            other => {
                // Give stderr a moment to arrive for the message.
                tokio::time::sleep(Duration::from_millis(300)).await;
                panic!(
                    "Redisson {version} peer did not get ready within {READY:?}: {other:?}; stderr: {}",
                    stderr.lock().unwrap().join("\n")
                )
            }
        };

        let pending: Pending = Arc::default();
        let routes = pending.clone();
        let v = version.to_owned();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                let Some((id, reply)) = parse_reply(&line) else {
                    eprintln!("Redisson {v} peer: unexpected line {line:?}");
                    continue;
                };
                if let Some(tx) = routes.lock().unwrap().remove(&id) {
                    let _ = tx.send(reply);
                }
            }
            // The process is gone: every caller still waiting learns it (its sender drops).
            routes.lock().unwrap().clear();
        });

        let mut stdin = child.stdin.take().unwrap();
        let (to_stdin, mut lines) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(line) = lines.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });

        JavaPeer {
            version: version.to_owned(),
            uuid,
            _child: child,
            to_stdin,
            pending,
            next: AtomicU64::new(1),
            stderr,
            tids: Mutex::default(),
        }
    }

    /// Starts the peer against one standalone server.
    pub async fn single(version: &str, url: &str, watchdog: Option<Duration>) -> JavaPeer {
        JavaPeer::start(version, PeerTarget::Single(url.to_owned()), watchdog).await
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// The Redisson client's UUID (the first part of every hash field it writes).
    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// Sends `<op args>` as `owner` and returns the reply's future: it resolves when the reply
    /// comes, and fails the test (with the command) if none comes within [`CALL`] or the peer
    /// exits. Sending is immediate, so a blocking Java call can be started and awaited later.
    pub fn send(&self, owner: &str, cmd: &str) -> impl std::future::Future<Output = Reply> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let text = format!("{owner} {cmd}");
        let sent = self.to_stdin.send(format!("{id} {text}\n")).is_ok();
        let version = self.version.clone();
        let stderr = self.stderr.clone();
        async move {
            assert!(
                sent,
                "Redisson {version} peer: stdin closed, cannot send `{text}`"
            );
            match tokio::time::timeout(CALL, rx).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(_)) => panic!(
                    "Redisson {version} peer exited before answering `{text}`; stderr: {}",
                    stderr.lock().unwrap().join("\n")
                ),
                Err(_) => panic!("Redisson {version} peer: no reply to `{text}` within {CALL:?}"),
            }
        }
    }

    /// Runs `<op args>` as `owner`: the value, or the Java exception.
    pub async fn call(&self, owner: &str, cmd: &str) -> Reply {
        self.send(owner, cmd).await
    }

    /// [`call`](Self::call) that must succeed.
    pub async fn ok(&self, owner: &str, cmd: &str) -> String {
        match self.call(owner, cmd).await {
            Ok(v) => v,
            Err(e) => panic!("Redisson {}: `{owner} {cmd}` failed: {e:?}", self.version),
        }
    }

    /// [`ok`](Self::ok) whose value is a boolean.
    pub async fn bool(&self, owner: &str, cmd: &str) -> bool {
        parse_bool(&self.ok(owner, cmd).await, cmd)
    }

    /// [`ok`](Self::ok) whose value is an integer.
    pub async fn int(&self, owner: &str, cmd: &str) -> i64 {
        let v = self.ok(owner, cmd).await;
        v.parse()
            .unwrap_or_else(|_| panic!("`{cmd}`: not an integer: {v:?}"))
    }

    /// The Java thread id of `owner` (its first use creates the thread).
    pub async fn tid(&self, owner: &str) -> u64 {
        if let Some(t) = self.tids.lock().unwrap().get(owner) {
            return *t;
        }
        let t = self.int(owner, "tid").await as u64;
        self.tids.lock().unwrap().insert(owner.to_owned(), t);
        t
    }

    /// The hash field `owner` writes: `<uuid>:<thread id>`.
    pub async fn field(&self, owner: &str) -> String {
        format!("{}:{}", self.uuid, self.tid(owner).await)
    }

    /// `lock <kind> <name> <leaseMs>` (`None`: the watchdog); fenced: the token.
    pub async fn lock(
        &self,
        owner: &str,
        kind: &str,
        name: &str,
        lease: Option<Duration>,
    ) -> String {
        self.ok(owner, &format!("lock {kind} {name} {}", ms(lease)))
            .await
    }

    /// `trylock <kind> <name> <waitMs> <leaseMs>` for a non-fenced kind.
    pub async fn try_lock(
        &self,
        owner: &str,
        kind: &str,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> bool {
        let cmd = format!("trylock {kind} {name} {} {}", wait.as_millis(), ms(lease));
        self.bool(owner, &cmd).await
    }

    /// `unlock <kind> <name>`: `Ok` or the Java exception.
    pub async fn unlock(&self, owner: &str, kind: &str, name: &str) -> Result<(), JavaErr> {
        self.call(owner, &format!("unlock {kind} {name}"))
            .await
            .map(|_| ())
    }
}

/// Milliseconds of a lease, `-1` for none (the watchdog).
pub fn ms(lease: Option<Duration>) -> String {
    lease.map_or("-1".to_owned(), |d| d.as_millis().to_string())
}

fn parse_bool(v: &str, cmd: &str) -> bool {
    match v {
        "true" => true,
        "false" => false,
        _ => panic!("`{cmd}`: not a boolean: {v:?}"),
    }
}

/// `<id> ok <value...>` or `<id> err <Class> <message...>`.
fn parse_reply(line: &str) -> Option<(u64, Reply)> {
    let (id, rest) = line.split_once(' ')?;
    let id = id.parse().ok()?;
    let (status, body) = rest.split_once(' ').unwrap_or((rest, ""));
    match status {
        "ok" => Some((id, Ok(body.to_owned()))),
        "err" => {
            let (class, message) = body.split_once(' ').unwrap_or((body, ""));
            Some((
                id,
                Err(JavaErr {
                    class: class.to_owned(),
                    message: message.to_owned(),
                }),
            ))
        }
        _ => None,
    }
}

/// Starts one peer per pinned Redisson version against `url`, concurrently (JVM start-up
/// dominates), in [`peer_versions`] order.
pub async fn peers(url: &str, watchdog: Option<Duration>) -> Vec<JavaPeer> {
    let starts = peer_versions()
        .into_iter()
        .map(|v| {
            let url = url.to_owned();
            tokio::spawn(async move { JavaPeer::single(&v, &url, watchdog).await })
        })
        .collect::<Vec<_>>();
    let mut peers = Vec::new();
    for s in starts {
        peers.push(s.await.expect("peer start-up panicked"));
    }
    peers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_reports_errors_as_replies_and_keeps_serving() {
    let server = crate::support::TestServer::start();
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let uuid = uuid::Uuid::parse_str(peer.uuid());
        assert!(uuid.is_ok(), "{v}: ready line gave {:?}", peer.uuid());
        let bogus = peer.call("a", "bogus").await.unwrap_err();
        assert_eq!(bogus.class, "IllegalArgumentException", "{v}");
        let short = peer.call("a", "lock lock").await.unwrap_err();
        assert_eq!(short.class, "IllegalArgumentException", "{v}");
        // Still serving after both, and thread ids are per owner.
        assert_ne!(peer.tid("a").await, peer.tid("b").await, "{v}");
        let field = peer.field("a").await;
        peer.lock("a", "lock", "peer:probe", None).await;
        let mut raw = server.conn().await;
        let fields = crate::support::fields(&mut raw, "peer:probe").await;
        assert_eq!(fields.len(), 1, "{v}: {fields:?}");
        assert_eq!(fields.get(&field), Some(&1), "{v}: {fields:?}");
        peer.unlock("a", "lock", "peer:probe").await.unwrap();
    }
}
