//! Connecting: a dead server (exit 1, password redacted), usage errors (exit 2), a cluster
//! (every master scanned, sharded pub/sub) and Sentinel.

use crate::cli::*;
use crate::support::cluster::{TestCluster, TestSentinel, MASTER_NAME};
use crate::support::*;
use redisson_lock::{Client, Config};
use serde_json::Value;

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
    // Where: every master, each named.
    assert_eq!(last["server"]["topology"], "cluster", "{last}");
    let masters = last["server"]["nodes"].as_array().unwrap();
    assert_eq!(masters.len(), 3, "{last}");
    for m in masters {
        assert_eq!(m["role"], "master", "{last}");
        let name = if is_valkey() { "valkey" } else { "redis" };
        assert_eq!(m["name"], name, "{last}");
        let port = m["address"].as_str().unwrap().rsplit(':').next().unwrap();
        assert!(seeds.contains(&format!(":{port}")), "{last}");
    }

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
    let v: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {} {}", out.stdout, out.stderr));
    assert_eq!(listed(&v).len(), 30, "{v}");
    // --all reads every type, and counts subscribers on every node once per scan.
    let out = cli(&cluster_args(&["list", "cli-c:*", "--all", "--count", "5"])).await;
    let v: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {} {}", out.stdout, out.stderr));
    assert_eq!(listed(&v).len(), 30, "{v}");

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
    // Where: the master the sentinels name.
    assert_eq!(v["server"]["topology"], "sentinel", "{v}");
    assert_eq!(v["server"]["master_name"], MASTER_NAME, "{v}");
    assert_eq!(v["server"]["role"], "master", "{v}");
    let port = sentinel.master_port().unwrap();
    assert!(
        v["server"]["address"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{port}")),
        "{v}"
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
