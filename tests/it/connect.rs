//! Connecting: bad URLs and refused credentials fail at `connect` with a clear error, never at
//! the first lock call (issue 10, defect 6); every connection is named after the client.

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
/// load the script itself (benches/results/HISTORY.md, many waiters).
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

/// `CLIENT LIST` of the server behind `conn`, one field map per connection.
/// Valkey 9 made Lua a module: a server without it (here: the pinned Valkey 9.1 with its `lua`
/// module unloaded) is refused at connect with a clear error, not at the first lock call with
/// a bare `ERR Could not find scripting engine`. Loaded, the same server serves locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_lua_is_refused_at_connect() {
    let server = TestServer::start_valkey9(&["--enable-module-command", "yes"]);
    let url = server.url();
    // The engine is there at first: a lock works.
    let client = Client::connect(&url)
        .await
        .expect("Valkey 9.1 with its Lua module");
    client
        .get_lock("connect:lua")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    drop(client);

    let mut raw = server.conn().await;
    let _: () = redis::cmd("MODULE")
        .arg("UNLOAD")
        .arg("lua")
        .query_async(&mut raw)
        .await
        .expect("MODULE UNLOAD lua");
    let err = Client::connect(&url)
        .await
        .expect_err("connected to a server that runs no scripts");
    assert!(
        matches!(err, redisson_lock::LockError::NoScripting { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("scripting engine") && text.contains("Lua"),
        "{text}"
    );
}

fn client_list(conn: &mut redis::Connection) -> Vec<std::collections::HashMap<String, String>> {
    let text: String = redis::cmd("CLIENT").arg("LIST").query(conn).unwrap();
    text.lines()
        .map(|line| {
            line.split(' ')
                .filter_map(|f| f.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}

/// The connections called `name`.
fn named(
    list: &[std::collections::HashMap<String, String>],
    name: &str,
) -> Vec<std::collections::HashMap<String, String>> {
    list.iter()
        .filter(|c| c.get("name").map(String::as_str) == Some(name))
        .cloned()
        .collect()
}

/// A task of `client` waiting (up to 60 s) for `lock`, which it releases once it has it:
/// `Ok(true)` when it got the lock.
fn park_waiter(
    client: &Client,
    lock: &str,
) -> tokio::task::JoinHandle<redisson_lock::Result<bool>> {
    let lock = client.get_lock(lock);
    tokio::spawn(async move {
        match lock
            .try_lock_for(std::time::Duration::from_secs(60))
            .await?
        {
            Some(g) => g.unlock().await.map(|_| true),
            None => Ok(false),
        }
    })
}

/// Opens `client`'s subscriber: a waiter parked on a lock `holder` holds until the server
/// counts its subscription on the lock's channel, then woken by the release (a fixed short wait
/// could end, under load, before the subscriber had connected).
async fn open_subscriber(client: &Client, holder: &Client, lock: &str) {
    let held = holder.get_lock(lock).lock().await.unwrap();
    let waiter = park_waiter(client, lock);
    let channel = format!("redisson_lock__channel:{{{lock}}}");
    let conn = holder.connection();
    let subscribed = eventually(std::time::Duration::from_secs(30), || {
        let mut conn = conn.clone();
        let channel = channel.clone();
        async move {
            let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query_async(&mut conn)
                .await
                .unwrap();
            counts.iter().any(|(_, n)| *n > 0)
        }
    })
    .await;
    assert!(subscribed, "{lock}: the waiter never subscribed");
    held.unlock().await.unwrap();
    assert!(
        waiter.await.unwrap().unwrap(),
        "{lock}: the waiter was not woken"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_is_named_after_the_client_id() {
    let server = TestServer::start();
    let billing = server
        .client_with(|c| c.with_client_name("billing-api"))
        .await;
    let plain = server.client().await;
    open_subscriber(&billing, &plain, "names:single").await;
    let mut raw = server.raw().get_connection().unwrap();

    // The command connection and the subscriber: `<name>:<client id>`, the id being the
    // `<uuid>` of the lock fields, so a holder's field leads to its connections.
    let name = format!("billing-api:{}", billing.id());
    let within = std::time::Duration::from_secs(10);
    assert!(
        eventually(within, || {
            let found = named(&client_list(&mut raw), &name);
            async move { found.len() >= 2 }
        })
        .await,
        "{name} on the command connection and the subscriber: {:?}",
        client_list(&mut raw)
    );
    let found = named(&client_list(&mut raw), &name);
    assert!(
        found
            .iter()
            .any(|c| c.get("cmd").is_some_and(|cmd| cmd.contains("subscribe"))),
        "one is the subscriber: {found:?}"
    );
    // A command connection that redis-rs opens again (after a kill) is named again.
    let command = found
        .iter()
        .find(|c| c.get("cmd").is_some_and(|cmd| !cmd.contains("subscribe")))
        .expect("the command connection")["id"]
        .clone();
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&command)
        .query(&mut raw)
        .unwrap();
    assert!(
        eventually(within, || {
            let lock = billing.get_lock("names:again");
            async move {
                match lock.try_lock().await {
                    Ok(Some(guard)) => guard.unlock().await.is_ok(),
                    _ => false,
                }
            }
        })
        .await,
        "the client works again after its connection was killed"
    );
    let again = named(&client_list(&mut raw), &name);
    assert!(
        again.len() >= 2 && again.iter().all(|c| c["id"] != command),
        "the new command connection is named too: {again:?}"
    );
    // Without a name of its own: `redisson-lock:<client id>`.
    let default = format!("redisson-lock:{}", plain.id());
    assert!(!named(&client_list(&mut raw), &default).is_empty());
    // The library, where the server knows CLIENT SETINFO (Redis 7.2+, Valkey).
    if found.iter().any(|c| c.contains_key("lib-name")) {
        for c in &found {
            assert_eq!(c["lib-name"], "redisson-lock", "{c:?}");
            assert_eq!(c["lib-ver"], env!("CARGO_PKG_VERSION"), "{c:?}");
        }
    }
    // A name Redis would refuse is refused at connect, before anything is sent.
    let e = Client::with_config(server.config().with_client_name("two words"))
        .await
        .expect_err("a name with a space");
    assert!(e.is_invalid_argument(), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cluster_node_sees_the_named_connections() {
    let cluster = crate::support::cluster::TestCluster::start(0);
    let config = || Config::cluster(cluster.urls());
    let client = Client::with_config(config().with_client_name("pods"))
        .await
        .unwrap();
    let other = Client::with_config(config()).await.unwrap();
    // A waiter of `client` parked on a lock `other` holds: its subscription stays open while
    // the nodes are read (a short wait could end, under load, before it had subscribed).
    let held = other.get_lock("names:cluster").lock().await.unwrap();
    let waiter = park_waiter(&client, "names:cluster");
    let name = format!("pods:{}", client.id());
    // Each node: the command connection's connection to it, named. The subscriber's cluster
    // connection reaches the node of the channel's slot at least (redis-rs opens the others at
    // start when it can: under load one was missing, and is opened when first needed).
    for node in &cluster.nodes {
        let mut raw = node.conn();
        assert!(
            eventually(std::time::Duration::from_secs(10), || {
                let found = named(&client_list(&mut raw), &name);
                async move { !found.is_empty() }
            })
            .await,
            "{name} on node {}: {:?}",
            node.port,
            client_list(&mut raw)
        );
    }
    // The connection that holds the waiter's subscription (`sub` or `ssub` above 0) is named.
    let subscribed = || {
        cluster
            .nodes
            .iter()
            .flat_map(|node| client_list(&mut node.conn()))
            .filter(|c| {
                ["sub", "ssub"]
                    .iter()
                    .any(|k| c.get(*k).is_some_and(|n| n != "0"))
            })
            .collect::<Vec<_>>()
    };
    assert!(
        eventually(std::time::Duration::from_secs(30), || {
            let found = subscribed().iter().any(|c| c["name"] == name);
            async move { found }
        })
        .await,
        "the subscriber, named {name}: {:?}",
        subscribed()
    );
    held.unlock().await.unwrap();
    assert!(waiter.await.unwrap().unwrap(), "the waiter was not woken");
}

/// No connection a client opens is ever unnamed on the server, not even one it drops: a
/// connection's close reaches the server when it does, and meanwhile `CLIENT LIST` shows it.
/// An unnamed one reads as a client without a uuid (a Java Redisson client, maybe), and
/// `list --orphans` then calls a dead holder's lock `unknown` (the connect probe did this to
/// `cli::orphans` once in ten runs). Here the proxy holds every close until the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_connection_of_a_client_is_left_unnamed_not_even_one_it_dropped() {
    let server = TestServer::start();
    let proxy = crate::support::proxy::Proxy::start(server.port).await;
    proxy.hold_closes();
    let client = Client::with_config(Config::new(proxy.url())).await.unwrap();
    let other = server.client().await;
    open_subscriber(&client, &other, "names:dropped").await;
    let mut raw = server.raw().get_connection().unwrap();
    let ours = proxy.upstream_addrs();
    assert!(
        ours.len() >= 2,
        "the command and subscriber connections: {ours:?}"
    );
    let name = format!("redisson-lock:{}", client.id());
    let list = client_list(&mut raw);
    let through: Vec<_> = list
        .iter()
        .filter(|c| ours.iter().any(|a| Some(a) == c.get("addr")))
        .collect();
    assert_eq!(
        through.len(),
        ours.len(),
        "every proxied connection open: {list:?}"
    );
    for c in through {
        assert_eq!(c.get("name"), Some(&name), "{c:?}");
    }
}
