//! Holder processes (`tests/holder/src/main.rs`) and the checker of their histories.
//!
//! The checker reads every holder's history file and checks, per lock name:
//! * **mutual exclusion**: hold intervals `[acquired, release invoked]` (CLOCK_MONOTONIC ns,
//!   comparable across processes) never overlap pairwise;
//!   (for a read-write lock: a write hold overlaps nothing, read holds may share);
//! * **no lost update**: the unsafe counter equals the number of read-modify-writes done, and
//!   no read hold saw the counter change under it;
//! * **fencing**: the fenced resource's log of accepted writes has strictly increasing tokens,
//!   each token from one writer only, and every write the resource rejected carried a token no
//!   higher than one it had already accepted.
//!
//! Faults outside the model (a holder paused past its lease) are *expected* to break the first
//! two; tests then assert that the checker reports it and that fencing still held.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::AsyncCommands;

/// CLOCK_MONOTONIC in nanoseconds, the clock of the holders' histories.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Path of the holder binary (the `tests/holder` crate of this workspace), built once per test
/// binary with the same profile and target directory as the tests.
pub fn holder_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // <target>/<profile>/deps/<test binary>
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_owned();
        let target_dir = profile_dir.parent().unwrap().to_owned();
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "redisson-lock-holder",
            "--manifest-path",
        ])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
        if release {
            cmd.arg("--release");
        }
        let status = cmd
            .status()
            .expect("run cargo build -p redisson-lock-holder");
        assert!(
            status.success(),
            "cargo build -p redisson-lock-holder failed"
        );
        let bin = profile_dir.join("holder");
        assert!(bin.exists(), "holder binary missing at {}", bin.display());
        bin
    })
    .clone()
}

/// Where the Java peer jars are (`scripts/ensure-java` builds them): `$REDISSON_PEER_DIR`,
/// default `<repo>/interop/java/target`.
pub fn peer_dir() -> PathBuf {
    std::env::var_os("REDISSON_PEER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop/java/target"))
}

/// The main class of the Java holder (the twin of `tests/holder`) in the peer jar.
pub const HOLDER_MAIN: &str = "io.redissonlock.peer.Holder";

/// `java <flags>` running the peer jar of Redisson `version`: its default main class (the
/// peer of the Java tier), or `main` from the same jar (e.g. [`HOLDER_MAIN`]). The flags make
/// a small, quick-starting JVM.
pub fn java_command(version: &str, main: Option<&str>) -> Command {
    let jar = peer_dir().join(format!("redisson-peer-{version}.jar"));
    let mut cmd = jvm("java");
    match main {
        None => cmd.arg("-jar").arg(&jar),
        Some(class) => cmd.arg("-cp").arg(&jar).arg(class),
    };
    cmd
}

/// `java` with the flags of a small, quick-starting JVM.
fn jvm(java: &str) -> Command {
    let mut cmd = Command::new(java);
    cmd.args([
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Xss512k",
        "-Xmx256m",
    ]);
    cmd
}

/// The Java holder of Redisson `version` for a run under libfaketime: the JDK 22+ that
/// `scripts/ensure-java` compiled `TrueClock` with (`interop/java/trueclock/`), so that its
/// history stays on the true monotonic clock. `None` where no such JDK was found.
pub fn true_clock_java_command(version: &str) -> Option<Command> {
    let dir = peer_dir().join("trueclock");
    let java = std::fs::read_to_string(dir.join("java")).ok()?;
    java_true_clock().then_some(())?;
    let jar = peer_dir().join(format!("redisson-peer-{version}.jar"));
    let mut cmd = jvm(java.trim());
    cmd.arg("--enable-native-access=ALL-UNNAMED")
        .arg("-cp")
        .arg(format!("{}:{}", jar.display(), dir.display()))
        .arg(HOLDER_MAIN);
    Some(cmd)
}

/// Whether a Java holder can run under libfaketime (see [`true_clock_java_command`]).
pub fn java_true_clock() -> bool {
    let dir = peer_dir().join("trueclock");
    dir.join("java").exists() && dir.join("TrueClock.class").exists()
}

