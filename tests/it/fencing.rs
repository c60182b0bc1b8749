//! Fencing that reaches the resource (issue 22, item 9): a holder of a fenced lock that stalls
//! past its lease while another holder takes over has its late write refused, by the Redis
//! helper (`FencedValue`) and by the SQL recipe of docs/locks.md ("Fencing the resource") run
//! against a real SQL engine (SQLite, embedded).

use std::time::Duration;

use redis::AsyncCommands;
use redisson_lock::{Client, LockOwner};

use crate::support::TestServer;

/// The stale holder's lease: short, so the takeover comes quickly; the takeover is waited for
/// (the lock's own wait), never timed.
const SHORT_LEASE: Duration = Duration::from_millis(300);
const WITHIN: Duration = Duration::from_secs(30);

/// Two holders of `name` one after the other: the first with a short lease that it outlives
/// (a paused holder), the second taking over once it expired. Their tokens, oldest first.
async fn stale_and_current(a: &Client, b: &Client, name: &str) -> (i64, i64) {
    let stale = a
        .get_fenced_lock(name)
        .with_owner(LockOwner::new(1))
        .lock_with_lease(SHORT_LEASE)
        .await
        .unwrap();
    // The first holder "pauses": it does nothing while its lease runs out and B takes over.
    let current = b
        .get_fenced_lock(name)
        .with_owner(LockOwner::new(2))
        .try_lock_for(WITHIN)
        .await
        .unwrap()
        .expect("the second holder never got the lock after the lease ran out");
    assert!(stale.is_lost(), "the first hold should have expired");
    let tokens = (stale.token(), current.token());
    assert!(tokens.0 < tokens.1, "{tokens:?}");
    current.unlock().await.unwrap();
    tokens
}

/// Through the Redis helper: the current holder writes (twice, with its one token), the paused
/// holder's late write is refused and changes nothing; bad input is refused before anything
/// is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holders_stale_write_is_refused_by_the_redis_helper() {
    let server = TestServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let mut raw = server.conn().await;
    let value = b.get_fenced_value("fv:balance");
    assert_eq!(value.fence_key(), "{fv:balance}:redisson_lock_fence");

    // Before any takeover the first holder's write goes through (the control).
    let first = a.get_fenced_lock("fv:lock").lock().await.unwrap();
    assert!(a
        .get_fenced_value("fv:balance")
        .set(first.token(), "10")
        .await
        .unwrap());
    first.unlock().await.unwrap();

    let (stale, current) = stale_and_current(&a, &b, "fv:lock").await;
    assert!(value.set(current, "20").await.unwrap());
    assert!(value.set(current, "21").await.unwrap(), "same token again");
    let late = a.get_fenced_value("fv:balance").set(stale, "stale").await;
    assert!(!late.unwrap(), "the stale holder's write was accepted");
    assert_eq!(value.get().await.unwrap().as_deref(), Some(&b"21"[..]));
    assert_eq!(value.last_token().await.unwrap(), Some(current));

    // Bad input: refused, nothing written.
    for token in [0, -1] {
        let e = value.set(token, "bad").await.unwrap_err();
        assert!(e.is_invalid_argument(), "{e:?}");
    }
    let e = b.get_fenced_value("").set(current, "x").await.unwrap_err();
    assert!(e.is_invalid_argument(), "{e:?}");
    assert_eq!(raw.get::<_, String>("fv:balance").await.unwrap(), "21");
    assert!(!raw
        .exists::<_, bool>("{}:redisson_lock_fence")
        .await
        .unwrap());
}

/// The SQL recipe: the row keeps the greatest token that wrote it, and the write is one
/// conditional UPDATE; the paused holder's late write matches no row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holders_stale_write_is_refused_by_the_sql_recipe() {
    let server = TestServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let db = rusqlite::Connection::open_in_memory().unwrap();
    db.execute_batch(
        "CREATE TABLE ledger (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, \
         fence INTEGER NOT NULL DEFAULT 0); INSERT INTO ledger (id, balance) VALUES (1, 0);",
    )
    .unwrap();
    // The recipe of docs/locks.md: write only when the token is at least the row's fence.
    let fenced_update = |token: i64, balance: i64| -> usize {
        db.execute(
            "UPDATE ledger SET balance = ?1, fence = ?2 WHERE id = ?3 AND fence <= ?2",
            rusqlite::params![balance, token, 1],
        )
        .unwrap()
    };

    let (stale, current) = stale_and_current(&a, &b, "fv:sql").await;
    assert_eq!(fenced_update(current, 20), 1, "the current holder's write");
    assert_eq!(fenced_update(stale, 99), 0, "the stale write matched a row");
    let (balance, fence): (i64, i64) = db
        .query_row("SELECT balance, fence FROM ledger WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((balance, fence), (20, current));
}
