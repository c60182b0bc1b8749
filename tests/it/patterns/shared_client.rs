//! One `Client` shared by a service's request handlers: a task per request (50 at once),
//! contending on a few lock names, each handler making a lock handle from the shared client and
//! doing a non-atomic read-modify-write under it. Nobody is ever inside twice, no update is lost
//! and every request completes.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{Lock, LockError, LockKind};

use super::*;
use crate::support::fixture;

/// Requests in flight at once.
const REQUESTS: usize = 50;
/// Lock names they contend on.
const NAMES: usize = 3;

/// One request: lock, check nobody else is inside, GET-yield-SET a counter, release (dropped
/// at the end of the scope, or unlocked explicitly).
async fn handle<K: LockKind>(
    kind: Kind,
    lock: Lock<K>,
    mut raw: MultiplexedConnection,
    section: Occupancy,
    explicit: bool,
) -> Result<(), LockError> {
    let guard = lock.lock().await?;
    {
        let _inside = section.enter(lock.name());
        let field = kind.field(lock.client(), guard.owner());
        assert_held_once(&mut raw, lock.name(), &field).await;
        let key = format!("{}:counter", lock.name());
        let n: Option<i64> = raw.get(&key).await.unwrap();
        do_work().await?;
        let () = raw.set(&key, n.unwrap_or(0) + 1).await.unwrap();
    }
    if explicit {
        guard.unlock().await?;
    }
    Ok(())
}

async fn request_handlers() {
    let (_server, client, mut raw) = fixture().await;
    let rounds = (iterations() / 30).max(1);
    for kind in Kind::EXCLUSIVE {
        let names: Vec<String> = (0..NAMES)
            .map(|n| kind.name(&format!("pat:shared:{n}")))
            .collect();
        let sections: Vec<Occupancy> = (0..NAMES).map(|_| Occupancy::default()).collect();
        for _ in 0..rounds {
            let mut requests = Vec::with_capacity(REQUESTS);
            for r in 0..REQUESTS {
                let (name, section) = (names[r % NAMES].clone(), sections[r % NAMES].clone());
                let explicit = r % 2 == 0;
                let task = with_kind!(kind, client, name, |lock| tokio::spawn(handle(
                    kind,
                    lock,
                    raw.clone(),
                    section,
                    explicit
                )));
                requests.push(task);
            }
            let all = async {
                for task in requests {
                    task.await
                        .unwrap()
                        .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
                }
            };
            tokio::time::timeout(Duration::from_secs(120), all)
                .await
                .unwrap_or_else(|_| panic!("{kind:?}: requests did not all complete"));
        }
        for (n, name) in names.iter().enumerate() {
            let per_name = rounds * (0..REQUESTS).filter(|r| r % NAMES == n).count();
            assert_eq!(sections[n].entries(), per_name, "{kind:?} {name}");
            let counter: i64 = raw.get(format!("{name}:counter")).await.unwrap();
            assert_eq!(counter as usize, per_name, "{kind:?} {name}: lost updates");
            assert_freed(&raw, name).await;
        }
    }
}

shapes!(one_client_shared_by_request_handlers => request_handlers);