/// Which holder program runs: the Rust one (`tests/holder`) or the Java one
/// (`io.redissonlock.peer.Holder` in the Redisson peer jar of that version), with the same flags
/// and history lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Lang {
    #[default]
    Rust,
    /// Real Redisson of this version (a peer jar in [`peer_dir`]).
    Java(String),
}

/// Options of one holder process (see `tests/holder/src/main.rs`).
#[derive(Clone, Debug)]
pub struct HolderSpec {
    pub url: String,
    pub store: Option<String>,
    pub lock: String,
    pub iterations: u64,
    pub forever: bool,
    pub hold_ms: u64,
    pub rmw_ms: u64,
    pub gap_ms: u64,
    pub lease_ms: u64,
    pub watchdog_ms: u64,
    pub response_ms: u64,
    pub max_secs: u64,
    pub stop_file: Option<PathBuf>,
    /// `fenced`, `rlock` or `fair`.
    pub kind: &'static str,
    pub fair_wait_ms: u64,
    /// The nodes of a `redlock` holder.
    pub urls: Vec<String>,
    /// Extra environment (e.g. libfaketime's `LD_PRELOAD` and `FAKETIME`).
    pub env: Vec<(String, String)>,
    /// The holder's language (default Rust).
    pub lang: Lang,
}

impl HolderSpec {
    pub fn new(url: &str, lock: &str) -> HolderSpec {
        HolderSpec {
            url: url.to_owned(),
            store: None,
            lock: lock.to_owned(),
            iterations: 5,
            forever: false,
            hold_ms: 0,
            rmw_ms: 5,
            gap_ms: 0,
            lease_ms: 0,
            watchdog_ms: 3000,
            response_ms: 1000,
            max_secs: 60,
            stop_file: None,
            kind: "fenced",
            fair_wait_ms: 5000,
            urls: Vec::new(),
            env: Vec::new(),
            lang: Lang::Rust,
        }
    }
}

/// A running holder process; killed (SIGCONT first) on drop.
pub struct Holder {
    pub child: Child,
    pub history: PathBuf,
}

impl Holder {
    pub fn spawn(spec: &HolderSpec, history: PathBuf) -> Holder {
        let faked = spec.env.iter().any(|(k, _)| k == "FAKETIME");
        let mut cmd = match &spec.lang {
            Lang::Rust => Command::new(holder_bin()),
            Lang::Java(v) if faked => true_clock_java_command(v)
                .expect("a Java holder under libfaketime needs a JDK 22+: run scripts/ensure-java"),
            Lang::Java(v) => java_command(v, Some(HOLDER_MAIN)),
        };
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
        let mut arg = |k: &str, v: String| {
            cmd.arg(format!("--{k}")).arg(v);
        };
        arg("url", spec.url.clone());
        if let Some(s) = &spec.store {
            arg("store", s.clone());
        }
        arg("lock", spec.lock.clone());
        arg("history", history.display().to_string());
        arg("iterations", spec.iterations.to_string());
        arg("forever", u8::from(spec.forever).to_string());
        arg("hold-ms", spec.hold_ms.to_string());
        arg("rmw-ms", spec.rmw_ms.to_string());
        arg("gap-ms", spec.gap_ms.to_string());
        arg("lease-ms", spec.lease_ms.to_string());
        arg("watchdog-ms", spec.watchdog_ms.to_string());
        arg("response-ms", spec.response_ms.to_string());
        arg("max-secs", spec.max_secs.to_string());
        arg("kind", spec.kind.to_owned());
        arg("fair-wait-ms", spec.fair_wait_ms.to_string());
        if !spec.urls.is_empty() {
            arg("urls", spec.urls.join(","));
        }
        if let Some(f) = &spec.stop_file {
            arg("stop-file", f.display().to_string());
        }
        Holder::run(&mut cmd, history)
    }

    /// Starts a holder process from a ready command (its own flags and environment); its
    /// history goes to `history`.
    pub fn run(cmd: &mut Command, history: PathBuf) -> Holder {
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn holder");
        Holder { child, history }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status();
    }

