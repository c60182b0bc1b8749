//! `list`: SCAN to the end of the cursor, kinds and counts, companions left out.

use crate::cli::*;
use crate::support::*;

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
    let entries = listed(&v);
    assert_eq!(entries.len(), 300, "{v}");
    for e in &entries {
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
    assert_eq!(listed(&all).len(), 301);
    let human = cli(&args(&server, &["list", "cli-list:*"])).await;
    assert_eq!(human.code, 0);
    assert_eq!(
        human.stdout.lines().count(),
        302,
        "server + header + 300 rows"
    );
    let mut lines = human.stdout.lines();
    let port = format!("127.0.0.1:{}", server.port);
    assert!(lines.next().unwrap().contains(&port), "{}", human.stdout);
    assert!(
        lines.next().unwrap().starts_with("KIND"),
        "{}",
        human.stdout
    );
}

/// Calls of `command` since the last `CONFIG RESETSTAT` (`INFO commandstats`).
async fn calls(raw: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(raw)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// WRONGTYPE replies since the last `CONFIG RESETSTAT` (`INFO errorstats`).
async fn wrongtype_errors(raw: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(raw)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_WRONGTYPE:count="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

async fn reset_stats(raw: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(raw)
        .await
        .unwrap();
}

/// `list` on a keyspace with an application hash far bigger than any lock: the hash is never
/// read whole (`HGETALL` only for the three lock hashes), keys of other types are skipped
/// without one WRONGTYPE reply, and `--all` shows them all as `unknown` with their types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_never_reads_a_big_hash_whole_and_skips_other_types() {
    let server = TestServer::start();
    let mut raw = server.conn().await;
    let mut pipe = redis::pipe();
    for i in 0..3 {
        pipe.hset(
            format!("cli-big:lock{i}"),
            format!("0badc0de-0000-4000-8000-000000000000:{i}"),
            1,
        );
    }
    let big: Vec<(String, String)> = (0..5000)
        .map(|i| (format!("user:{i}"), format!("session-{i}")))
        .collect();
    pipe.hset_multiple("cli-big:app", &big)
        .set("cli-big:string", "x")
        .set("cli-big:integer", 12)
        .rpush("cli-big:list", "a")
        .sadd("cli-big:set", "a")
        .zadd("cli-big:zset", "a", 1);
    pipe.cmd("XADD")
        .arg("cli-big:stream")
        .arg("*")
        .arg("f")
        .arg("v");
    let _: () = pipe.query_async(&mut raw).await.unwrap();

    reset_stats(&mut raw).await;
    let v = json(args(&server, &["list", "cli-big:*"])).await;
    let entries = listed(&v);
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["cli-big:lock0", "cli-big:lock1", "cli-big:lock2"],
        "{v}"
    );
    assert_eq!(
        calls(&mut raw, "hgetall").await,
        3,
        "only the lock hashes are read whole"
    );
    assert_eq!(wrongtype_errors(&mut raw).await, 0);

    reset_stats(&mut raw).await;
    let v = json(args(&server, &["list", "cli-big:*", "--all"])).await;
    let entries = listed(&v);
    assert_eq!(entries.len(), 10, "{v}");
    let of = |name: &str| entries.iter().find(|e| e["name"] == name).unwrap().clone();
    assert_eq!(of("cli-big:app")["kind"], "unknown");
    assert_eq!(of("cli-big:app")["redis_type"], "hash");
    assert_eq!(of("cli-big:stream")["redis_type"], "stream");
    assert_eq!(of("cli-big:integer")["kind"], "semaphore_or_latch");
    assert_eq!(of("cli-big:lock1")["kind"], "reentrant");
    assert_eq!(
        calls(&mut raw, "hgetall").await,
        3,
        "only the lock hashes are read whole"
    );
    assert_eq!(wrongtype_errors(&mut raw).await, 0);
}

/// `--limit N`: N entries, and the scan stops there instead of walking the whole keyspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_limit_stops_the_scan_early() {
    let server = TestServer::start();
    let mut raw = server.conn().await;
    let mut pipe = redis::pipe();
    for i in 0..300 {
        pipe.hset(
            format!("cli-limit:{i}"),
            format!("0badc0de-0000-4000-8000-000000000000:{i}"),
            1,
        );
    }
    let _: () = pipe.query_async(&mut raw).await.unwrap();

    reset_stats(&mut raw).await;
    let all = json(args(&server, &["list", "cli-limit:*", "--count", "20"])).await;
    assert_eq!(listed(&all).len(), 300);
    let full_scan = calls(&mut raw, "scan").await;
    assert!(full_scan >= 10, "a full scan took {full_scan} SCAN calls");

    reset_stats(&mut raw).await;
    let some = json(args(
        &server,
        &["list", "cli-limit:*", "--count", "20", "--limit", "10"],
    ))
    .await;
    assert_eq!(listed(&some).len(), 10, "{some}");
    let limited = calls(&mut raw, "scan").await;
    assert!(
        limited < full_scan / 2,
        "{limited} SCAN calls for 10 entries"
    );

    // Progress: on stderr with --progress (stderr is a pipe here), never otherwise.
    let quiet = cli(&args(&server, &["list", "cli-limit:*", "--limit", "1"])).await;
    assert!(!quiet.stderr.contains("scanned"), "{}", quiet.stderr);
    let loud = cli(&args(&server, &["list", "cli-limit:*", "--progress"])).await;
    assert!(loud.stderr.contains("scanned"), "{}", loud.stderr);
    assert!(loud.stderr.contains("300 found"), "{}", loud.stderr);
}
