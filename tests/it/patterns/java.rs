//! A Java service at the other end (real Redisson, both pinned versions, `tests/it/java/`): a
//! Rust scoped-guard loop contends with Java threads doing the same read-modify-write on one
//! name, and a Rust acquire cut short by a timeout while Java holds, then woken by Java's
//! unlock. The Rust holder's field counts 1 whenever Java could look (`getHoldCount` reads it).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{Lock, LockError, LockKind};

use super::*;
use crate::java::peers;
use crate::support::TestServer;

/// How long each Java thread contends.
const JAVA_CONTENDS: Duration = Duration::from_millis(800);

/// The Java peer's name of each kind it can contend with.
fn java_kind(kind: Kind) -> &'static str {
    match kind {
        Kind::Reentrant => "lock",
        Kind::Fair => "fair",
        Kind::Fenced => "fenced",
        Kind::Spin => "spin",
        Kind::Write => "write",
        _ => unreachable!("not contended with Java here"),
    }
}

/// The Rust side: `iterations()` scoped holds, each a GET-yield-SET of the shared counter, with
/// the hash checked inside: this holder's field counts 1 and no other holder's field is there.
async fn rust_side<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    mut raw: MultiplexedConnection,
    counter: String,
) -> Result<usize, LockError> {
    for _ in 0..iterations() {
        let guard = lock.lock().await?;
        let field = kind.field(lock.client(), guard.owner());
        let keys: Vec<String> = raw.hkeys(lock.name()).await.unwrap();
        let holders: Vec<&String> = keys.iter().filter(|k| *k != "mode").collect();
        assert_eq!(holders, vec![&field], "{kind:?}: holders inside: {keys:?}");
        assert_held_once(&mut raw, lock.name(), &field).await;
        let n: Option<i64> = raw.get(&counter).await.unwrap();
        do_work().await?;
        let () = raw.set(&counter, n.unwrap_or(0) + 1).await.unwrap();
    }
    Ok(iterations())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_scoped_loop_contends_with_java_threads() {
    let server = TestServer::start();
    let peers = peers(&server.url(), None).await;
    let client = server.client().await;
    let mut raw = server.conn().await;
    for kind in [
        Kind::Reentrant,
        Kind::Fair,
        Kind::Fenced,
        Kind::Spin,
        Kind::Write,
    ] {
        let name = kind.name("pat:java:contend");
        let counter = format!("{name}:counter");
        let cmd = format!(
            "contend {} {name} {counter} {} 1",
            java_kind(kind),
            JAVA_CONTENDS.as_millis()
        );
        let java: Vec<_> = peers.iter().map(|p| p.send("worker", &cmd)).collect();
        let rust = with_kind!(kind, client, name.clone(), |lock| tokio::spawn(rust_side(
            kind,
            lock,
            raw.clone(),
            counter.clone()
        )));
        let mut total = tokio::time::timeout(Duration::from_secs(120), rust)
            .await
            .expect("the Rust loop stalled")
            .unwrap()
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        for (peer, reply) in peers.iter().zip(java) {
            let reply = reply
                .await
                .unwrap_or_else(|e| panic!("{kind:?} Redisson {}: {e:?}", peer.version()));
            let count: usize = reply.split(' ').next().unwrap().parse().unwrap();
            total += count;
        }
        let n: i64 = raw.get(&counter).await.unwrap();
        assert_eq!(
            n as usize, total,
            "{kind:?}: lost updates between Java and Rust"
        );
        assert_freed(&raw, &name).await;
    }
}

/// Java holds; Rust's acquires cut short by a timeout leave nothing; Java's unlock wakes the
/// Rust waiter; the Rust guard dropped at the end of its scope lets a waiting Java thread in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_timeouts_against_a_java_holder() {
    let server = TestServer::start();
    let peers = peers(&server.url(), None).await;
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in &peers {
        for (kind, jk) in [(Kind::Reentrant, "lock"), (Kind::Fair, "fair")] {
            let name = format!("{}:{}", kind.name("pat:java:timeout"), peer.version());
            peer.lock("holder", jk, &name, None).await;
            with_kind!(kind, client, name.clone(), |lock| {
                for i in 0..iterations() {
                    let d = Duration::from_millis((i % 7) as u64);
                    let cut = tokio::time::timeout(d, lock.lock()).await;
                    assert!(cut.is_err(), "{kind:?}: got a lock Java holds: {cut:?}");
                }
                let field = kind.field(&client, lock.owner());
                assert_eq!(count(&mut raw, &name, &field).await, 0, "{kind:?}");
                let unlock = async {
                    subscribed_at_least(&client, 1).await;
                    peer.unlock("holder", jk, &name).await.unwrap();
                };
                let (got, ()) = tokio::join!(tokio::time::timeout(WAIT, lock.lock()), unlock);
                let guard = got
                    .unwrap_or_else(|_| panic!("{kind:?}: Java's unlock did not wake Rust"))
                    .unwrap();
                assert_held_once(&mut raw, &name, &field).await;
                let java_waits = peer.send(
                    "waiter",
                    &format!("trylock {jk} {name} {} -1", WAIT.as_millis()),
                );
                {
                    let _scoped = guard;
                }
                let in_java = java_waits.await.unwrap();
                assert_eq!(in_java, "true", "{kind:?}: Java never got the lock back");
                peer.unlock("waiter", jk, &name).await.unwrap();
            });
            assert_freed(&raw, &name).await;
        }
    }
}
