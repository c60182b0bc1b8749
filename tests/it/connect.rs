//! Connecting: bad URLs and refused credentials fail at `connect` with a clear error, never at
//! the first lock call (issue 10, defect 6).

use crate::support::*;
use redisson_lock::{Client, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_server_fails_at_connect_without_the_right_password() {
    let server = TestServer::start_with(&["--requirepass", "s3cret"]);
    let port = server.port;

    let err = Client::connect(&format!("redis://127.0.0.1:{port}/"))
        .await
        .expect_err("connected without a password to a protected server");
    assert!(err.is_auth(), "no password: {err}");

    let err = Client::connect(&format!("redis://:wrong@127.0.0.1:{port}/"))
        .await
        .expect_err("connected with a wrong password");
    assert!(err.is_auth(), "wrong password: {err}");
    assert!(
        !err.to_string().contains("wrong@"),
        "the password leaked: {err}"
    );

    let client = Client::connect(&format!("redis://:s3cret@127.0.0.1:{port}/"))
        .await
        .expect("the right password");
    let guard = client.get_lock("connect:auth").lock().await.unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn malformed_urls_are_invalid_arguments() {
    for url in [
        "not a url",
        "redis://:99999999/",
        "http://127.0.0.1/",
        "",
        "redis://",
    ] {
        let err = Client::connect(url)
            .await
            .expect_err(&format!("connected to {url:?}"));
        assert!(err.is_invalid_argument(), "{url:?}: {err}");
    }
    let err = Client::with_config(Config::cluster(["redis://127.0.0.1:7000/", "nonsense"]))
        .await
        .expect_err("a cluster with a bad node URL");
    assert!(err.is_invalid_argument(), "{err}");
    let err = Client::with_config(Config::cluster(Vec::<String>::new()))
        .await
        .expect_err("a cluster without nodes");
    assert!(err.is_invalid_argument(), "{err}");
    // A password in a bad URL is not echoed back.
    let err = Client::connect("redis://:hunter2@127.0.0.1:99999999/")
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_connection_error() {
    // A port nothing listens on: a server started and stopped.
    let mut server = TestServer::start();
    let port = server.port;
    server.kill();
    let err = Client::connect(&format!("redis://127.0.0.1:{port}/"))
        .await
        .expect_err("connected to a dead server");
    assert!(err.is_connection_error(), "{err}");
    assert!(!err.is_invalid_argument() && !err.is_auth(), "{err}");
}

/// `connect` loads the scripts, so a burst of first calls does not each meet `NOSCRIPT` and
/// load the script itself (docs/benchmarks.md, many waiters).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_loads_the_scripts() {
    let server = TestServer::start();
    let sha = |src: &str| redis::Script::new(src).get_hash().to_owned();
    let shas = [
        sha(include_str!("../../lua/lock.lua")),
        sha(include_str!("../../lua/unlock.lua")),
        sha(include_str!("../../lua/fair_lock.lua")),
        sha(include_str!("../../lua/semaphore_acquire.lua")),
    ];
    let mut raw = server.conn().await;
    let loaded = |raw: &mut redis::aio::MultiplexedConnection| {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("EXISTS").arg(&shas);
        let raw = raw.clone();
        async move {
            let mut raw = raw;
            cmd.query_async::<Vec<i64>>(&mut raw).await.unwrap()
        }
    };
    assert_eq!(
        loaded(&mut raw).await,
        vec![0; 4],
        "a fresh server has none"
    );
    let client = server.client().await;
    assert_eq!(loaded(&mut raw).await, vec![1; 4], "loaded by connect");
    // And the first lock makes no NOSCRIPT round trip.
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut raw)
        .await
        .unwrap();
    take_and_release(&client.get_lock("preloaded")).await;
    let stats = info(&mut raw, "commandstats").await;
    assert!(
        !stats.contains("cmdstat_script|load"),
        "no script was loaded on first use: {stats}"
    );
}
