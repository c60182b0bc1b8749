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
