//! Redisson 4.4+'s non-reentrant locks (`getNonReentrantLock`, `getNonReentrantFairLock`)
//! against ours on the same names: one hash with one field at count 1, the holder's second
//! acquire refused on both sides with nothing changed, each side waiting for the other.
//!
//! Redisson 3.52 has neither factory (they came in 4.4.0): these scenarios run on 4.7 and
//! check, on 3.52, only that the peer's kind is refused (so they do not pass by skipping a
//! version that should have had it).

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use redisson_lock::LockOwner;

use super::{peers, JavaPeer};
use crate::support::{eventually, field, fields, TestServer};

const WAIT: Duration = Duration::from_secs(20);

/// `true` when `peer` is a Redisson with the non-reentrant locks; on an older one, checks that
/// the peer refuses the kind and returns `false`.
async fn has_non_reentrant(peer: &JavaPeer, kind: &str) -> bool {
    let major: u32 = peer.version().split('.').next().unwrap().parse().unwrap();
    if major >= 4 {
        return true;
    }
    let e = peer
        .call("a", &format!("trylock {kind} ir:none 0 -1"))
        .await
        .unwrap_err();
    assert_eq!(e.class, "UnsupportedOperationException", "{e:?}");
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_non_reentrant_locks_are_one_lock() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        if !has_non_reentrant(&peer, "nrlock").await {
            continue;
        }
        let v = peer.version().to_owned();
        let name = format!("ir:nr:{v}");
        let lock = client.get_non_reentrant_lock(&name);

        // Java holds: its own second acquire is refused (Redisson's error), nothing changes;
        // ours is held out.
        peer.lock("j", "nrlock", &name, None).await;
        let jf = peer.field("j").await;
        let held = HashMap::from([(jf.clone(), 1)]);
        assert_eq!(fields(&mut raw, &name).await, held, "{v}");
        for cmd in [
            format!("trylock nrlock {name} 0 -1"),
            format!("trylock nrlock {name} 300 -1"),
            format!("lock nrlock {name} -1"),
        ] {
            let e = peer.call("j", &cmd).await.unwrap_err();
            assert_eq!(e.class, "IllegalMonitorStateException", "{v} {cmd}: {e:?}");
            assert!(e.message.contains("non-reentrant"), "{v}: {e:?}");
        }
        assert_eq!(
            fields(&mut raw, &name).await,
            held,
            "{v}: a refusal changed it"
        );
        assert!(lock.try_lock().await.unwrap().is_none(), "{v}");
        // Java's holder is held once: one unlock frees it, and ours takes it.
        peer.unlock("j", "nrlock", &name).await.unwrap();
        let guard = lock
            .try_lock_for(WAIT)
            .await
            .unwrap()
            .expect("free lock not taken");

        // Ours holds: our second acquire is refused, Java's is held out and then wakes on
        // our release.
        let ours = HashMap::from([(field(&client, lock.owner()), 1)]);
        assert_eq!(fields(&mut raw, &name).await, ours, "{v}");
        assert!(lock.try_lock().await.unwrap_err().is_already_held(), "{v}");
        assert_eq!(fields(&mut raw, &name).await, ours, "{v}");
        assert!(
            !peer.bool("j", &format!("trylock nrlock {name} 0 -1")).await,
            "{v}"
        );
        assert!(!peer.bool("j", &format!("held nrlock {name}")).await, "{v}");
        let waiter = peer.send("j", &format!("trylock nrlock {name} 50000 -1"));
        tokio::time::sleep(Duration::from_millis(500)).await;
        guard.unlock().await.unwrap();
        assert_eq!(waiter.await, Ok("true".to_owned()), "{v}");
        assert_eq!(fields(&mut raw, &name).await, held, "{v}");
        peer.unlock("j", "nrlock", &name).await.unwrap();
        assert!(!raw.exists::<_, bool>(&name).await.unwrap(), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_non_reentrant_fair_locks_share_one_queue() {
    let server = TestServer::start();
    let client = server.client().await;
    let mut raw = server.conn().await;
    for peer in peers(&server.url(), None).await {
        if !has_non_reentrant(&peer, "nrfair").await {
            continue;
        }
        let v = peer.version().to_owned();
        let name = format!("ir:nrf:{v}");
        let queue_key = format!("redisson_lock_queue:{{{name}}}");
        let lock = client.get_non_reentrant_fair_lock(&name);

        // Ours holds; Java queues behind it.
        let guard = lock.lock().await.unwrap();
        let jf = peer.field("j").await;
        let waiter = peer.send("j", &format!("lock nrfair {name} -1"));
        let queued = eventually(WAIT, || async {
            let mut raw = raw.clone();
            let q: Vec<String> = raw.lrange(&queue_key, 0, -1).await.unwrap();
            q == [jf.clone()]
        })
        .await;
        assert!(queued, "{v}: Java never queued");
        // Our holder's second acquire: refused, the queue untouched.
        assert!(lock.try_lock().await.unwrap_err().is_already_held(), "{v}");
        let q: Vec<String> = raw.lrange(&queue_key, 0, -1).await.unwrap();
        assert_eq!(q, [jf.as_str()], "{v}");
        // Our release hands it to Java, the queue head.
        guard.unlock().await.unwrap();
        assert_eq!(waiter.await, Ok("null".to_owned()), "{v}");
        assert_eq!(
            fields(&mut raw, &name).await,
            HashMap::from([(jf.clone(), 1)]),
            "{v}"
        );
        // Java's own second acquire: Redisson's refusal, the hash unchanged.
        let e = peer
            .call("j", &format!("trylock nrfair {name} 0 -1"))
            .await
            .unwrap_err();
        assert_eq!(e.class, "IllegalMonitorStateException", "{v}: {e:?}");
        // Ours queues behind Java and is served on Java's unlock.
        let other = lock.with_owner(LockOwner::new(2));
        let rust_waiter = tokio::spawn(async move {
            let g = other.lock().await.unwrap();
            g.unlock().await.unwrap();
        });
        let queued = eventually(WAIT, || async {
            let mut raw = raw.clone();
            let n: i64 = raw.llen(&queue_key).await.unwrap();
            n == 1
        })
        .await;
        assert!(queued, "{v}: ours never queued");
        peer.unlock("j", "nrfair", &name).await.unwrap();
        tokio::time::timeout(WAIT, rust_waiter)
            .await
            .unwrap_or_else(|_| panic!("{v}: ours was not served"))
            .unwrap();
        assert!(!raw.exists::<_, bool>(&name).await.unwrap(), "{v}");
    }
}
