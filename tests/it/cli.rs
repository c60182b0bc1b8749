//! The operator CLI (`redisson-lock`, feature `cli`): the real binary run against real servers,
//! on locks held by this crate (and, for `list`, hashes written the way a Java client writes
//! them). Waits are event-driven with generous bounds; nothing asserts on elapsed time.

use std::process::Stdio;
use std::time::Duration;

use crate::support::cluster::{TestCluster, TestSentinel, MASTER_NAME};
use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{Client, Config, LockOwner};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_redisson-lock");
/// Generous bound for anything event-driven (a wake-up, a line of output).
pub(crate) const WAIT: Duration = Duration::from_secs(20);

pub(crate) struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub(crate) fn command(args: &[String]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(args)
        .env_remove("REDIS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs the CLI to completion; `stdin`: what to type (else no input at all).
pub(crate) async fn cli_in(args: &[String], stdin: Option<&str>) -> Out {
    let mut cmd = command(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().expect("run redisson-lock");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).await.unwrap();
        drop(pipe);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("redisson-lock did not exit")
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) async fn cli(args: &[String]) -> Out {
    cli_in(args, None).await
}

pub(crate) fn args(server: &TestServer, rest: &[&str]) -> Vec<String> {
    let mut v = vec!["--url".to_owned(), server.url()];
    v.extend(rest.iter().map(|s| s.to_string()));
    v
}

/// Runs with `--json`, expects exit 0, parses stdout.
pub(crate) async fn json(args: Vec<String>) -> Value {
    let mut args = args;
    args.insert(0, "--json".to_owned());
    let out = cli(&args).await;
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

pub(crate) fn lock_channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// Waits until `channel` has `n` subscribers on `server`.
pub(crate) async fn wait_subscribers(server: &TestServer, channel: &str, n: i64) {
    let ok = eventually(WAIT, || async { numsub_on(server, channel).await == n }).await;
    assert!(ok, "{channel} never had {n} subscriber(s)");
}

/// `name` held by one client (kept alive in the tuple) and awaited by another client's task,
/// which is parked on the lock's channel when this returns.
async fn held_with_waiter(
    server: &TestServer,
    name: &str,
) -> (
    Client,
    redisson_lock::LockGuard<redisson_lock::Reentrant>,
    tokio::task::JoinHandle<redisson_lock::Result<()>>,
) {
    let holder = server.client().await;
    let guard = holder.get_lock(name).lock().await.unwrap();
    let lock = server.client().await.get_lock(name);
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) });
    wait_subscribers(server, &lock_channel(name), 1).await;
    (holder, guard, waiter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_a_reentrant_hold_with_its_count_ttl_and_owner() {
    let (server, client) = with_client().await;
    let lock = client.get_lock("cli:orders");
    let (outer, inner) = held_twice(&lock).await;
    let owner = field(&client, outer.owner());

    let v = json(args(&server, &["inspect", "cli:orders"])).await;
    assert_eq!(v["name"], "cli:orders");
    assert_eq!(v["kind"], "reentrant");
    assert_eq!(v["redis_type"], "hash");
    let ttl = v["ttl_ms"].as_i64().unwrap();
    assert!(ttl > 0 && ttl <= 30_000, "ttl {ttl}");
    assert_eq!(v["holders"].as_array().unwrap().len(), 1);
    assert_eq!(v["holders"][0]["owner"], owner.as_str());
    assert_eq!(v["holders"][0]["count"], 2);
    assert_eq!(v["holders"][0]["role"], "exclusive");
    assert_eq!(v["token"], Value::Null);
    assert_eq!(v["channels"][0], lock_channel("cli:orders").as_str());
    assert_eq!(v["waiters"], 0);

    let human = cli(&args(&server, &["inspect", "cli:orders"])).await;
    assert_eq!(human.code, 0);
    assert!(human.stdout.contains("reentrant"), "{}", human.stdout);
    assert!(
        human.stdout.contains(&format!("{owner}  exclusive  x2")),
        "{}",
        human.stdout
    );
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_of_a_missing_key_says_not_locked_and_unknown_keys_show_their_value() {
    let server = TestServer::start();
    let v = json(args(&server, &["inspect", "cli:nothing"])).await;
    assert_eq!(v["name"], "cli:nothing");
    assert_eq!(v["kind"], Value::Null);
    assert_eq!(v["holders"].as_array().unwrap().len(), 0);
    let human = cli(&args(&server, &["inspect", "cli:nothing"])).await;
    assert_eq!(human.code, 0);
    assert!(human.stdout.contains("not locked"), "{}", human.stdout);

    // A string that is no synchronizer's: reported as it is, never mistaken for a lock.
    let mut raw = server.conn().await;
    let _: () = raw.set("cli:note", "hello").await.unwrap();
    let v = json(args(&server, &["inspect", "cli:note"])).await;
    assert_eq!(v["kind"], "unknown");
    assert_eq!(v["redis_type"], "string");
    assert_eq!(v["value"], "hello");
    assert_eq!(v["ttl_ms"], -1);
}

/// Redisson's synchronizers, detected from their data as the crate leaves it: a permit
/// semaphore by its `{NAME}:timeout` zset (permits with their leases), a semaphore or a latch by
/// whose channel has waiters (Redisson stores both as an integer string), neither when nobody
/// waits; force-unlock leaves them alone and `list` shows them only with `--all`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_tells_the_synchronizers_apart() {
    let (server, client) = with_client().await;

    let pes = client.get_permit_expirable_semaphore("cli:pes");
    assert!(pes.try_set_permits(3).await.unwrap());
    let leased = pes
        .with_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    let forever = pes.acquire().await.unwrap();
    let v = json(args(&server, &["inspect", "cli:pes"])).await;
    assert_eq!(v["kind"], "permit_semaphore");
    assert_eq!(v["count"], 1);
    let permits = v["permits"].as_array().unwrap();
    assert_eq!(permits.len(), 2, "{v}");
    let lease_of = |id: &str| {
        permits
            .iter()
            .find(|p| p["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in {v}"))["lease_ms"]
            .clone()
    };
    let lease = lease_of(leased.as_str()).as_i64().unwrap();
    assert!(lease > 500_000 && lease <= 600_000, "{lease}");
    assert_eq!(lease_of(forever.as_str()), Value::Null);
    assert_eq!(v["channels"], serde_json::json!(["redisson_sc:{cli:pes}"]));
    let human = cli(&args(&server, &["inspect", "cli:pes"])).await;
    assert!(
        human.stdout.contains("permits  1 available"),
        "{}",
        human.stdout
    );
    assert!(
        human.stdout.contains(&format!("{forever}  no lease")),
        "{}",
        human.stdout
    );

    // A semaphore with a waiter, a latch with a waiter, and an integer nobody waits on.
    let sem = client.get_semaphore("cli:sem");
    sem.try_set_permits(0).await.unwrap();
    let s = sem.clone();
    let sem_waiter = tokio::spawn(async move { s.acquire().await });
    let latch = client.get_count_down_latch("cli:latch");
    latch.try_set_count(2).await.unwrap();
    let l = latch.clone();
    let latch_waiter = tokio::spawn(async move { l.wait().await });
    wait_subscribers(&server, "redisson_sc:{cli:sem}", 1).await;
    wait_subscribers(&server, "redisson_countdownlatch__channel__{cli:latch}", 1).await;
    let v = json(args(&server, &["inspect", "cli:sem"])).await;
    assert_eq!(
        (v["kind"].clone(), v["count"].clone()),
        ("semaphore".into(), 0.into())
    );
    assert_eq!(v["waiters"], 1);
    let v = json(args(&server, &["inspect", "cli:latch"])).await;
    assert_eq!(
        (v["kind"].clone(), v["count"].clone()),
        ("count_down_latch".into(), 2.into())
    );
    assert_eq!(v["waiters"], 1);
    let mut raw = server.conn().await;
    let _: () = raw.set("cli:quiet", "5").await.unwrap();
    let v = json(args(&server, &["inspect", "cli:quiet"])).await;
    assert_eq!(v["kind"], "semaphore_or_latch");
    assert_eq!(v["count"], 5);

    // Not locks: force-unlock refuses and changes nothing; list shows them with --all only.
    let out = cli(&args(&server, &["force-unlock", "cli:sem", "--yes"])).await;
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("not a lock"), "{}", out.stderr);
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    let listed = json(args(&server, &["list", "cli:*"])).await;
    assert_eq!(listed.as_array().unwrap().len(), 0, "{listed}");
    let listed = json(args(&server, &["list", "cli:*", "--all"])).await;
    let kinds: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"permit_semaphore") && kinds.contains(&"semaphore"),
        "{kinds:?}"
    );

    sem.release().await.unwrap();
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    finished(sem_waiter, WAIT, "semaphore waiter").await;
    finished(latch_waiter, WAIT, "latch waiter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_counts_the_waiters_subscribed_on_the_unlock_channel() {
    let server = TestServer::start();
    let (_holder, guard, waiter) = held_with_waiter(&server, "cli:busy").await;

    let v = json(args(&server, &["inspect", "cli:busy"])).await;
    assert_eq!(v["waiters"], 1);
    guard.unlock().await.unwrap();
    finished(waiter, WAIT, "the task did not finish in time").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_a_fair_lock_queue_and_force_unlock_wakes_its_head() {
    let (server, holder) = with_client().await;
    let guard = holder.get_fair_lock("cli:fair").lock().await.unwrap();
    let other = server.client().await;
    let waiter_field = field(&other, LockOwner::new(7));
    let lock = other
        .get_fair_lock("cli:fair")
        .with_owner(LockOwner::new(7));
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| g.detach()) });
    let waiter_channel = format!("{}:{waiter_field}", lock_channel("cli:fair"));
    wait_subscribers(&server, &waiter_channel, 1).await;

    let v = json(args(&server, &["inspect", "cli:fair"])).await;
    assert_eq!(v["kind"], "fair");
    assert_eq!(
        v["holders"][0]["owner"],
        field(&holder, guard.owner()).as_str()
    );
    assert_eq!(v["queue"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["queue"][0]["owner"], waiter_field.as_str());
    // Redisson's default fairLockWaitTimeout is 5 minutes; the deadline is ahead.
    let left = v["queue"][0]["timeout_ms"].as_i64().unwrap();
    assert!(left > 0 && left <= 400_000, "timeout_ms {left}");
    assert!(v["channels"]
        .as_array()
        .unwrap()
        .contains(&Value::from(waiter_channel)));
    assert_eq!(v["waiters"], 1);

    // force-unlock wakes the queue head on its own channel (Redisson's fair forceUnlock); the
    // holder's 30 s lease would end the wait only well after WAIT.
    let out = cli(&args(&server, &["force-unlock", "cli:fair", "--yes"])).await;
    assert!(out.stdout.contains("unlocked"), "{}", out.stdout);
    finished(waiter, WAIT, "the queued waiter was not woken").await;
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_two_readers_with_their_timeout_keys() {
    let (server, client) = with_client().await;
    let rw = client.get_read_write_lock("cli:rw");
    let mut readers = Vec::new();
    for owner in [1, 2] {
        let read = rw.read_lock().with_owner(LockOwner::new(owner));
        readers.push(read.lock().await.unwrap());
    }

    let v = json(args(&server, &["inspect", "cli:rw"])).await;
    assert_eq!(v["kind"], "read_write");
    assert_eq!(v["mode"], "read");
    let holders = v["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 2);
    for (h, owner) in holders.iter().zip([1, 2]) {
        assert_eq!(h["owner"], field(&client, LockOwner::new(owner)).as_str());
        assert_eq!(h["role"], "read");
        assert_eq!(h["count"], 1);
        let timeouts = h["read_timeouts_ms"].as_array().unwrap();
        assert_eq!(timeouts.len(), 1);
        assert!(timeouts[0].as_i64().unwrap() > 0, "{h}");
    }
    assert_eq!(v["channels"][0], "redisson_rwlock:{cli:rw}");
    for r in readers {
        r.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_the_fencing_token() {
    let (server, client) = with_client().await;
    let lock = client.get_fenced_lock("cli:fenced");
    lock.lock().await.unwrap().unlock().await.unwrap();
    let guard = lock.lock().await.unwrap();
    let v = json(args(&server, &["inspect", "cli:fenced"])).await;
    assert_eq!(v["kind"], "fenced");
    assert_eq!(v["token"], guard.token());
    assert_eq!(v["token"], 2);
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_scans_past_the_first_page() {
    let server = TestServer::start();
    let mut raw = server.conn().await;
    // 300 holds written as a Java client writes them, plus keys list must leave out.
    let mut pipe = redis::pipe();
    for i in 0..300 {
        let key = format!("cli-list:{i}");
        pipe.hset(&key, format!("0badc0de-0000-4000-8000-000000000000:{i}"), 1)
            .pexpire(&key, 600_000);
    }
    pipe.set("cli-list:plain", "x")
        .set("redisson_lock_token:{cli-list:0}", 3)
        .hset("other:0", "a:1", 1);
    let _: () = pipe.query_async(&mut raw).await.unwrap();

    let v = json(args(&server, &["list", "cli-list:*", "--count", "10"])).await;
    let entries = v.as_array().unwrap();
    assert_eq!(entries.len(), 300, "{v}");
    for e in entries {
        assert_eq!(e["holders"], 1, "{e}");
        assert!(e["ttl_ms"].as_i64().unwrap() > 0);
        assert!(e["name"].as_str().unwrap().starts_with("cli-list:"));
    }
    let fenced = entries.iter().find(|e| e["name"] == "cli-list:0").unwrap();
    assert_eq!(fenced["kind"], "fenced");
    assert_eq!(
        entries.iter().filter(|e| e["kind"] == "reentrant").count(),
        299
    );

    let all = json(args(
        &server,
        &["list", "cli-list:*", "--count", "10", "--all"],
    ))
    .await;
    assert_eq!(all.as_array().unwrap().len(), 301);
    let human = cli(&args(&server, &["list", "cli-list:*"])).await;
    assert_eq!(human.code, 0);
    assert_eq!(human.stdout.lines().count(), 301, "header + 300 rows");
    assert!(human.stdout.starts_with("KIND"), "{}", human.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_the_lock_and_wakes_another_clients_waiter() {
    let server = TestServer::start();
    let (_holder, guard, waiter) = held_with_waiter(&server, "cli:stuck").await;

    let out = cli(&args(&server, &["force-unlock", "cli:stuck", "--yes"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("unlocked"), "{}", out.stdout);
    // The watchdog lease is 30 s: only the release message can wake the waiter this soon.
    finished(waiter, WAIT, "the waiter was not woken").await;
    assert!(
        eventually(WAIT * 2, || async {
            guard.is_lost() || !guard.lock().is_held_by(guard.owner()).await.unwrap()
        })
        .await
    );

    let again = json(args(&server, &["force-unlock", "cli:free", "--yes"])).await;
    assert_eq!(again["unlocked"], false);
    assert_eq!(again["kind"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_without_yes_asks_and_no_changes_nothing() {
    let (server, client) = with_client().await;
    let guard = client.get_lock("cli:keep").lock().await.unwrap();
    let mut raw = server.conn().await;
    let before = fields(&mut raw, "cli:keep").await;

    for answer in [Some("n\n"), Some("\n"), None] {
        let out = cli_in(&args(&server, &["force-unlock", "cli:keep"]), answer).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stderr.contains("[y/N]"), "{}", out.stderr);
        assert!(out.stdout.contains("aborted"), "{}", out.stdout);
        assert_eq!(fields(&mut raw, "cli:keep").await, before);
    }
    let out = cli_in(&args(&server, &["force-unlock", "cli:keep"]), Some("y\n")).await;
    assert!(out.stdout.contains("unlocked"), "{}", out.stdout);
    assert!(!exists(&mut raw, "cli:keep").await);
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_of_a_read_write_lock_uses_its_mode() {
    let (server, client) = with_client().await;
    let rw = client.get_read_write_lock("cli:rwf");
    let w = rw.write_lock().lock().await.unwrap();
    let mut listener = Listener::start(&server, "redisson_rwlock:{cli:rwf}").await;
    let v = json(args(&server, &["force-unlock", "cli:rwf", "--yes"])).await;
    assert_eq!(v["kind"], "read_write");
    assert_eq!(v["unlocked"], true);
    // Redisson's write-side forceUnlock publishes the read-write unlock message `1`.
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("1"));
    drop(w);
}

/// Lines of a running `watch`, read as they come.
pub(crate) struct Watch {
    pub(crate) child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pub(crate) seen: Vec<String>,
}

impl Watch {
    /// The process must exit by itself, successfully, within the test's bound.
    async fn exits_cleanly(&mut self) {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("watch did not exit")
            .unwrap();
        assert!(status.success(), "{status:?}");
    }

    /// Ctrl-C, as a terminal sends it (to our own child, by its pid): it must exit cleanly.
    pub(crate) async fn interrupt_exits_cleanly(&mut self) {
        let pid = self.child.id().unwrap().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status();
        assert!(sent.unwrap().success());
        self.exits_cleanly().await;
    }

    pub(crate) fn start(args: &[String]) -> Watch {
        let mut child = command(args).stdin(Stdio::null()).spawn().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Watch {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads until a line contains `needle`.
    pub(crate) async fn until(&mut self, needle: &str) -> String {
        let read = async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                self.seen.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            panic!("watch ended before printing `{needle}`: {:?}", self.seen)
        };
        tokio::time::timeout(WAIT, read)
            .await
            .unwrap_or_else(|_| panic!("no `{needle}` in watch output"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_a_release_and_the_state_then_stops_on_ctrl_c() {
    let (server, client) = with_client().await;
    let guard = client.get_lock("cli:watched").lock().await.unwrap();
    let owner = field(&client, guard.owner());
    let mut watch = Watch::start(&args(&server, &["watch", "cli:watched", "--for", "600"]));
    watch.until("watching cli:watched").await;
    watch.until("state reentrant ttl").await;
    assert!(watch.seen.last().unwrap().contains(&owner));

    guard.unlock().await.unwrap();
    let line = watch
        .until(&format!("message {} 0", lock_channel("cli:watched")))
        .await;
    assert!(line.contains("unlock"), "{line}");
    watch.until("state not locked").await;

    watch.interrupt_exits_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_for_seconds_exits_by_itself_and_json_lines_parse() {
    let server = TestServer::start();
    let mut watch = Watch::start(&args(
        &server,
        &["--json", "watch", "cli:idle", "--for", "1"],
    ));
    let first = watch.until("\"watching\"").await;
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["event"], "watching");
    assert!(v["time"].as_str().unwrap().ends_with('Z'));
    watch.exits_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_exits_1_with_the_url_redacted_and_usage_errors_exit_2() {
    let mut server = TestServer::start();
    let port = server.port;
    server.kill();
    let url = format!("redis://:hunter2@127.0.0.1:{port}/");
    let out = cli(&[
        "--url".to_owned(),
        url,
        "inspect".to_owned(),
        "x".to_owned(),
    ])
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("cannot connect to redis://***@127.0.0.1:{port}/")),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
    assert!(out.stdout.is_empty());

    let usage = cli(&["inspect".to_owned()]).await;
    assert_eq!(usage.code, 2, "{}", usage.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_on_a_cluster_and_through_sentinel() {
    let cluster = TestCluster::start(0);
    let seeds = cluster.urls().join(",");
    let cfg = || Config::cluster(cluster.urls());
    let holder = Client::with_config(cfg()).await.unwrap();
    let guard = holder.get_lock("cli:{c}").lock().await.unwrap();
    let other = Client::with_config(cfg()).await.unwrap();
    let waiter =
        tokio::spawn(async move { other.get_lock("cli:{c}").lock().await.map(|g| g.detach()) });
    let cluster_args = |rest: &[&str]| {
        let mut v = vec!["--json".to_owned(), "--cluster".to_owned(), seeds.clone()];
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    // The waiter subscribes (SSUBSCRIBE on Redis 7) on the slot's master: counted there.
    let mut last = Value::Null;
    let deadline = std::time::Instant::now() + WAIT;
    while last["waiters"] != 1 && std::time::Instant::now() < deadline {
        let out = cli(&cluster_args(&["inspect", "cli:{c}"])).await;
        last = serde_json::from_str(out.stdout.trim()).unwrap_or(Value::Null);
    }
    let counted = last["waiters"] == 1;
    assert!(counted, "{last}");
    assert_eq!(last["kind"], "reentrant");
    assert_eq!(
        last["holders"][0]["owner"],
        field(&holder, guard.owner()).as_str()
    );
    assert_eq!(last["channels"][0], "redisson_lock__channel:cli:{c}");

    // Keys in many slots: list must scan every master.
    for i in 0..30 {
        holder
            .get_lock(format!("cli-c:{i}"))
            .lock()
            .await
            .unwrap()
            .detach();
    }
    let out = cli(&cluster_args(&["list", "cli-c:*", "--count", "5"])).await;
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 30, "{v}");

    // watch hears the release through the cluster (SPUBLISH on Redis 7).
    let mut watch_args = cluster_args(&["watch", "cli:{c}", "--for", "600"]);
    watch_args.remove(0); // human format
    let mut watch = Watch::start(&watch_args);
    watch.until("watching cli:{c}").await;
    guard.unlock().await.unwrap();
    watch
        .until("message redisson_lock__channel:cli:{c} 0")
        .await;
    drop(watch);
    finished(waiter, WAIT, "the task did not finish in time").await;
    drop(cluster);

    let sentinel = TestSentinel::start();
    let client = Client::with_config(Config::sentinel(sentinel.sentinel_urls(), MASTER_NAME))
        .await
        .unwrap();
    let guard = client.get_lock("cli:s").lock().await.unwrap();
    let mut a = vec![
        "--json".to_owned(),
        "--sentinel".to_owned(),
        sentinel.sentinel_urls().join(","),
    ];
    a.extend(["--master", MASTER_NAME, "inspect", "cli:s"].map(String::from));
    let out = cli(&a).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(
        v["holders"][0]["owner"],
        field(&client, guard.owner()).as_str()
    );

    // watch subscribes on the master the sentinels name.
    let mut watch_args = vec!["--sentinel".to_owned(), sentinel.sentinel_urls().join(",")];
    watch_args
        .extend(["--master", MASTER_NAME, "watch", "cli:s", "--for", "600"].map(String::from));
    let mut watch = Watch::start(&watch_args);
    watch.until("watching cli:s").await;
    guard.unlock().await.unwrap();
    watch
        .until("message redisson_lock__channel:{cli:s} 0")
        .await;
}
