//! A lock holder process for the fault-injection suite (`tests/fault_*.rs`).
//!
//! Takes a lock by name, records every hold interval in CLOCK_MONOTONIC nanoseconds (one clock
//! for every process on the machine, read past libfaketime: see `mono_ns`) with its fencing token to a history file, and inside each
//! hold does a deliberately unsafe read-modify-write (GET, sleep, SET) on a shared counter and
//! one write to a toy fenced resource that rejects stale tokens. Tests kill it, stop it and
//! starve it; `tests/it/support/checker.rs` reads the histories.
//!
//! ```text
//! cargo run -p redisson-lock-holder -- --url redis://127.0.0.1:6379/ --lock demo --history /tmp/h1
//! ```
//!
//! Options (all `--name value`):
//! * `--url` lock server; `--store` server of the counter and fenced resource (default: `--url`)
//! * instead of `--url` (then `--store` is required): `--sentinels host:port,... --master NAME`
//!   (a Sentinel group), or `--cluster url,url,...` (a Redis Cluster)
//! * `--failover-aware 0|1` (`Config::with_failover_awareness`, default: the crate's);
//!   `--replica-sync N` `WAIT` after lock writes with an `N` ms timeout, `0` off
//!   (`Config::with_replica_sync`; default: the crate's)
//! * `--lock` lock name; `--history` file to append to (required)
//! * `--iterations` holds to take (default 10); `--forever 1` takes one hold and keeps it
//! * `--hold-ms` sleep inside the hold before the writes (default 0); `--rmw-ms` sleep between
//!   GET and SET (default 5); `--gap-ms` sleep between holds (default 0)
//! * `--lease-ms` fixed lease (default 0: watchdog); `--watchdog-ms` watchdog lease (default
//!   30000); `--response-ms` reply timeout (default 3000)
//! * `--kind` `fenced` (default, writes carry the fencing token), `rlock`, `fair`, the two
//!   sides of a read-write lock, `write` and `read`, or `redlock` over the nodes of `--urls
//!   a,b,c` (`--node-timeout-ms`, default 300); all but `fenced` skip the fenced write. A
//!   `read` holder does not write: it reads the counter twice, `--rmw-ms` apart, and records
//!   whether the value held still (`stable=1|0`: a writer inside a read hold changes it); `--fair-wait-ms` the fair lock's wait timeout for queued waiters
//!   (default 5000)
//! * `--fence-equal 1` (or the environment `HOLDER_FENCE_EQUAL=1`) breaks the fenced resource on
//!   purpose: it accepts a token equal to the highest seen (the campaign's break check only)
//! * `--max-secs` the process exits by itself after this long (default 60)
//! * `--stop-file` stop before the next hold once this file exists
//!
//! History lines (`key=value`, one per event, written with one `write` each):
//! * `acquired pid= lock= start= token= mode=write|read`
//! * `released pid= lock= start= end= token= read= mode=write|read stable=1|0|- fenced=1|0|-
//!   lost=0|1 unlock=ok|lost|error`
//! * `read pid= lock= value=` (the counter was read; the write follows after `--rmw-ms`)
//! * `releasing pid= lock= start= end= read= fenced= lost=` (done with the resource; the release
//!   follows)
//! * `lost pid= lock= start= at=` the guard's `lost()` resolved during the hold that began at
//!   `start`, at `at` (written once per hold, before its `releasing`)
//! * `started pid= lock=`, `error pid= op= msg=` and `done pid= holds=`
use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redisson_lock::{
    Client, Config, Lock, LockError, LockGuard, LockKind, MultiLockGuard, RedLock,
};

/// The toy fenced resource: accept a write only with a token above the highest seen (one write
/// per hold), and log every accepted write so the checker can see the order. Strictly above:
/// with "at least", a token handed out again after the counter was lost (a restart) would let a
/// second holder in with an equal token.
const FENCED_WRITE: &str = r"
local max = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token <= max then
    return 0
end
redis.call('set', KEYS[1], token)
redis.call('rpush', KEYS[2], ARGV[1] .. ':' .. ARGV[2])
return 1
";

