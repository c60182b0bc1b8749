//! Sentinel: a `+switch-master` is followed to the address it announces, even when the
//! sentinel the client asks first still names the old master.
//!
//! The set-up: the usual master, replica and 3 sentinels (the group), plus a fourth sentinel
//! (the *lagging* one) that monitors the same master under the same name but never hears of the
//! group: it reaches the data nodes as the ACL user `lagging`, which may touch no pub/sub
//! channel, so it can neither publish nor receive the `__sentinel__:hello` messages through
//! which sentinels find one another and pass on a new configuration. It keeps naming the old
//! master for good, as a sentinel with an older view did for seconds in a failover round under
//! load (Valkey), where a client with failover awareness took a lock on the old master 5.7 s
//! after the group's `+switch-master`. The client lists the lagging sentinel first.
//!
//! The old master is kept writable after the switch (its `REPLICAOF` is denied to the group by
//! ACL, and the lagging sentinel may not send `REPLICAOF` to the new master either), as it is in
//! the window before the sentinels convert it (up to 10 s), for the whole test.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use redis::Commands;
use redisson_lock::{Client, Config};

use crate::failover_aware::sentinels_watched;
use crate::require_tls;
use crate::support::cluster::{
    ask_failover, lose_on_replica, wait_until, Node, TestSentinel, MASTER_NAME,
};
use crate::support::tls::Pki;

/// The ACL user of the lagging sentinel on the data nodes: every command but `REPLICAOF`, no
/// pub/sub channel (so no hello messages).
const LAGGING: [&str; 10] = [
    "--user",
    "lagging",
    "on",
    ">lag-pw",
    "~*",
    "resetchannels",
    "+@all",
    "-replicaof",
    "-slaveof",
    "-publish",
];

/// The client's ACL user on the data nodes (in the TLS set-up's URLs).
const APP: [&str; 7] = ["--user", "app", "on", ">data-pw", "~*", "&*", "+@all"];

/// The group and the lagging sentinel watching its master; with `pki`, everything speaks
/// mutual TLS (the sentinels reach the data nodes on their TLS ports, `support/tls.rs`), and the
/// data nodes know the client's ACL user `app` (`data-pw`).
struct Set {
    s: TestSentinel,
    lagging: Node,
    /// The sentinels' URLs for the client, the lagging one first.
    urls: Vec<String>,
    /// The master's port as the sentinels name it (its TLS port with `pki`).
    master: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

impl Set {
    fn start(pki: Option<&Pki>) -> Set {
        let tls = |port: u16| match pki {
            Some(pki) => {
                let mut args = pki.server_args(port, &pki.server, true);
                args.extend(["--tls-replication".into(), "yes".into()]);
                args
            }
            None => Vec::new(),
        };
        let mut ports = Vec::new();
        let s = TestSentinel::start_with_args(|role| {
            let port = if pki.is_some() { free_port() } else { 0 };
            let mut args = tls(port);
            if role != "sentinel" {
                args.extend(LAGGING.iter().map(|a| a.to_string()));
                args.extend(APP.iter().map(|a| a.to_string()));
            }
            ports.push((role.to_owned(), port));
            (port, args)
        });
        let tls_port = |role: &str| ports.iter().find(|(r, _)| r == role).map(|(_, p)| *p);
        let master = match tls_port("master") {
            Some(p) if p != 0 => p,
            _ => s.master.port,
        };
        let conf = format!(
            "sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
             sentinel auth-user {MASTER_NAME} lagging\n\
             sentinel auth-pass {MASTER_NAME} lag-pw\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
        );
        let lagging_tls = if pki.is_some() { free_port() } else { 0 };
        let mut args = vec!["--sentinel".to_owned()];
        args.extend(tls(lagging_tls));
        let lagging = Node::spawn(free_port(), args, Some(conf));
        let url = |plain: u16, tls: u16| match pki {
            Some(_) => format!("rediss://app:data-pw@127.0.0.1:{tls}/"),
            None => format!("redis://127.0.0.1:{plain}/"),
        };
        let mut urls = vec![url(lagging.port, lagging_tls)];
        let sentinel_tls = ports
            .iter()
            .filter(|(r, _)| r == "sentinel")
            .map(|(_, p)| *p);
        for (node, tls) in s.sentinels.iter().zip(sentinel_tls) {
            urls.push(url(node.port, tls));
        }
        Set {
            s,
            lagging,
            urls,
            master,
        }
    }
}

/// The master port a sentinel names.
fn named_by(sentinel: &Node) -> Option<u16> {
    redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(MASTER_NAME)
        .query::<(String, u16)>(&mut sentinel.try_conn().ok()?)
        .ok()
        .map(|(_, p)| p)
}

fn role(node: &Node) -> String {
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut node.conn()).unwrap();
    match role.first() {
        Some(redis::Value::BulkString(r)) => String::from_utf8_lossy(r).into_owned(),
        other => panic!("ROLE: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_switch_is_followed_past_a_lagging_sentinel() {
    let set = Set::start(None);
    followed(&set, Config::sentinel(set.urls.clone(), MASTER_NAME)).await;
}

/// The same over mutual TLS, with the data nodes' ACL user: the connection to the announced
/// master (and to any master the sentinels name after it) keeps the resolved one's TLS
/// settings, certificates and credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_switch_is_followed_over_tls_with_credentials() {
    require_tls!();
    let pki = Pki::new();
    let set = Set::start(Some(&pki));
    let config = Config::sentinel(set.urls.clone(), MASTER_NAME)
        .with_tls(pki.client_tls())
        .with_client_name("sw-tls");
    let _client = followed(&set, config).await;
    // Every connection of the client on the new master is the ACL user `app` (the default
    // user is open there, for the harness: a connection without credentials would work too).
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut set.s.replica.conn())
        .unwrap();
    let ours: Vec<&str> = list
        .lines()
        .filter(|l| l.contains(" name=sw-tls"))
        .collect();
    assert!(
        !ours.is_empty(),
        "no connection of the client on the new master: {list}"
    );
    for line in ours {
        assert!(line.contains(" user=app "), "{line}");
    }
}

