//! The on-call engineer's read-only user (issue 38): `inspect`, `list` and `watch` work for a
//! user allowed only read commands (no `SCRIPT LOAD`, no script, no write), for every kind, on
//! a server, on a cluster and through Sentinel; a command that writes is refused at connect with the server's
//! words. [`ONCALL_RULE`] is the rule docs/cli.md gives.

use std::time::Duration;

use redisson_lock::{Client, Config, RateLimiterConfig, RateType};
use serde_json::Value;

use crate::cli::{cli, Watch};
use crate::support::cluster::{TestCluster, TestSentinel, MASTER_NAME};
use crate::support::*;

/// The ACL rule of a read-only on-call user, as docs/cli.md gives it (after `ACL SETUSER
/// oncall on >PASSWORD`).
const ONCALL_RULE: &[&str] = &[
    "resetkeys",
    "~*",
    "resetchannels",
    "&*",
    "-@all",
    "+@read",
    "+auth",
    "+hello",
    "+ping",
    "+select",
    "+client|setname",
    "+client|id",
    "+subscribe",
    "+ssubscribe",
    "+psubscribe",
    "+unsubscribe",
    "+sunsubscribe",
    "+punsubscribe",
    "+pubsub|numsub",
    "+pubsub|shardnumsub",
    "+pubsub|channels",
    "+client|list",
    "+cluster|slots",
    "+cluster|nodes",
    "+cluster|shards",
    "+info",
    "+role",
    "+readonly",
];

const PASSWORD: &str = "oncall-pw-3317";

/// Creates the on-call user on the server behind `raw`.
async fn oncall(raw: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "oncall", "on", &format!(">{PASSWORD}")][..])
        .arg(ONCALL_RULE)
        .query_async(raw)
        .await
        .unwrap();
}

/// Runs the CLI as the on-call user (`--url`/`--cluster` with the user, the password from
/// `$REDIS_PASSWORD`); `(exit code, stdout, stderr)`.
async fn as_oncall(target: &[&str], rest: &[&str]) -> (i32, String, String) {
    let mut a: Vec<String> = target.iter().map(|s| s.to_string()).collect();
    a.extend(rest.iter().map(|s| s.to_string()));
    let out = crate::cli::cli_env(&a, &[("REDIS_PASSWORD", PASSWORD)]).await;
    (out.code, out.stdout, out.stderr)
}

/// One thing of each kind under `prefix`, held or set by `client`; the names and the kind
/// `inspect` must report.
async fn one_of_each(client: &Client, prefix: &str) -> Vec<(String, &'static str)> {
    let n = |s: &str| format!("{prefix}{s}");
    client.get_lock(n("rl")).lock().await.unwrap().detach();
    client
        .get_fair_lock(n("fair"))
        .lock()
        .await
        .unwrap()
        .detach();
    client
        .get_fenced_lock(n("fenced"))
        .lock()
        .await
        .unwrap()
        .detach();
    let rw = client.get_read_write_lock(n("rw"));
    rw.write_lock().lock().await.unwrap().detach();
    let sem = client.get_permit_expirable_semaphore(n("pes"));
    sem.try_set_permits(2).await.unwrap();
    sem.acquire().await.unwrap();
    client
        .get_semaphore(n("sem"))
        .try_set_permits(3)
        .await
        .unwrap();
    let limiter = client.get_rate_limiter(n("rate"));
    let rate = RateLimiterConfig::new(RateType::Overall, 5, Duration::from_secs(60));
    limiter.try_set_rate(rate).await.unwrap();
    vec![
        (n("rl"), "reentrant"),
        (n("fair"), "fair"),
        (n("fenced"), "fenced"),
        (n("rw"), "read_write"),
        (n("pes"), "permit_semaphore"),
        (n("sem"), "semaphore_or_latch"),
        (n("rate"), "rate_limiter"),
    ]
}