/// The same resource broken on purpose (`--fence-equal 1`): it also accepts a token equal to
/// the highest seen. Only for showing that the campaign catches it.
const FENCED_WRITE_EQUAL: &str = r"
local max = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token < max then
    return 0
end
redis.call('set', KEYS[1], token)
redis.call('rpush', KEYS[2], ARGV[1] .. ':' .. ARGV[2])
return 1
";

/// CLOCK_MONOTONIC in nanoseconds: comparable between processes on one machine, unlike
/// `Instant`, and immune to wall-clock steps. Read with the raw `clock_gettime` system call,
/// which an `LD_PRELOAD` library cannot intercept: a holder run under libfaketime with a clock
/// rate (`FAKETIME="+0 x1.25"`, which fakes CLOCK_MONOTONIC too, and with it tokio's timers and
/// the watchdog) still writes its history on the machine's true clock, so the checker can
/// compare its holds with everyone else's.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_MONOTONIC,
            &mut ts as *mut libc::timespec,
        )
    };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

struct History {
    file: std::fs::File,
    pid: u32,
}

impl History {
    fn line(&self, event: &str, fields: &[(&str, String)]) {
        let mut s = format!("{event} pid={}", self.pid);
        for (k, v) in fields {
            s.push_str(&format!(" {k}={v}"));
        }
        s.push('\n');
        // One write per line: a killed process leaves whole lines only.
        (&self.file)
            .write_all(s.as_bytes())
            .expect("history write failed");
    }
}

fn args() -> HashMap<String, String> {
    let mut map = HashMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let key = k.trim_start_matches("--").to_owned();
        let value = it.next().unwrap_or_else(|| panic!("missing value for {k}"));
        map.insert(key, value);
    }
    map
}

fn num(args: &HashMap<String, String>, key: &str, default: u64) -> u64 {
    args.get(key)
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("--{key}: not a number"))
        })
        .unwrap_or(default)
}

/// `host:port` or a URL, as a sentinel URL.
fn sentinel_url(s: &str) -> String {
    if s.contains("://") {
        s.to_owned()
    } else {
        format!("redis://{s}/")
    }
}

