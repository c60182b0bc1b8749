//! `watch` across a server restart: it says it lost the server, reconnects with backoff on
//! the same port, says it regained it, and goes on printing states and release messages from
//! the restarted server.

use crate::cli::{args, lock_channel, Watch};
use crate::support::*;
use redisson_lock::Client;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_survives_a_server_restart() {
    let mut server = TestServer::start();
    let mut watch = Watch::start(&args(&server, &["watch", "cli:restarted", "--for", "600"]));
    watch.until("watching cli:restarted").await;
    watch.until("state not locked").await;

    server.restart();
    let lost = watch.until("lost the server").await;
    assert!(lost.contains("reconnecting"), "{lost}");
    watch.until("regained the server").await;

    // The restarted server is watched: a new holder shows up, and its release message too.
    let client = Client::connect(&server.url()).await.unwrap();
    let guard = client.get_lock("cli:restarted").lock().await.unwrap();
    let owner = field(&client, guard.owner());
    let state = watch.until("state reentrant ttl").await;
    assert!(state.contains(&owner), "{state}");
    guard.unlock().await.unwrap();
    watch
        .until(&format!("message {} 0", lock_channel("cli:restarted")))
        .await;
    watch.until("state not locked").await;
    watch.interrupt_exits_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_json_reports_lost_and_regained() {
    let mut server = TestServer::start();
    let mut watch = Watch::start(&args(
        &server,
        &["--json", "watch", "cli:restarted-json", "--for", "600"],
    ));
    watch.until("\"watching\"").await;
    server.restart();
    let lost: Value = serde_json::from_str(&watch.until("\"lost\"").await).unwrap();
    assert_eq!(lost["event"], "lost");
    assert!(!lost["error"].as_str().unwrap().is_empty());
    let back: Value = serde_json::from_str(&watch.until("\"regained\"").await).unwrap();
    assert_eq!(back["event"], "regained");
    let _ = watch.child.start_kill();
}
