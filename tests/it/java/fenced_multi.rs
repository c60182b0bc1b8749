//! Fenced lock tokens across both sides, and Java's MultiLock / RedLock against ours over the
//! same member names.

use std::time::Duration;

use redisson_lock::{LockOwner, MultiLock, RedLock};

use super::peers;
use crate::support::{fields, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_tokens_strictly_increase_across_both_sides() {
    let server = TestServer::start();
    let client = server.client().await;
    let peers = peers(&server.url(), None).await;
    // One name for every peer and the crate: tokens come from one counter.
    let name = "if:tokens";
    let lock = client.get_fenced_lock(name).with_owner(LockOwner::new(1));
    let mut tokens: Vec<(String, i64)> = Vec::new();
    for round in 0..4 {
        for peer in &peers {
            let t = peer.lock("a", "fenced", name, None).await;
            let t: i64 = t.parse().unwrap_or_else(|_| panic!("token {t:?}"));
            tokens.push((format!("java {}", peer.version()), t));
            peer.unlock("a", "fenced", name).await.unwrap();
            // And a tryLock's token.
            let t = peer
                .ok("a", &format!("trylock fenced {name} 1000 5000"))
                .await;
            tokens.push((format!("java {} try", peer.version()), t.parse().unwrap()));
            peer.unlock("a", "fenced", name).await.unwrap();
        }
        let g = lock.lock().await.unwrap();
        tokens.push((format!("rust {round}"), g.token()));
        g.unlock().await.unwrap();
    }
    for w in tokens.windows(2) {
        assert!(w[1].1 > w[0].1, "tokens do not increase: {tokens:?}");
    }
}

/// Java's `getToken` and our `current_token` read the same counter, without acquiring:
/// `0`/`None` before the first acquisition, then the latest token of either side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_token_and_current_token_read_one_counter() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let name = format!("if:current:{v}");
        let lock = client.get_fenced_lock(&name).with_owner(LockOwner::new(1));
        // Before the first acquisition Redisson's `GET_LONG` reads the missing counter as 0
        // (tokens start at 1); ours says `None`.
        assert_eq!(
            peer.ok("q", &format!("token fenced {name}")).await,
            "0",
            "{v}"
        );
        assert_eq!(lock.current_token().await.unwrap(), None, "{v}");
        let t: i64 = peer.lock("a", "fenced", &name, None).await.parse().unwrap();
        assert_eq!(lock.current_token().await.unwrap(), Some(t), "{v}");
        assert_eq!(
            peer.ok("q", &format!("token fenced {name}")).await,
            t.to_string(),
            "{v}"
        );
        // Reading took nothing: Java still holds it, once.
        assert_eq!(fields(&mut raw, &name).await.len(), 1, "{v}");
        peer.unlock("a", "fenced", &name).await.unwrap();
        let g = lock.lock().await.unwrap();
        assert_eq!(
            peer.ok("q", &format!("token fenced {name}")).await,
            g.token().to_string(),
            "{v}"
        );
        assert_eq!(lock.current_token().await.unwrap(), Some(g.token()), "{v}");
        g.unlock().await.unwrap();
    }
}

async fn exclusion(kind: &str) {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        let v = peer.version().to_owned();
        let members = [format!("im:{kind}:{v}:1"), format!("im:{kind}:{v}:2")];
        let names = members.join(",");
        let locks = || {
            members
                .iter()
                .map(|m| client.get_lock(m.as_str()).with_owner(LockOwner::new(1)))
                .collect::<Vec<_>>()
        };
        let multi: MultiLock = MultiLock::new(locks()).unwrap();
        let red = RedLock::new(locks()).unwrap();

        // Java holds: ours cannot take it, at once or after waiting.
        peer.lock("j", kind, &names, None).await;
        let field = peer.field("j").await;
        for m in &members {
            assert_eq!(fields(&mut raw, m).await.get(&field), Some(&1), "{v} {m}");
        }
        let wait = Duration::from_millis(1500);
        if kind == "multi" {
            assert!(multi.try_lock().await.unwrap().is_none(), "{v}");
            assert!(multi.try_lock_for(wait).await.unwrap().is_none(), "{v}");
        } else {
            assert!(red.try_lock().await.unwrap().is_none(), "{v}");
            assert!(red.try_lock_for(wait).await.unwrap().is_none(), "{v}");
        }
        peer.unlock("j", kind, &names).await.unwrap();

        // Ours holds: Java's cannot, at once or after waiting; after release it can.
        let guard = if kind == "multi" {
            multi.lock().await.unwrap()
        } else {
            red.lock().await.unwrap()
        };
        let now = format!("trylock {kind} {names} 0 -1");
        let waited = format!("trylock {kind} {names} 1500 -1");
        assert!(!peer.bool("j", &now).await, "{v}: Java took a held {kind}");
        assert!(
            !peer.bool("j", &waited).await,
            "{v}: Java took a held {kind}"
        );
        guard.unlock().await.unwrap();
        assert!(
            peer.bool("j", &waited).await,
            "{v}: Java could not take a free {kind}"
        );
        peer.unlock("j", kind, &names).await.unwrap();
        for m in &members {
            assert!(fields(&mut raw, m).await.is_empty(), "{v} {m} left held");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_multilock_and_ours_exclude_each_other() {
    exclusion("multi").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_redlock_and_ours_exclude_each_other() {
    exclusion("redlock").await;
}