/// `inspect` and `list` of every kind, and `watch` hearing a release, as the on-call user:
/// each reads as the default user (`admin`, the same target without the user) reads it.
async fn reads_every_kind(
    target: &[&str],
    admin: &[&str],
    things: &[(String, &str)],
    writer: &Client,
) {
    for (name, kind) in things {
        let (code, out, err) = as_oncall(target, &["--json", "inspect", name]).await;
        assert_eq!(code, 0, "inspect {name}: {err}");
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        let mut a: Vec<String> = admin.iter().map(|s| s.to_string()).collect();
        a.extend(["--json", "inspect", name].map(String::from));
        let full = cli(&a).await;
        assert_eq!(full.code, 0, "{}", full.stderr);
        let full: Value = serde_json::from_str(full.stdout.trim()).unwrap();
        assert_eq!(v["kind"], full["kind"], "{name} ({kind}): {v} vs {full}");
        assert_eq!(
            v["holders"].as_array().map(Vec::len),
            full["holders"].as_array().map(Vec::len)
        );
        assert_ne!(v["kind"], Value::Null, "{name}: {v}");
        // INFO and ROLE are in the rule: the server is named in full.
        assert_eq!(v["server"]["role"], "master", "{v}");
        assert_eq!(v["server"]["version"], full["server"]["version"], "{v}");
        assert_eq!(v["server"]["error"], Value::Null, "{v}");
    }
    let (code, out, err) = as_oncall(target, &["--json", "list", "--all", "ro:*"]).await;
    assert_eq!(code, 0, "list: {err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(crate::cli::listed(&v).len(), things.len(), "{v}");
    // watch subscribes and hears a release.
    let name = format!("{}watched", things[0].0.trim_end_matches("rl"));
    let guard = writer.get_lock(&name).lock().await.unwrap();
    let mut a: Vec<String> = target.iter().map(|s| s.to_string()).collect();
    a.extend(["watch", &name, "--for", "600"].map(String::from));
    let mut watch = Watch::start_with_env(&a, &[("REDIS_PASSWORD", PASSWORD)]);
    watch.until(&format!("watching {name}")).await;
    guard.unlock().await.unwrap();
    watch.until(" 0 (unlock").await;
    drop(watch);
    // A command that writes is refused, with the server's words, and nothing changes.
    let (code, _, err) = as_oncall(target, &["force-unlock", &things[0].0, "--yes"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("NoPerm") || err.contains("NOPERM"), "{err}");
    let lock = writer.get_lock(&things[0].0);
    assert!(lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_user_inspects_lists_and_watches_every_kind() {
    let (server, writer, mut raw) = fixture().await;
    oncall(&mut raw).await;
    // Read-only for real: the rule grants no command that acts on other clients or the server
    // (`+@connection` would have granted `CLIENT KILL` and `CLIENT PAUSE`).
    let mut as_user = redis::Client::open(format!(
        "redis://oncall:{PASSWORD}@127.0.0.1:{}/",
        server.port
    ))
    .unwrap()
    .get_multiplexed_async_connection()
    .await
    .unwrap();
    for cmd in [
        &["CLIENT", "KILL", "ID", "999999"][..],
        &["CLIENT", "PAUSE", "1"],
        &["CLIENT", "NO-EVICT", "on"],
        &["CONFIG", "SET", "maxmemory", "1"],
        &["SET", "k", "v"],
    ] {
        let r: redis::RedisResult<redis::Value> = redis::cmd(cmd[0])
            .arg(&cmd[1..])
            .query_async(&mut as_user)
            .await;
        let e = r.expect_err(&format!("{cmd:?} allowed to the on-call user"));
        assert_eq!(e.code(), Some("NOPERM"), "{cmd:?}: {e}");
    }
    let things = one_of_each(&writer, "ro:").await;
    let url = format!("redis://oncall@127.0.0.1:{}", server.port);
    let admin = server.url();
    reads_every_kind(&["--url", &url], &["--url", &admin], &things, &writer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_user_reads_a_cluster() {
    let cluster = TestCluster::start(0);
    for url in cluster.urls() {
        let mut raw = redis::Client::open(url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        oncall(&mut raw).await;
    }
    let writer = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let things = one_of_each(&writer, "ro:").await;
    let seeds = cluster
        .urls()
        .iter()
        .map(|u| u.replacen("redis://", "redis://oncall@", 1))
        .collect::<Vec<_>>()
        .join(",");
    let admin = cluster.urls().join(",");
    reads_every_kind(
        &["--cluster", &seeds],
        &["--cluster", &admin],
        &things,
        &writer,
    )
    .await;
}

/// Through Sentinel: the user exists on the master and the replica (ACLs are not replicated),
/// the sentinels ask for no password (the URLs' credentials go to the data nodes only), and
/// the CLI is pointed at the sentinels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_user_reads_through_sentinel() {
    let sentinel = TestSentinel::start();
    for node in [&sentinel.master, &sentinel.replica] {
        let mut raw = redis::Client::open(node.url().as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        oncall(&mut raw).await;
    }
    let writer = Client::with_config(Config::sentinel(sentinel.sentinel_urls(), MASTER_NAME))
        .await
        .unwrap();
    let things = one_of_each(&writer, "ro:").await;
    let sentinels = sentinel
        .sentinel_urls()
        .iter()
        .map(|u| u.replacen("redis://", "redis://oncall@", 1))
        .collect::<Vec<_>>()
        .join(",");
    let admin = sentinel.sentinel_urls().join(",");
    reads_every_kind(
        &["--sentinel", &sentinels, "--master", MASTER_NAME],
        &["--sentinel", &admin, "--master", MASTER_NAME],
        &things,
        &writer,
    )
    .await;
}

/// A user refused `INFO` and `ROLE` still reads: the output says what the server would not
/// tell, where the server's name, version and role would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_refused_info_and_role_reads_and_is_told_so() {
    let (server, writer, mut raw) = fixture().await;
    let rule: Vec<&str> = ONCALL_RULE
        .iter()
        .copied()
        .filter(|r| *r != "+info" && *r != "+role")
        .collect();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "oncall", "on", &format!(">{PASSWORD}")][..])
        .arg(&rule)
        .query_async(&mut raw)
        .await
        .unwrap();
    writer.get_lock("ro:blind").lock().await.unwrap().detach();
    let url = format!("redis://oncall@127.0.0.1:{}", server.port);
    let (code, out, err) = as_oncall(&["--url", &url], &["inspect", "ro:blind"]).await;
    assert_eq!(code, 0, "{err}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("server: a server at 127.0.0.1:{}", server.port)),
        "{out}"
    );
    assert!(
        first.contains("ROLE refused") && first.contains("INFO refused"),
        "{out}"
    );
    assert!(out.contains("reentrant"), "{out}");
    let (code, out, err) = as_oncall(&["--url", &url], &["--json", "inspect", "ro:blind"]).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["kind"], "reentrant", "{v}");
    assert_eq!(v["server"]["version"], Value::Null, "{v}");
    let error = v["server"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("INFO refused"), "{v}");
}
