//! Say where you are (issue 38): every output, text and `--json`, names the server it read
//! (address, role, server name and version) and the topology, and says when the URL is the
//! built-in default.

use crate::cli::*;
use crate::support::*;
use serde_json::Value;

/// The server's name and version as `INFO server` says them: `server_name` (Valkey) or
/// `redis`, and that name's `<name>_version` (`valkey_version`) or `redis_version`.
async fn identity(server: &TestServer) -> (String, String) {
    let mut raw = server.conn().await;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut raw)
        .await
        .unwrap();
    let field = |k: &str| {
        info.lines().find_map(|l| {
            l.trim()
                .strip_prefix(&format!("{k}:")[..])
                .map(str::to_owned)
        })
    };
    let name = field("server_name").unwrap_or_else(|| "redis".to_owned());
    let version = field(&format!("{name}_version"))
        .or_else(|| field("redis_version"))
        .unwrap();
    (name, version)
}

fn assert_names(v: &Value, port: u16, (name, version): &(String, String)) {
    let s = &v["server"];
    assert_eq!(s["address"], format!("127.0.0.1:{port}"), "{v}");
    assert_eq!(s["version"], version.as_str(), "{v}");
    assert_eq!(s["name"], name.as_str(), "{v}");
    assert_eq!(s["role"], "master", "{v}");
    assert_eq!(s["topology"], "standalone", "{v}");
    assert_eq!(s["default_url"], false, "{v}");
    assert_eq!(s["nodes"][0]["address"], format!("127.0.0.1:{port}"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_output_text_and_json_names_the_server_it_read() {
    let (server, client) = with_client().await;
    let version = identity(&server).await;
    let port = server.port;
    let _guard = client.get_lock("cli:where").lock().await.unwrap();
    let line = format!(
        "server: {} {} master at 127.0.0.1:{port} (standalone)",
        version.0, version.1
    );
    let commands: [&[&str]; 8] = [
        &["inspect", "cli:where"],
        &["list"],
        &["force-unlock", "cli:nowhere", "--yes"],
        &["semaphore", "add", "cli:where-sem", "1", "--yes"],
        &["permit-semaphore", "add", "cli:where-pes", "1", "--yes"],
        &["latch", "delete", "cli:nowhere", "--yes"],
        &["latch", "count-down", "cli:nowhere", "--yes"],
        &["rate-limiter", "delete", "cli:nowhere", "--yes"],
    ];
    for command in commands {
        let out = cli(&args(&server, command)).await;
        assert_eq!(out.code, 0, "{command:?}: {}", out.stderr);
        assert_eq!(
            out.stdout.lines().next(),
            Some(line.as_str()),
            "{command:?}"
        );
        let v = json(args(&server, command)).await;
        if command[0] == "list" {
            assert_names(&v[0], port, &version);
            assert_eq!(listed(&v).len(), 1, "{v}");
        } else {
            assert_names(&v, port, &version);
        }
    }

    // watch: a line after `watching` in text, the `watching` event in JSON.
    let mut watch = Watch::start(&args(&server, &["watch", "cli:where", "--for", "600"]));
    watch.until("watching cli:where").await;
    let said = watch.until("server:").await;
    assert!(said.ends_with(&line), "{said}");
    drop(watch);
    let mut watch = Watch::start(&args(
        &server,
        &["--json", "watch", "cli:where", "--for", "600"],
    ));
    let first = watch.until("\"event\"").await;
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["event"], "watching", "{v}");
    assert_names(&v, port, &version);
    drop(watch);

    // The URL from $REDIS_URL is no default: no note.
    let out = cli_env(
        &["inspect".to_owned(), "cli:where".to_owned()],
        &[("REDIS_URL", &server.url())],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().next(), Some(line.as_str()));
    assert!(!out.stdout.contains("default"), "{}", out.stdout);
}

/// With no `--url` and no `$REDIS_URL` the CLI reads the built-in default, and says so: the
/// suite cannot own port 6379, so where nothing listens there the error names the URL it
/// tried and that it is the default; where something does, the output says it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_url_the_built_in_default_is_named() {
    let out = cli_env(&["inspect".to_owned(), "cli:anywhere".to_owned()], &[]).await;
    let said = if out.code == 0 {
        out.stdout.clone()
    } else {
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(
            out.stderr
                .contains("cannot connect to redis://127.0.0.1:6379"),
            "{}",
            out.stderr
        );
        out.stderr.clone()
    };
    assert!(
        said.contains("built-in default URL, REDIS_URL not set"),
        "{said}"
    );
}