fn one_line(e: &dyn std::fmt::Display) -> String {
    e.to_string().replace([' ', '\n'], "_")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = args();
    let topology = if let Some(list) = a.get("sentinels") {
        let master = a.get("master").expect("--master with --sentinels").clone();
        let urls: Vec<String> = list.split(',').map(sentinel_url).collect();
        Some(Config::sentinel(urls, master))
    } else {
        a.get("cluster")
            .map(|list| Config::cluster(list.split(',').map(str::to_owned)))
    };
    let url = match (&topology, a.get("url")) {
        (_, Some(u)) => u.clone(),
        (Some(_), None) => String::new(),
        (None, None) => panic!("--url, --sentinels or --cluster"),
    };
    let store_url = a.get("store").cloned().unwrap_or_else(|| url.clone());
    assert!(
        !store_url.is_empty(),
        "--store with --sentinels or --cluster"
    );
    let name = a.get("lock").expect("--lock").clone();
    let path = a.get("history").expect("--history").clone();
    let iterations = num(&a, "iterations", 10);
    let forever = num(&a, "forever", 0) == 1;
    let hold = Duration::from_millis(num(&a, "hold-ms", 0));
    let rmw = Duration::from_millis(num(&a, "rmw-ms", 5));
    let gap = Duration::from_millis(num(&a, "gap-ms", 0));
    let lease = num(&a, "lease-ms", 0);
    let stop_file = a.get("stop-file").cloned();
    let deadline = Instant::now() + Duration::from_secs(num(&a, "max-secs", 60));
    let counter_key = format!("{name}:counter");
    let max_key = format!("{name}:fenced:max");
    let log_key = format!("{name}:fenced:log");

    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("open history");
    let h = History {
        file,
        pid: std::process::id(),
    };
    let config = |url: String| {
        let base = match &topology {
            Some(t) => t.clone(),
            None => Config::new(url),
        };
        let base = match a.get("failover-aware") {
            Some(v) => base.with_failover_awareness(v == "1"),
            None => base,
        };
        let base = match a.get("replica-sync") {
            Some(_) => match num(&a, "replica-sync", 0) {
                0 => base.with_replica_sync(None),
                ms => base.with_replica_sync(Some(Duration::from_millis(ms))),
            },
            None => base,
        };
        base.with_watchdog_timeout(Duration::from_millis(num(&a, "watchdog-ms", 30_000)))
            .with_response_timeout(Duration::from_millis(num(&a, "response-ms", 3000)))
            .with_connection_timeout(Duration::from_millis(num(&a, "response-ms", 3000)))
            .with_fair_lock_wait_timeout(Duration::from_millis(num(&a, "fair-wait-ms", 5000)))
    };
    let kind = a.get("kind").cloned().unwrap_or_else(|| "fenced".into());
    // A RedLock takes one client per node (`--urls a,b,c`); every other kind one client.
    let urls: Vec<String> = match a.get("urls") {
        Some(list) if kind == "redlock" => list.split(',').map(str::to_owned).collect(),
        _ => vec![url],
    };
    let mut clients = Vec::new();
    for u in urls {
        match Client::with_config(config(u)).await {
            Ok(c) => clients.push(c),
            Err(e) => {
                h.line("error", &[("op", "connect".into()), ("msg", one_line(&e))]);
                std::process::exit(2);
            }
        }
    }
    let client = clients[0].clone();
    let store = redis::Client::open(store_url).expect("store url");
    let mut store = store
        .get_multiplexed_async_connection()
        .await
        .expect("store connection");
    let fence_equal = num(&a, "fence-equal", 0) == 1
        || std::env::var("HOLDER_FENCE_EQUAL").is_ok_and(|v| v == "1");
    let fenced = redis::Script::new(if fence_equal {
        FENCED_WRITE_EQUAL
    } else {
        FENCED_WRITE
    });
    let run = Run {
        name: name.clone(),
        iterations,
        forever,
        hold,
        rmw,
        gap,
        lease,
        stop_file,
        deadline,
        counter_key,
        max_key,
        log_key,
        fenced,
        reader: a.get("kind").is_some_and(|k| k == "read"),
    };
    h.line("started", &[("lock", name.clone())]);
    let holds = match kind.as_str() {
        "fenced" => {
            let lock = client.get_fenced_lock(name.clone());
            let token = |g: &LockGuard<_>| Some(g.token());
            run.holds(&h, &mut store, single(lock, token)).await
        }
        "rlock" => {
            let lock = client.get_lock(name.clone());
            run.holds(&h, &mut store, single(lock, no_token)).await
        }
        "fair" => {
            let lock = client.get_fair_lock(name.clone());
            let taker = Single {
                lock,
                token: no_token,
                fair: true,
            };
            run.holds(&h, &mut store, taker).await
        }
        "write" => {
            let lock = client.get_read_write_lock(name.clone()).write_lock();
            run.holds(&h, &mut store, single(lock, no_token)).await
        }
        "read" => {
            let lock = client.get_read_write_lock(name.clone()).read_lock();
            run.holds(&h, &mut store, single(lock, no_token)).await
        }
        "redlock" => {
            let red = RedLock::new(clients.iter().map(|c| c.get_lock(name.clone())))
                .expect("redlock")
                .with_node_timeout(Duration::from_millis(num(&a, "node-timeout-ms", 300)));
            run.holds(&h, &mut store, Red(red)).await
        }
        other => panic!("--kind {other}: expected fenced, rlock, fair, write, read or redlock"),
    };
    h.line("done", &[("holds", holds.to_string())]);
}

struct Run {
    name: String,
    iterations: u64,
    forever: bool,
    hold: Duration,
    rmw: Duration,
    gap: Duration,
    lease: u64,
    stop_file: Option<String>,
    deadline: Instant,
    counter_key: String,
    max_key: String,
    log_key: String,
    fenced: redis::Script,
    reader: bool,
}

