//! `inspect` joins each holder with its connections: `CLIENT LIST` entries whose name contains
//! the holder's client uuid (address, age, idle), so an on-call engineer gets from a lock to a
//! pod; `--exit-status` for scripts.

use crate::cli::*;
use crate::support::*;
use redis::AsyncCommands;
use serde_json::Value;

/// A client's own address as the server sees it (`CLIENT INFO`).
async fn own_addr(raw: &mut redis::aio::MultiplexedConnection) -> String {
    let info: String = redis::cmd("CLIENT")
        .arg("INFO")
        .query_async(raw)
        .await
        .unwrap();
    info.split(' ')
        .find_map(|kv| kv.strip_prefix("addr="))
        .unwrap()
        .to_owned()
}

/// A hold written as Redisson writes it, by a connection named with the holder's uuid (as a
/// Java client that puts its id in its name, or another process of this crate, would be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_the_address_of_the_connection_named_with_the_holders_uuid() {
    let server = TestServer::start();
    let uuid = "5eed1e55-0000-4000-8000-00000000a11c";
    let mut named = server.conn().await;
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(format!("billing-7f9c:{uuid}"))
        .query_async(&mut named)
        .await
        .unwrap();
    let addr = own_addr(&mut named).await;
    let _: () = named
        .hset("cli:traced", format!("{uuid}:42"), 1)
        .await
        .unwrap();
    let _: () = named.pexpire("cli:traced", 600_000).await.unwrap();
    // A second holder whose client named no connection: shown without one.
    let _: () = named
        .hset("cli:traced", "5eed1e55-0000-4000-8000-0000000000ff:1", 1)
        .await
        .unwrap();

    let v = json(args(&server, &["inspect", "cli:traced"])).await;
    let holders = v["holders"].as_array().unwrap();
    let traced = holders
        .iter()
        .find(|h| h["owner"] == format!("{uuid}:42"))
        .unwrap();
    let conns = traced["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 1, "{v}");
    assert_eq!(conns[0]["addr"], addr.as_str());
    assert_eq!(conns[0]["name"], format!("billing-7f9c:{uuid}"));
    assert!(conns[0]["age_s"].as_i64().unwrap() >= 0);
    assert!(conns[0]["idle_s"].as_i64().unwrap() >= 0);
    let other = holders
        .iter()
        .find(|h| h["owner"] != traced["owner"])
        .unwrap();
    assert_eq!(other["connections"], Value::Array(Vec::new()));

    let human = cli(&args(&server, &["inspect", "cli:traced"])).await;
    assert!(
        human
            .stdout
            .contains(&format!("conn {addr}  name billing-7f9c:{uuid}")),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("conn none named"), "{}", human.stdout);
}

/// The crate's own client names its connections with its uuid (`Config` client names): its
/// holds lead to its connections. Needs the library's connection naming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_the_connections_of_a_crate_client_holder() {
    let (server, client) = with_client().await;
    let guard = client.get_lock("cli:mine").lock().await.unwrap();
    let owner = field(&client, guard.owner());
    let uuid = owner.split(':').next().unwrap().to_owned();

    let v = json(args(&server, &["inspect", "cli:mine"])).await;
    let conns = v["holders"][0]["connections"].as_array().unwrap().clone();
    assert!(!conns.is_empty(), "no connection named with {uuid}: {v}");
    for c in &conns {
        assert!(c["name"].as_str().unwrap().contains(&uuid), "{c}");
    }
    guard.unlock().await.unwrap();
}

/// `inspect --exit-status`: 0 for a held lock, 3 for a missing key or a key that is no lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_exit_status_tells_held_from_not_locked() {
    let (server, client) = with_client().await;
    let guard = client.get_lock("cli:held").lock().await.unwrap();
    let mut raw = server.conn().await;
    let _: () = raw.set("cli:plain", "x").await.unwrap();
    let code = |name: &'static str| {
        let a = args(&server, &["inspect", "--exit-status", name]);
        async move { cli(&a).await.code }
    };
    assert_eq!(code("cli:held").await, 0);
    assert_eq!(code("cli:missing").await, 3);
    assert_eq!(code("cli:plain").await, 3);
    // Without the flag, every answer is a success: held, missing, or no lock at all.
    for name in ["cli:held", "cli:missing", "cli:plain"] {
        let out = cli(&args(&server, &["inspect", name])).await;
        assert_eq!(
            out.code, 0,
            "inspect {name} without --exit-status: {}",
            out.stderr
        );
    }
    guard.unlock().await.unwrap();
    assert_eq!(code("cli:held").await, 3);
}
