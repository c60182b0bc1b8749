//! Faults and bad input: NOSCRIPT, server restarts, wrong key types, bad arguments, an
//! unreachable server, unlocking what is not held.

use std::time::{Duration, Instant};

use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{Client, LockError};

/// Generous bound for anything event-driven, including a reconnect.
const WAIT: Duration = Duration::from_secs(15);

/// Keys in the database (our unlocks write no unlock latch, so none may be among them).
async fn dbsize(raw: &mut MultiplexedConnection) -> i64 {
    let latches: Vec<String> = raw.keys("redisson_unlock_latch:*").await.unwrap();
    assert_eq!(latches, Vec::<String>::new(), "unlock latches written");
    redis::cmd("DBSIZE").query_async(raw).await.unwrap()
}

async fn script_flush(raw: &mut MultiplexedConnection) {
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(raw)
        .await
        .unwrap();
}

/// Restarts the server (empty, same port) without blocking the runtime's other worker.
fn restart(server: &mut TestServer) {
    tokio::task::block_in_place(|| server.restart());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_reloaded_after_script_flush() {
    let name = "fault:noscript";
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock(name);
    lock.lock().await.unwrap().unlock().await.unwrap();

    script_flush(&mut raw).await;
    let outer = lock.lock().await.unwrap();
    script_flush(&mut raw).await;
    let inner = outer.reenter().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    script_flush(&mut raw).await;
    inner.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    script_flush(&mut raw).await;
    client.renew_now().await; // the renewal script is reloaded too
    assert!(
        !outer.is_lost(),
        "a NOSCRIPT renewal was taken for a lost hold"
    );
    script_flush(&mut raw).await;
    outer.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);

    let _g = lock.lock().await.unwrap();
    script_flush(&mut raw).await;
    assert!(client.get_lock(name).force_unlock().await.unwrap());
    assert!(!exists(&mut raw, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_recovers_from_a_server_restart() {
    let (mut server, client) = with_client().await;
    let name = "fault:restart-waiter";
    let chan = format!("redisson_lock__channel:{{{name}}}");
    {
        // A Java holder with a long lease: only the restart can free the lock in time.
        let mut raw = server.conn().await;
        hold_as_java(&mut raw, name, "java-uuid:1").await;
    }
    let lock = client.get_lock(name);
    let waiter = spawn_keeping_waiter(lock);
    let subscribed = subscribers_within(&server, &chan, 1, WAIT).await;
    assert!(subscribed, "waiter never subscribed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());
    let connections_before = client.stats().subscriber_connections;

    restart(&mut server);
    let restarted = Instant::now();
    // The restarted server is empty; the waiter must notice without waiting out the 60 s TTL.
    let owner = tokio::time::timeout(WAIT, waiter)
        .await
        .expect("waiter did not recover from the restart")
        .unwrap();
    assert!(restarted.elapsed() < Duration::from_secs(30));
    assert!(client.stats().subscriber_connections > connections_before);
    release_sole_hold(&mut server.conn().await, &client, name, owner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_hold_is_reported_lost_when_the_server_restarts_empty() {
    let (mut server, client) = with_client().await;
    let name = "fault:restart-holder";
    let lock = client.get_lock(name);
    let guard = lock.lock().await.unwrap();
    assert!(!guard.is_lost());

    restart(&mut server);
    // Drive renewals by hand (the default watchdog ticks every 10 s) until the loss is seen.
    let renew = async {
        loop {
            client.renew_now().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::select! {
        _ = guard.lost() => {}
        _ = renew => unreachable!(),
        _ = tokio::time::sleep(WAIT) => panic!("the loss was never reported"),
    }
    assert!(guard.is_lost());
    assert_eq!(client.stats().watched_holds, 0);
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lease_lost(), "{err:?}");
    // The client works again on the new server.
    let mut raw = server.conn().await;
    let g = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_fails_with_a_connection_error_while_the_server_is_down() {
    let mut server = TestServer::start();
    let client = server
        .client_with(|c| c.with_retry_delay(Duration::from_millis(50)))
        .await;
    let name = "fault:down";
    let lock = client.get_lock(name);
    lock.lock().await.unwrap().unlock().await.unwrap();

    tokio::task::block_in_place(|| server.kill());
    // About 1 s with these settings (4 tries, pauses from 50 ms). It took 14.8 s, right at
    // WAIT, while the connection manager retried each of the crate's tries 4 times over: a
    // loaded machine failed this test about one run in four.
    let r = tokio::time::timeout(WAIT, lock.lock())
        .await
        .expect("lock() hung on a dead server");
    let err = r.unwrap_err();
    assert!(err.is_connection_error(), "{err:?}");

    // Back up (empty, same port): the client recovers.
    restart(&mut server);
    let ok = eventually(WAIT, || async {
        match lock.try_lock().await {
            Ok(Some(g)) => g.unlock().await.is_ok(),
            _ => false,
        }
    })
    .await;
    assert!(ok, "client did not recover after the server came back");
    let mut raw = server.conn().await;
    assert!(!exists(&mut raw, name).await);
}

/// `Config::with_retry_attempts` bounds the connections a call makes: the connection manager
/// under the crate's own tries reconnects once, no longer as many times again as the crate
/// tries. Against a port that takes every connection and drops it at once (a proxy whose
/// backend is gone), a `lock()` with 3 tries opened 32 connections before, 16 now (each try
/// of the first attempt and of the wait loop, its reconnect, and the naming of the new
/// connection). On a port that refuses connections, the other test here, the failure came
/// after about 15 s instead of 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_on_a_dead_server_makes_the_tries_it_is_configured_for() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let mut server = TestServer::start();
    let client = server
        .client_with(|c| {
            c.with_retry_attempts(3)
                .with_retry_delay(Duration::from_millis(20))
        })
        .await;
    let lock = client.get_lock("fault:tries");
    take_and_release(&lock).await;
    tokio::task::block_in_place(|| server.kill());
    // The server's port now takes connections and closes each at once, counting them.
    let listener = std::net::TcpListener::bind(("127.0.0.1", server.port)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (accepted, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let acceptor = std::thread::spawn({
        let (accepted, stop) = (accepted.clone(), stop.clone());
        move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        accepted.fetch_add(1, Ordering::SeqCst);
                        drop(conn);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        }
    });
    let err = tokio::time::timeout(WAIT, lock.lock())
        .await
        .expect("lock() hung on a dead server")
        .unwrap_err();
    stop.store(true, Ordering::SeqCst);
    acceptor.join().unwrap();
    assert!(err.is_connection_error(), "{err:?}");
    let n = accepted.load(Ordering::SeqCst);
    assert!(
        (1..=20).contains(&n),
        "{n} connections for a lock() with 3 tries (16 expected; 32 when the manager retried \
         each try again)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_lease_is_rejected_before_anything_is_written() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("fault:zero-lease");
    assert_zero_lease_refused(&lock, Duration::from_secs(1)).await;
    let err = lock.lock_with_lease(Duration::ZERO).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidArgument(_)), "{err:?}");
    assert_eq!(dbsize(&mut raw).await, 0);
    assert_eq!(client.stats().tracked_holds, 0);
    assert_eq!(client.stats().watched_holds, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_name_is_rejected() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("");
    let wait = Duration::from_millis(100);
    let errors = [
        lock.lock().await.unwrap_err(),
        lock.lock_with_lease(Duration::from_secs(1))
            .await
            .unwrap_err(),
        lock.try_lock().await.unwrap_err(),
        lock.try_lock_for(wait).await.unwrap_err(),
        lock.unlock().await.unwrap_err(),
        lock.force_unlock().await.unwrap_err(),
        lock.is_locked().await.unwrap_err(),
        lock.is_held_by_current().await.unwrap_err(),
        lock.hold_count().await.unwrap_err(),
        lock.remain_time_to_live().await.unwrap_err(),
    ];
    for err in errors {
        assert!(err.is_invalid_argument(), "{err:?}");
        assert!(err.to_string().contains("name"), "{err}");
    }
    assert_eq!(dbsize(&mut raw).await, 0);
    assert_eq!(client.stats().tracked_holds, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_of_another_type_is_wrong_type_and_left_untouched() {
    let name = "fault:string";
    let (_server, client, mut raw) = fixture().await;
    let _: () = raw.set(name, "not a lock").await.unwrap();
    let lock = client.get_lock(name);
    let wait = Duration::from_millis(200);

    let errors = [
        ("lock", lock.lock().await.unwrap_err()),
        (
            "lock_with_lease",
            lock.lock_with_lease(Duration::from_secs(1))
                .await
                .unwrap_err(),
        ),
        ("try_lock", lock.try_lock().await.unwrap_err()),
        ("try_lock_for", lock.try_lock_for(wait).await.unwrap_err()),
        ("hold_count", lock.hold_count().await.unwrap_err()),
        (
            "is_held_by_current",
            lock.is_held_by_current().await.unwrap_err(),
        ),
        ("force_unlock", lock.force_unlock().await.unwrap_err()),
        ("unlock", lock.unlock().await.unwrap_err()),
    ];
    for (op, err) in errors {
        assert!(err.is_wrong_type(), "{op}: {err:?}");
        assert!(err.to_string().contains(name), "{op}: {err}");
    }
    let value: String = raw.get(name).await.unwrap();
    assert_eq!(value, "not a lock");
    let ttl: i64 = raw.pttl(name).await.unwrap();
    assert_eq!(ttl, -1, "an expiry was put on the string");
    assert_eq!(client.stats().watched_holds, 0);
    assert_eq!(client.stats().subscribed_channels, 0);
    assert_eq!(dbsize(&mut raw).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_fails_fast_with_a_clear_error() {
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        Client::connect(&format!("redis://127.0.0.1:{port}/")),
    )
    .await
    .expect("connect hung");
    let elapsed = started.elapsed();
    let err = r.unwrap_err();
    assert!(err.is_connection_error(), "{err:?}");
    assert!(!err.to_string().is_empty());
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");

    // A malformed URL is an error too, not a panic.
    let err = Client::connect("not a url").await.unwrap_err();
    assert!(!err.to_string().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_style_unlock_without_a_hold_is_not_owner() {
    let name = "fault:not-owner";
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock(name);

    // Nothing held at all.
    let err = lock.unlock().await.unwrap_err();
    assert!(err.is_not_owner(), "{err:?}");
    assert!(
        err.to_string().contains(&field(&client, lock.owner())),
        "{err}"
    );
    assert_eq!(dbsize(&mut raw).await, 0);

    // Held once: the first unlock releases it, the second is NotOwner.
    lock.lock().await.unwrap().detach();
    lock.unlock().await.unwrap();
    assert!(!exists(&mut raw, name).await);
    let err = lock.unlock().await.unwrap_err();
    assert!(err.is_not_owner(), "{err:?}");
    assert_eq!(dbsize(&mut raw).await, 0, "{:?}", {
        let keys: Vec<String> = raw.keys("*").await.unwrap();
        keys
    });

    // Re-entered twice (an explicit owner re-enters plainly) and detached: exactly two unlocks
    // succeed.
    let lock = lock.with_owner(redisson_lock::LockOwner::new(1));
    lock.lock().await.unwrap().detach();
    lock.lock().await.unwrap().detach();
    lock.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    lock.unlock().await.unwrap();
    assert!(lock.unlock().await.unwrap_err().is_not_owner());
    assert!(!exists(&mut raw, name).await);
    assert_eq!(client.stats().watched_holds, 0);
}
