//! `list --wide` (each holder with its client's connection) and `list --orphans` (the locks
//! whose holders' clients have no connection on any master: dead holders waiting out their
//! lease), on a server and on a cluster. A holder with no connection named with its uuid while
//! some connection carries no uuid (a Java Redisson client names none with it) is `unknown`,
//! never an orphan; `CLIENT LIST` refused: `--orphans` cannot tell and fails.

use std::time::Duration;

use redisson_lock::{Client, Config};
use serde_json::Value;

use crate::cli::*;
use crate::support::cluster::TestCluster;
use crate::support::*;

/// A crate client that took `name` (a 10-minute lease, so the lock outlives the test) and was
/// then dropped without unlocking: a holder whose process died. Its uuid.
async fn dead_holder(client: Client, name: &str) -> String {
    let guard = client
        .get_lock(name)
        .lock_with_lease(Duration::from_secs(600))
        .await
        .unwrap();
    guard.detach();
    let uuid = client.id().to_owned();
    drop(client);
    uuid
}

/// `list --json` with `flags` on `target` (`--url URL` or `--cluster SEEDS`): the lead element
/// and the entries.
async fn listing(target: &[String], flags: &[&str]) -> (Value, Vec<Value>) {
    let mut a = vec!["--json".to_owned()];
    a.extend(target.iter().cloned());
    a.push("list".to_owned());
    a.extend(flags.iter().map(|s| s.to_string()));
    let out = cli(&a).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {} {}", out.stdout, out.stderr));
    (v[0].clone(), listed(&v))
}

fn names(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

/// Waits (the dead client's connections close in the background) until `list --orphans` shows
/// exactly `expected`; the last listing.
async fn orphans_become(target: &[String], expected: &[&str]) -> (Value, Vec<Value>) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let last = listing(target, &["--orphans", "cli-orph*"]).await;
        if names(&last.1) == expected {
            return last;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "orphans never became {expected:?}: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What `--wide` must say of the live lock: its holder's connection, its TTL.
fn live_entry_shows_its_connection(entries: &[Value], name: &str, uuid: &str) {
    let live = entries.iter().find(|e| e["name"] == name).unwrap();
    assert_eq!(live["liveness"], "live", "{live}");
    assert!(live["ttl_ms"].as_i64().unwrap() > 0, "{live}");
    let holder = &live["owners"][0];
    assert!(
        holder["owner"].as_str().unwrap().starts_with(uuid),
        "{live}"
    );
    let conns = holder["connections"].as_array().unwrap();
    assert!(!conns.is_empty(), "{live}");
    for c in conns {
        assert!(c["name"].as_str().unwrap().contains(uuid), "{c}");
        assert!(c["addr"].as_str().unwrap().starts_with("127.0.0.1:"), "{c}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_the_locks_of_dead_clients_and_wide_shows_the_live_holders_connection() {
    let server = TestServer::start();
    let target = vec!["--url".to_owned(), server.url()];
    let live = server.client().await;
    let guard = live.get_lock("cli-orph:live").lock().await.unwrap();
    let dead = dead_holder(server.client().await, "cli-orph:dead").await;

    // Every connection carries a client uuid: the dead client's lock is an orphan, the live
    // one's is not.
    let (lead, orphans) = orphans_become(&target, &["cli-orph:dead"]).await;
    assert_eq!(lead["clients"]["anonymous_connections"], 0, "{lead}");
    assert_eq!(orphans[0]["liveness"], "orphan");
    assert!(orphans[0]["owners"][0]["owner"]
        .as_str()
        .unwrap()
        .starts_with(&dead));
    assert_eq!(orphans[0]["owners"][0]["connections"], Value::Array(vec![]));
    let text = cli(&args(&server, &["list", "--orphans", "cli-orph*"])).await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    let rows: Vec<&str> = text.stdout.lines().skip(2).collect();
    assert_eq!(rows.len(), 1, "{}", text.stdout);
    assert!(rows[0].contains("orphan") && rows[0].ends_with("cli-orph:dead"));
    assert!(text.stderr.contains("1 orphan lock(s)"), "{}", text.stderr);

    // Without --wide or --orphans: both locks, as the plain list shows them (no liveness, no
    // connection column).
    let (_, plain) = listing(&target, &["cli-orph*"]).await;
    assert_eq!(names(&plain), ["cli-orph:dead", "cli-orph:live"]);
    for e in &plain {
        assert!(e.get("liveness").is_none(), "{e}");
    }
    let text = cli(&args(&server, &["list", "cli-orph*"])).await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    let header = text.stdout.lines().nth(1).unwrap();
    assert!(!header.contains("CONN"), "{header}");

    // --wide: both, the live holder with its connection and TTL, the dead one with none.
    let (_, all) = listing(&target, &["--wide", "cli-orph*"]).await;
    assert_eq!(names(&all), ["cli-orph:dead", "cli-orph:live"]);
    live_entry_shows_its_connection(&all, "cli-orph:live", live.id());
    let text = cli(&args(&server, &["list", "--wide", "cli-orph*"])).await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    let header = text.stdout.lines().nth(1).unwrap();
    assert!(
        header.contains("TTL") && header.contains("CONN"),
        "{header}"
    );
    let live_row = text.stdout.lines().find(|l| l.ends_with("cli-orph:live"));
    let live_row = live_row.unwrap_or_else(|| panic!("{}", text.stdout));
    let addr = all[1]["owners"][0]["connections"][0]["addr"]
        .as_str()
        .unwrap();
    assert!(
        live_row.contains(" live ") && live_row.contains(addr),
        "{live_row}"
    );
    let dead_row = text.stdout.lines().find(|l| l.ends_with("cli-orph:dead"));
    assert!(
        dead_row.unwrap().contains(" orphan  -  "),
        "{}",
        text.stdout
    );

    // A client that names no connection with its uuid (as Java Redisson), holding a lock as
    // Java writes it: its holder is unknown, not an orphan; and so, now, is the dead one.
    let mut java = server.conn().await;
    let _: () = redis::cmd("HSET")
        .arg("cli-orph:java")
        .arg("0badc0de-0000-4000-8000-00000000fa11:1")
        .arg(1)
        .query_async(&mut java)
        .await
        .unwrap();
    let (lead, orphans) = listing(&target, &["--orphans", "cli-orph*"]).await;
    assert!(orphans.is_empty(), "{orphans:?}");
    assert!(lead["clients"]["anonymous_connections"].as_i64() >= Some(1));
    assert_eq!(lead["clients"]["unknown_locks"], 2, "{lead}");
    let text = cli(&args(&server, &["list", "--orphans", "cli-orph*"])).await;
    assert!(text.stderr.contains("0 orphan lock(s)"), "{}", text.stderr);
    assert!(text.stderr.contains("unknown liveness"), "{}", text.stderr);
    let (_, all) = listing(&target, &["--wide", "cli-orph*"]).await;
    let of = |n: &str| all.iter().find(|e| e["name"] == n).unwrap()["liveness"].clone();
    assert_eq!(of("cli-orph:java"), "unknown");
    assert_eq!(of("cli-orph:dead"), "unknown");
    assert_eq!(of("cli-orph:live"), "live");
    guard.unlock().await.unwrap();
}

/// A user without `CLIENT LIST`: `--orphans` says it cannot tell and fails; `--wide` lists
/// without connections and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_need_client_list() {
    let (server, client, mut raw) = fixture().await;
    client.get_lock("cli-orph:x").lock().await.unwrap().detach();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "nolist", "on", ">nolist-pw", "~*", "&*", "+@all"][..])
        .arg("-client|list")
        .query_async(&mut raw)
        .await
        .unwrap();
    let url = format!("redis://nolist:nolist-pw@127.0.0.1:{}", server.port);
    let run = |flag: &'static str| {
        let a = ["--url", &url, "list", flag, "cli-orph*"].map(String::from);
        async move { cli(&a).await }
    };
    let orphans = run("--orphans").await;
    assert_eq!(orphans.code, 1, "{}", orphans.stderr);
    assert!(
        orphans
            .stderr
            .contains("cannot tell orphan locks: CLIENT LIST refused"),
        "{}",
        orphans.stderr
    );
    let wide = run("--wide").await;
    assert_eq!(wide.code, 0, "{}", wide.stderr);
    assert!(
        wide.stderr.contains("CLIENT LIST refused"),
        "{}",
        wide.stderr
    );
    assert!(wide.stdout.contains("cli-orph:x"), "{}", wide.stdout);
}

