//! `watch`: release messages and state lines, `--for`, Ctrl-C, JSON lines.

use crate::cli::*;
use crate::support::*;
use serde_json::Value;

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