/// Takes a hold on the master, fails the group over, and checks that the client follows the
/// announcement past the lagging sentinel, at the switch and after a connection error.
/// Returns the client, still connected.
async fn followed(set: &Set, config: Config) -> Client {
    let (s, lagging) = (&set.s, &set.lagging);
    let client = Client::with_config(
        config
            .with_failover_awareness(true)
            // No periodic renewal inside the test: only the switch can tell the loss.
            .with_watchdog_timeout(Duration::from_secs(300))
            .with_replica_sync(None)
            .with_response_timeout(Duration::from_secs(2))
            .with_connection_timeout(Duration::from_secs(2)),
    )
    .await
    .expect("client through the sentinels");

    // A hold on the master that the replica, the future master, lacks (a failover before
    // replication): the switch costs it, and awareness must say so.
    let guard = client.get_lock("sw-held").lock().await.unwrap();
    lose_on_replica(&s.master, &s.replica, redis::cmd("DEL").arg("sw-held"));
    let mut master = s.master.conn();
    // The group may not convert the old master: it stays writable.
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("-replicaof")
        .arg("-slaveof")
        .query(&mut master)
        .unwrap();

    // The client listens on every sentinel, and the lagging one names the master too.
    let mut ports: Vec<u16> = s.sentinels.iter().map(|n| n.port).collect();
    ports.push(lagging.port);
    let watched = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(30), || sentinels_watched(&ports))
    })
    .await
    .unwrap();
    assert!(
        watched,
        "the client subscribed to +switch-master everywhere"
    );
    assert_eq!(named_by(lagging), Some(set.master));
    assert!(!guard.is_lost());

    // The group fails over to the replica.
    let old = set.master;
    let group = s.sentinels[0].port;
    let switched = tokio::task::spawn_blocking(move || {
        let node = |port| redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut sentinel = node(group)
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        ask_failover(&mut sentinel);
        let promoted = wait_until(Duration::from_secs(60), || {
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query::<(String, u16)>(&mut sentinel)
                .is_ok_and(|(_, p)| p != old)
        });
        assert!(promoted, "the group promoted the replica");
        Instant::now()
    })
    .await
    .unwrap();

    // Awareness re-verifies the hold at the switch: the new master lacks it.
    let lost = tokio::time::timeout(Duration::from_secs(20), guard.lost())
        .await
        .is_ok();
    let after = switched.elapsed();

    // The next lock goes to the new master, though the lagging sentinel still names the old
    // one and the old one still takes writes.
    let g = client.get_lock("sw-next").lock().await.unwrap();
    let on_new: bool = s.replica.conn().exists("sw-next").unwrap();
    let on_old: bool = s.master.conn().exists("sw-next").unwrap();
    g.unlock().await.unwrap();
    assert!(
        lost && on_new && !on_old,
        "{after:?} after the switch: the hold the new master lacks reported lost: {lost}; \
         the next lock on the new master: {on_new}, on the old one: {on_old}"
    );

    // A connection error on the new master sends the client back to the sentinels: the
    // lagging one, asked first, still names the old master, which still says master. The
    // client must not go back there.
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut s.replica.conn())
        .unwrap();
    let g = client.get_lock("sw-after-error").lock().await.unwrap();
    let on_new: bool = s.replica.conn().exists("sw-after-error").unwrap();
    let on_old: bool = s.master.conn().exists("sw-after-error").unwrap();
    g.unlock().await.unwrap();
    assert!(
        on_new && !on_old,
        "after a connection error the lock went to the {} master",
        if on_old { "old" } else { "wrong" }
    );
    assert_eq!(named_by(lagging), Some(old), "the sentinel still lags");
    assert_eq!(role(&s.master), "master", "the old master stayed writable");
    client
}
