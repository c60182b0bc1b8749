//! Eviction is a silent lock loss (issue 38): a lock key evicted under `maxmemory` is gone for
//! every client, Java's included, and nothing tells anyone. The client says whether the server
//! may evict (`Client::eviction_risk`, a warning at connect), and `inspect` and `list` warn on
//! stderr, or say they could not tell.

use crate::cli::{args, cli};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_list_warn_when_the_server_may_evict_lock_keys() {
    let cases: [(&[&str], Option<&str>); 3] = [
        (
            &["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"],
            Some("allkeys-lru"),
        ),
        (
            &["--maxmemory", "100mb", "--maxmemory-policy", "noeviction"],
            None,
        ),
        // No memory limit: nothing is ever evicted, whatever the policy.
        (&["--maxmemory-policy", "volatile-lru"], None),
    ];
    for (extra, risk) in cases {
        let server = TestServer::start_with(extra);
        let client = server.client().await;
        assert_eq!(
            client.eviction_risk().await.unwrap().as_deref(),
            risk,
            "{extra:?}"
        );
        client.get_lock("ev:x").lock().await.unwrap().detach();
        for command in [&["inspect", "ev:x"][..], &["list"][..]] {
            let out = cli(&args(&server, command)).await;
            assert_eq!(out.code, 0, "{}", out.stderr);
            assert_eq!(
                out.stderr.contains("may evict keys"),
                risk.is_some(),
                "{extra:?} {command:?}: {}",
                out.stderr
            );
            if let Some(policy) = risk {
                assert!(out.stderr.contains(policy), "{}", out.stderr);
                assert!(!out.stdout.contains("may evict"), "stdout stays clean");
            }
        }
    }
}

/// A user that may not run `CONFIG GET` (managed offerings, least privilege): the client's
/// question is an error, and the CLI says it could not tell instead of staying silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_config_get_the_cli_says_it_cannot_tell() {
    let server =
        TestServer::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"]);
    let mut raw = server.conn().await;
    let _: () = redis::cmd("ACL")
        .arg(
            &[
                "SETUSER",
                "nocfg",
                "on",
                ">nocfg-pw",
                "~*",
                "&*",
                "+@all",
                "-config",
            ][..],
        )
        .query_async(&mut raw)
        .await
        .unwrap();
    let url = format!("redis://nocfg:nocfg-pw@127.0.0.1:{}", server.port);
    let client = redisson_lock::Client::connect(&url).await.unwrap();
    let e = client.eviction_risk().await.unwrap_err();
    assert!(e.is_permission_denied(), "{e:?}");
    let out = cli(&[
        "--url".to_owned(),
        url,
        "inspect".to_owned(),
        "ev:y".to_owned(),
    ])
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("cannot tell whether the server may evict"),
        "{}",
        out.stderr
    );
}