    pub fn pause(&self) {
        self.signal("STOP");
    }

    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// SIGKILL and reap; returns the CLOCK_MONOTONIC time by which the process was surely dead
    /// (after it was reaped: until then it may still have acted).
    pub fn kill9(&mut self) -> u64 {
        self.signal("CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
        mono_ns()
    }

    /// Waits for the process to exit on its own, at most `within`; whether it exited cleanly.
    pub async fn wait(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn events(&self) -> Vec<Event> {
        read_events(&self.history)
    }

    /// Waits until this holder's history has `n` events named `kind`.
    pub async fn wait_for(&self, kind: &str, n: usize, within: Duration) -> bool {
        super::eventually(within, || async {
            self.events().iter().filter(|e| e.kind == kind).count() >= n
        })
        .await
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal("CONT");
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One history line.
#[derive(Clone, Debug)]
pub struct Event {
    pub kind: String,
    pub fields: HashMap<String, String>,
}

impl Event {
    pub fn get(&self, k: &str) -> Option<&str> {
        self.fields.get(k).map(String::as_str)
    }
    pub fn num(&self, k: &str) -> Option<u64> {
        self.get(k).and_then(|v| v.parse().ok())
    }
}

pub fn read_events(path: &Path) -> Vec<Event> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| l.ends_with(|c: char| !c.is_whitespace()))
        .filter_map(|line| {
            let mut parts = line.split(' ');
            let kind = parts.next()?.to_owned();
            let fields = parts
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            Some(Event { kind, fields })
        })
        .collect()
}

/// One hold as the histories saw it.
#[derive(Clone, Debug)]
pub struct Hold {
    pub pid: u32,
    pub lock: String,
    pub start: u64,
    /// When the release was invoked; `None`: never released (killed, or still holding).
    pub end: Option<u64>,
    pub token: i64,
    /// Whether the RMW on the counter completed (`read=` a number).
    pub incremented: bool,
    /// Fenced resource verdict: `Some(true)` accepted, `Some(false)` rejected.
    pub fenced: Option<bool>,
    /// The guard reported the hold lost before the release, or the release said so.
    pub lost: bool,
    /// The guard itself said lost (`is_lost()`) just before the release.
    pub guard_lost: bool,
    /// A read hold of a read-write lock (shared: may overlap other reads).
    pub read: bool,
    /// A read hold saw the counter change under it (a writer inside a read hold).
    pub unstable: bool,
}

impl Hold {
    pub fn end_or(&self, open_end: u64) -> u64 {
        self.end.unwrap_or(open_end)
    }
}

/// How long before a hold's start line its grant may have come, when the holder was stopped
/// with the acquire in flight (see [`Report::unexplained_lost`]).
pub const GRANT_IN_FLIGHT_NS: u64 = 1_000_000_000;

/// One fault the nemesis injected, on the holders' `CLOCK_MONOTONIC` timeline.
#[derive(Clone, Debug)]
pub struct Fault {
    pub kind: &'static str,
    /// The holder process it hit; `None`: the lock server (every holder).
    pub target: Option<u32>,
    pub start: u64,
    pub end: u64,
    /// Whether this fault can make a hold lost (a holder paused or killed, the server stopped,
    /// restarted or its command connections killed); a subscriber-connection kill cannot.
    pub can_lose: bool,
}

impl Fault {
    /// A fault over `[start, now]`.
    pub fn new(kind: &'static str, target: Option<u32>, start: u64, can_lose: bool) -> Fault {
        Fault {
            kind,
            target,
            start,
            end: mono_ns(),
            can_lose,
        }
    }
}

/// Everything the checker found.
#[derive(Debug, Default)]
pub struct Report {
    pub holds: Vec<Hold>,
    /// Pairs of overlapping holds of one lock (indices into `holds`).
    pub overlaps: Vec<(usize, usize)>,
    pub increments: u64,
    pub counter: i64,
    /// Accepted fenced writes in the resource's order: (token, writer pid).
    pub fenced_log: Vec<(i64, u32)>,
    pub fenced_rejected: usize,
    /// Fencing violations (must always be empty).
    pub fencing_errors: Vec<String>,
    pub errors: Vec<Event>,
    /// Read holds that saw the counter change (a writer overlapped them).
    pub unstable_reads: usize,
}

impl Report {
    /// Overlapping pairs in which neither hold was reported lost: a mutual-exclusion violation
    /// inside the model.
    pub fn unexplained_overlaps(&self) -> Vec<(&Hold, &Hold)> {
        self.overlaps
            .iter()
            .map(|&(a, b)| (&self.holds[a], &self.holds[b]))
            .filter(|(a, b)| !a.lost && !b.lost)
            .collect()
    }

    pub fn lost_holds(&self) -> usize {
        self.holds.iter().filter(|h| h.lost).count()
    }

    /// Holds reported lost with no injected fault that could explain it: a fault that can
    /// lose holds, on this holder or on the server, during the hold (or the 200 ms its release
    /// takes to say so). Inside the model a hold is never lost, so every lost hold must be tied
    /// to an injected fault (a watchdog that does not renew fails here).
    ///
    /// A fault on the holder itself also explains a hold whose start line came up to
    /// [`GRANT_IN_FLIGHT_NS`] after the fault ended: a holder stopped while its acquire was in
    /// flight is granted the lock during the stop, loses it there (nobody renews), and writes its
    /// start line only once resumed (a Redisson reader, its line 5 ms after a 2.2 s stop, in CI).
    pub fn unexplained_lost(&self, faults: &[Fault]) -> Vec<&Hold> {
        self.holds
            .iter()
            .filter(|h| h.lost)
            .filter(|h| {
                let to = h.end_or(u64::MAX).saturating_add(200_000_000);
                !faults.iter().any(|f| {
                    let from = match f.target {
                        Some(pid) if pid == h.pid => h.start.saturating_sub(GRANT_IN_FLIGHT_NS),
                        Some(_) => return false,
                        None => h.start,
                    };
                    f.can_lose && f.start <= to && f.end >= from
                })
            })
            .collect()
    }

    /// Asserts the fault-free (inside the model) properties.
    pub fn assert_safe(&self, context: &str) {
        assert!(
            self.fencing_errors.is_empty(),
            "{context}: fencing violated: {:?}",
            self.fencing_errors
        );
        assert!(
            self.overlaps.is_empty(),
            "{context}: overlapping holds: {:?}",
            self.overlaps
                .iter()
                .map(|&(a, b)| (&self.holds[a], &self.holds[b]))
                .collect::<Vec<_>>()
        );
        assert_eq!(self.unstable_reads, 0, "{context}: a read saw a write");
        assert_eq!(
            self.counter, self.increments as i64,
            "{context}: lost update: counter {} after {} increments",
            self.counter, self.increments
        );
    }
}

/// Reads the histories of lock `lock`, closes holds left open at `open_end` (e.g. the time a
/// holder was killed; `u64::MAX` when unknown), and checks them against the counter and the
/// fenced resource on `store`.
pub async fn check(
    store: &mut redis::aio::MultiplexedConnection,
    lock: &str,
    histories: &[PathBuf],
    open_ends: &HashMap<u32, u64>,
) -> Report {
    let mut report = Report::default();
    for path in histories {
        let mut open: Option<Hold> = None;
        for e in read_events(path) {
            if e.get("lock").is_some_and(|l| l != lock) {
                continue;
            }
            let pid = e.num("pid").unwrap_or(0) as u32;
            match e.kind.as_str() {
                "acquired" => {
                    if let Some(h) = open.take() {
                        report.holds.push(h);
                    }
                    open = Some(Hold {
                        pid,
                        lock: lock.to_owned(),
                        start: e.num("start").unwrap(),
                        end: None,
                        token: e.get("token").and_then(|t| t.parse().ok()).unwrap_or(0),
                        incremented: false,
                        fenced: None,
                        lost: false,
                        guard_lost: false,
                        read: e.get("mode") == Some("read"),
                        unstable: false,
                    });
                }
                "releasing" => {
                    // Done with the resource; a kill during the release ends the hold here.
                    if let Some(h) = open.as_mut() {
                        h.end = e.num("end");
                        h.incremented = e.get("read").is_some_and(|r| r != "-");
                        h.guard_lost = e.get("lost") == Some("1");
                        h.lost = h.guard_lost;
                    }
                }
                "released" => {
                    open = None;
                    report.holds.push(Hold {
                        pid,
                        lock: lock.to_owned(),
                        start: e.num("start").unwrap(),
                        end: e.num("end"),
                        token: e.get("token").and_then(|t| t.parse().ok()).unwrap_or(0),
                        incremented: e.get("read").is_some_and(|r| r != "-"),
                        fenced: match e.get("fenced") {
                            Some("1") => Some(true),
                            Some("0") => Some(false),
                            _ => None,
                        },
                        lost: e.get("lost") == Some("1") || e.get("unlock") == Some("lost"),
                        guard_lost: e.get("lost") == Some("1"),
                        read: e.get("mode") == Some("read"),
                        unstable: e.get("stable") == Some("0"),
                    });
                }
                "error" => report.errors.push(e),
                _ => {}
            }
        }
        if let Some(mut h) = open {
            if h.end.is_none() {
                if let Some(&end) = open_ends.get(&h.pid) {
                    h.end = Some(end);
                }
            }
            report.holds.push(h);
        }
    }
    report.holds.sort_by_key(|h| h.start);
    // Pairwise: sorted by start, a hold overlaps every later one that starts before its end.
    for i in 0..report.holds.len() {
        let end = report.holds[i].end_or(u64::MAX);
        for j in i + 1..report.holds.len() {
            if report.holds[j].start >= end {
                break;
            }
            if report.holds[i].read && report.holds[j].read {
                continue; // readers share
            }
            report.overlaps.push((i, j));
        }
    }
    report.increments = report
        .holds
        .iter()
        .filter(|h| h.incremented && !h.read)
        .count() as u64;
    report.unstable_reads = report.holds.iter().filter(|h| h.unstable).count();
    let counter: Option<i64> = store.get(format!("{lock}:counter")).await.unwrap();
    report.counter = counter.unwrap_or(0);
    let log: Vec<String> = store
        .lrange(format!("{lock}:fenced:log"), 0, -1)
        .await
        .unwrap();
    report.fenced_log = log
        .iter()
        .filter_map(|l| l.split_once(':'))
        .map(|(t, p)| (t.parse().unwrap(), p.parse().unwrap()))
        .collect();
    // Accepted tokens strictly increase (one write per hold), and one token belongs to one
    // writer.
    let mut writer_of: HashMap<i64, u32> = HashMap::new();
    for w in report.fenced_log.windows(2) {
        if w[1].0 <= w[0].0 {
            report
                .fencing_errors
                .push(format!("stale token {} accepted after {}", w[1].0, w[0].0));
        }
    }
    for &(t, p) in &report.fenced_log {
        if let Some(other) = writer_of.insert(t, p) {
            if other != p {
                report
                    .fencing_errors
                    .push(format!("token {t} used by two writers ({other} and {p})"));
            }
        }
    }
    // A rejected write must have been stale: some accepted write had a higher token.
    let max_accepted = report.fenced_log.iter().map(|e| e.0).max().unwrap_or(0);
    for h in &report.holds {
        if h.fenced == Some(false) {
            report.fenced_rejected += 1;
            if h.token > max_accepted {
                report.fencing_errors.push(format!(
                    "write with token {} rejected but no higher token was accepted",
                    h.token
                ));
            }
        }
        if h.fenced == Some(true) && !writer_of.contains_key(&h.token) {
            report
                .fencing_errors
                .push(format!("accepted token {} missing from the log", h.token));
        }
    }
    report
}

/// A fresh history path in `dir` for holder number `i`.
pub fn history_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("holder-{i}.history"))
}

/// Checks the histories of `holders` on lock `lock` against the counter and the fenced
/// resource on `server` (see [`check`]).
pub async fn check_holders<'a>(
    server: &super::TestServer,
    lock: &str,
    holders: impl IntoIterator<Item = &'a Holder>,
    open_ends: &HashMap<u32, u64>,
) -> Report {
    let paths: Vec<PathBuf> = holders.into_iter().map(|h| h.history.clone()).collect();
    let mut store = server.conn().await;
    check(&mut store, lock, &paths, open_ends).await
}

/// Spawns `n` holder processes of lock `lock` on `server`, each with the spec `tweak` adjusts,
/// writing their histories in `dir`.
pub fn spawn_holders(
    server: &super::TestServer,
    dir: &Path,
    lock: &str,
    n: usize,
    tweak: impl Fn(&mut HolderSpec),
) -> Vec<Holder> {
    (0..n)
        .map(|i| {
            let mut spec = HolderSpec::new(&server.url(), lock);
            tweak(&mut spec);
            Holder::spawn(&spec, history_path(dir, i))
        })
        .collect()
}
