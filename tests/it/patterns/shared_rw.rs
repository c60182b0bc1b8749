//! One `Client` shared by a service's request handlers around a read-write lock: most requests
//! read a cached value under the read lock, one in five updates it under the write lock (a
//! non-atomic GET-yield-SET). Each handler makes its handle from the shared client; guards are
//! dropped at the end of their scope (or, for half the writes, unlocked); errors leave with `?`.
//! Every request completes (neither side starves the other), no reader is ever inside with a
//! writer, no two writers are inside together, and no update is lost.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{Client, LockError};

use super::*;
use crate::support::fixture;

/// Requests in flight at once.
const REQUESTS: usize = 50;
/// One request in this many writes.
const WRITE_EVERY: usize = 5;

/// Who is inside the critical sections of one name.
#[derive(Clone, Default)]
struct Inside {
    readers: Arc<AtomicUsize>,
    writer: Arc<AtomicBool>,
}

/// A read request: the read guard is dropped at the end of the function.
async fn read(
    client: Client,
    name: String,
    mut raw: MultiplexedConnection,
    inside: Inside,
) -> Result<(), LockError> {
    let _guard = client.get_read_write_lock(&name).read_lock().lock().await?;
    inside.readers.fetch_add(1, SeqCst);
    assert!(!inside.writer.load(SeqCst), "a reader inside with a writer");
    let _: Option<i64> = raw.get(format!("{name}:value")).await.unwrap();
    do_work().await?;
    assert!(
        !inside.writer.load(SeqCst),
        "a writer came in beside a reader"
    );
    inside.readers.fetch_sub(1, SeqCst);
    Ok(())
}

/// A write request: GET-yield-SET under the write guard, dropped or unlocked.
async fn write(
    client: Client,
    name: String,
    mut raw: MultiplexedConnection,
    inside: Inside,
    explicit: bool,
) -> Result<(), LockError> {
    let guard = client
        .get_read_write_lock(&name)
        .write_lock()
        .lock()
        .await?;
    {
        assert!(!inside.writer.swap(true, SeqCst), "two writers inside");
        assert_eq!(
            inside.readers.load(SeqCst),
            0,
            "a writer inside with readers"
        );
        let key = format!("{name}:value");
        let n: Option<i64> = raw.get(&key).await.unwrap();
        do_work().await?;
        let () = raw.set(&key, n.unwrap_or(0) + 1).await.unwrap();
        inside.writer.store(false, SeqCst);
    }
    if explicit {
        guard.unlock().await?;
    }
    Ok(())
}

async fn readers_and_writers() {
    let (_server, client, raw) = fixture().await;
    let name = "pat:shared-rw".to_owned();
    let inside = Inside::default();
    let rounds = (iterations() / 10).max(1);
    for _ in 0..rounds {
        let mut requests = Vec::with_capacity(REQUESTS);
        for r in 0..REQUESTS {
            let (c, n, raw, inside) = (client.clone(), name.clone(), raw.clone(), inside.clone());
            requests.push(if r % WRITE_EVERY == 0 {
                tokio::spawn(write(c, n, raw, inside, r % 2 == 0))
            } else {
                tokio::spawn(read(c, n, raw, inside))
            });
        }
        let all = async {
            for task in requests {
                task.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
            }
        };
        tokio::time::timeout(Duration::from_secs(120), all)
            .await
            .expect("requests did not all complete");
    }
    let writes = rounds * REQUESTS.div_ceil(WRITE_EVERY);
    let value: i64 = raw.clone().get(format!("{name}:value")).await.unwrap();
    assert_eq!(value as usize, writes, "lost updates");
    assert_freed(&raw, &name).await;
}

shapes!(one_client_shared_by_readers_and_writers => readers_and_writers);