impl Run {
    /// Takes holds until done; returns how many were taken and released.
    async fn holds<T: Taker>(
        &self,
        h: &History,
        store: &mut redis::aio::MultiplexedConnection,
        lock: T,
    ) -> u64 {
        let name = self.name.clone();

        let mut holds = 0u64;
        while holds < self.iterations && Instant::now() < self.deadline {
            if self
                .stop_file
                .as_deref()
                .is_some_and(|f| std::path::Path::new(f).exists())
            {
                break;
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            let lease = (self.lease > 0).then(|| Duration::from_millis(self.lease));
            let acquired = lock.take(left, lease).await;
            let guard = match acquired {
                Ok(Some(g)) => g,
                Ok(None) => break,
                Err(e) => {
                    h.line("error", &[("op", "acquire".into()), ("msg", one_line(&e))]);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let start = mono_ns();
            let token = lock.token(&guard);
            h.line(
                "acquired",
                &[
                    ("lock", name.clone()),
                    ("start", start.to_string()),
                    ("token", token.unwrap_or(0).to_string()),
                    (
                        "mode",
                        if self.reader { "read" } else { "write" }.to_owned(),
                    ),
                ],
            );
            // Watch the guard's `lost()` for the whole hold: its moment is the time-to-detect
            // of the failover tests.
            let watch = async {
                lock.lost(&guard).await;
                h.line(
                    "lost",
                    &[
                        ("lock", name.clone()),
                        ("start", start.to_string()),
                        ("at", mono_ns().to_string()),
                    ],
                );
                std::future::pending::<()>().await;
            };
            if self.forever {
                // Keep the hold (renewed by the watchdog) until killed or out of time.
                tokio::select! {
                    () = tokio::time::sleep_until(self.deadline.into()) => {}
                    () = watch => {}
                }
                break;
            }
            let work = self.work(h, store, token);
            let (read, stable, accepted) = tokio::select! {
                r = work => r,
                () = watch => unreachable!("the watch never ends"),
            };
            let lost = lock.is_lost(&guard);
            let end = mono_ns();
            // Done with the resource: a holder killed during its release has ended its hold here.
            h.line(
                "releasing",
                &[
                    ("lock", name.clone()),
                    ("start", start.to_string()),
                    ("end", end.to_string()),
                    ("read", read.clone()),
                    ("fenced", accepted.clone()),
                    ("lost", u8::from(lost).to_string()),
                ],
            );
            let unlock = match lock.release(guard).await {
                Ok(outcome) => outcome.to_owned(),
                Err(e) => {
                    h.line("error", &[("op", "unlock".into()), ("msg", one_line(&e))]);
                    "error".to_owned()
                }
            };
            holds += 1;
            h.line(
                "released",
                &[
                    ("lock", name.clone()),
                    ("start", start.to_string()),
                    ("end", end.to_string()),
                    ("token", token.unwrap_or(0).to_string()),
                    ("read", read),
                    (
                        "mode",
                        if self.reader { "read" } else { "write" }.to_owned(),
                    ),
                    ("stable", stable),
                    ("fenced", accepted),
                    ("lost", u8::from(lost).to_string()),
                    ("unlock", unlock),
                ],
            );
            tokio::time::sleep(self.gap).await;
        }
        holds
    }

    /// The work inside one hold: the sleep, the unsafe read-modify-write (or a reader's two
    /// reads) and the fenced write; returns (`read=`, `stable=`, `fenced=`).
    async fn work(
        &self,
        h: &History,
        store: &mut redis::aio::MultiplexedConnection,
        token: Option<i64>,
    ) -> (String, String, String) {
        let name = self.name.clone();
        tokio::time::sleep(self.hold).await;
        // The deliberately unsafe read-modify-write: only mutual exclusion keeps it correct.
        // A reader reads twice instead, and must see the same value.
        let mut stable = "-".to_owned();
        let rmw_result: redis::RedisResult<i64> = async {
            let v: Option<i64> = store.get(&self.counter_key).await?;
            let v = v.unwrap_or(0);
            h.line("read", &[("lock", name.clone()), ("value", v.to_string())]);
            tokio::time::sleep(self.rmw).await;
            if self.reader {
                let again: Option<i64> = store.get(&self.counter_key).await?;
                stable = u8::from(again.unwrap_or(0) == v).to_string();
            } else {
                let () = store.set(&self.counter_key, v + 1).await?;
            }
            Ok(v)
        }
        .await;
        let read = match rmw_result {
            Ok(v) => v.to_string(),
            Err(e) => {
                h.line("error", &[("op", "rmw".into()), ("msg", one_line(&e))]);
                "-".into()
            }
        };
        // The same write through the fenced resource (fenced locks only).
        let accepted = match token {
            None => "-".to_owned(),
            Some(token) => {
                let accepted: redis::RedisResult<i64> = self
                    .fenced
                    .key(&self.max_key)
                    .key(&self.log_key)
                    .arg(token)
                    .arg(h.pid)
                    .invoke_async(store)
                    .await;
                match accepted {
                    Ok(a) => a.to_string(),
                    Err(e) => {
                        h.line("error", &[("op", "fenced".into()), ("msg", one_line(&e))]);
                        "-".into()
                    }
                }
            }
        };
        (read, stable, accepted)
    }
}

fn single<K: LockKind, F>(lock: Lock<K>, token: F) -> Single<K, F> {
    Single {
        lock,
        token,
        fair: false,
    }
}

fn no_token<G>(_: &G) -> Option<i64> {
    None
}

/// What the hold loop needs from a lock kind.
trait Taker {
    type Guard;
    /// Waits at most `left`; `lease: None` is a watchdog lease.
    async fn take(
        &self,
        left: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Self::Guard>, LockError>;
    fn token(&self, guard: &Self::Guard) -> Option<i64>;
    fn is_lost(&self, guard: &Self::Guard) -> bool;
    /// Resolves when the hold is known lost.
    async fn lost(&self, guard: &Self::Guard);
    /// `ok`, `lost` (the hold was gone), or `partial` (some RedLock members not released).
    async fn release(&self, guard: Self::Guard) -> Result<&'static str, LockError>;
}

/// One lock of one kind.
struct Single<K: LockKind, F> {
    lock: Lock<K>,
    token: F,
    /// A fair waiter that waits forever queues with the fair-lock wait timeout (a dead one is
    /// evicted after it) instead of the wait budget; the process deadline still bounds it.
    fair: bool,
}

impl<K: LockKind, F: Fn(&LockGuard<K>) -> Option<i64>> Taker for Single<K, F> {
    type Guard = LockGuard<K>;

    async fn take(
        &self,
        left: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard<K>>, LockError> {
        match lease {
            None if self.fair => match tokio::time::timeout(left, self.lock.lock()).await {
                Ok(r) => r.map(Some),
                Err(_) => Ok(None),
            },
            None => self.lock.try_lock_for(left).await,
            Some(l) => self.lock.try_lock_with_lease(left, l).await,
        }
    }

    fn token(&self, guard: &LockGuard<K>) -> Option<i64> {
        (self.token)(guard)
    }

    fn is_lost(&self, guard: &LockGuard<K>) -> bool {
        guard.is_lost()
    }

    async fn lost(&self, guard: &LockGuard<K>) {
        guard.lost().await;
    }

    async fn release(&self, guard: LockGuard<K>) -> Result<&'static str, LockError> {
        match guard.unlock().await {
            Ok(()) => Ok("ok"),
            Err(LockError::LeaseLost { .. }) => Ok("lost"),
            Err(e) => Err(e),
        }
    }
}

/// A RedLock over one client per node.
struct Red(RedLock);

impl Taker for Red {
    type Guard = MultiLockGuard;

    async fn take(
        &self,
        left: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<MultiLockGuard>, LockError> {
        match lease {
            None => self.0.try_lock_for(left).await,
            Some(l) => self.0.try_lock_with_lease(left, l).await,
        }
    }

    fn token(&self, _: &MultiLockGuard) -> Option<i64> {
        None
    }

    fn is_lost(&self, guard: &MultiLockGuard) -> bool {
        guard.is_lost()
    }

    async fn lost(&self, guard: &MultiLockGuard) {
        guard.lost().await;
    }

    async fn release(&self, guard: MultiLockGuard) -> Result<&'static str, LockError> {
        // Whether the hold was still valid is `is_lost()` before the release (a quorum);
        // members that could not be released are only a partial release.
        match guard.unlock().await {
            Ok(()) => Ok("ok"),
            Err(LockError::Quorum(_)) => Ok("partial"),
            Err(e) => Err(e),
        }
    }
}