/// On a cluster: every master's `CLIENT LIST` is read (a crate client has a connection on
/// each), and a dead client's locks in every slot are orphans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_on_a_cluster() {
    let cluster = TestCluster::start(0);
    let cfg = || Config::cluster(cluster.urls());
    let live = Client::with_config(cfg()).await.unwrap();
    let mut guards = Vec::new();
    for name in ["cli-orph:live:a", "cli-orph:live:b", "cli-orph:live:c"] {
        guards.push(live.get_lock(name).lock().await.unwrap());
    }
    let dead_client = Client::with_config(cfg()).await.unwrap();
    for name in ["cli-orph:dead:b", "cli-orph:dead:c"] {
        let l = dead_client.get_lock(name);
        l.lock_with_lease(Duration::from_secs(600))
            .await
            .unwrap()
            .detach();
    }
    dead_holder(dead_client, "cli-orph:dead:a").await;
    let target = vec!["--cluster".to_owned(), cluster.urls().join(",")];
    let dead = ["cli-orph:dead:a", "cli-orph:dead:b", "cli-orph:dead:c"];
    let (lead, _) = orphans_become(&target, &dead).await;
    assert_eq!(lead["server"]["nodes"].as_array().unwrap().len(), 3);
    let (_, all) = listing(&target, &["--wide", "cli-orph*"]).await;
    assert_eq!(all.len(), 6, "{all:?}");
    for name in ["cli-orph:live:a", "cli-orph:live:b", "cli-orph:live:c"] {
        live_entry_shows_its_connection(&all, name, live.id());
    }
    for g in guards {
        g.unlock().await.unwrap();
    }
}
