//! Fault injection on the *server*: redis-server killed and restarted empty, stalled with
//! SIGSTOP, and a replica stalled behind its master.
//! Scenarios T10, T11, T17 and T30 (the WAIT mechanism) of docs/reliability.md.

use std::time::Duration;

use crate::support::exists_on as exists;
use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{Client, Config};

const BOUND: Duration = Duration::from_secs(30);

/// T10 + T17: the server is SIGKILLed and restarted empty on the same port while a client holds
/// a watchdog lock and another client waits. The holder is told (`renew_now` then `lost()`),
/// its release reports the lease lost, the waiter recovers (resubscribes, is woken, acquires on
/// the empty server), and scripts run again although the script cache is empty (`NOSCRIPT`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restarted_empty_tells_the_holder_and_everyone_recovers() {
    let mut server = TestServer::start();
    let config = || {
        Config::new(server.url())
            .with_watchdog_timeout(Duration::from_secs(5))
            .with_response_timeout(Duration::from_secs(1))
            .with_connection_timeout(Duration::from_secs(1))
    };
    let holder = Client::with_config(config()).await.unwrap();
    let waiter = Client::with_config(config()).await.unwrap();
    let name = "fault:restart";
    let guard = holder.get_lock(name).lock().await.unwrap();
    let waiting = parked_minute_waiter(&waiter, waiter.get_lock(name)).await;
    let connections = waiter.stats().subscriber_connections;

    server.restart();
    // The server came back empty: the holder's field is gone. (The key itself may already be
    // back: the waiter's subscriber can reconnect, wake it and take the lock before this reads;
    // with jittered reconnects the first pause can be near zero.)
    let fields: std::collections::HashMap<String, i64> =
        server.conn().await.hgetall(name).await.unwrap();
    assert!(
        !fields.keys().any(|f| f.starts_with(holder.id())),
        "the holder's hold survived the restart: {fields:?}"
    );

    // The holder learns it lost the lock at its next renewal (forced here, not waited for).
    assert!(
        eventually(BOUND, || async {
            holder.renew_now().await;
            guard.is_lost()
        })
        .await,
        "the holder was never told"
    );
    tokio::time::timeout(BOUND, guard.lost())
        .await
        .expect("lost() did not resolve");

    // The waiter was woken by its subscriber's reconnect and took the lock on the new server.
    let got = finished(waiting, BOUND, "waiter hung after the restart")
        .await
        .expect("waiter ran out of time");
    assert!(waiter.stats().subscriber_connections > connections);
    assert!(exists(&server, name).await);
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
    assert!(
        exists(&server, name).await,
        "the stale release touched the new hold"
    );
    got.unlock().await.unwrap();
    assert!(!exists(&server, name).await);

    // New holders work, through a script cache flushed once more (NOSCRIPT again).
    let mut raw = server.conn().await;
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw)
        .await
        .unwrap();
    let g = holder.get_lock(name).lock().await.unwrap();
    let g2 = g.reenter().await.unwrap();
    assert_eq!(holder.get_lock(name).hold_count().await.unwrap(), 2);
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw)
        .await
        .unwrap();
    g2.unlock().await.unwrap();
    assert_eq!(holder.get_lock(name).hold_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
    assert!(!exists(&server, name).await);
    assert!(
        eventually(BOUND, || async {
            holder.stats().tracked_holds == 0 && waiter.stats().tracked_holds == 0
        })
        .await
    );
}

/// A server and a client of it with a watchdog lease of `lease`, whose calls give up after
/// `timeout` and are tried twice (the stalled-server scenarios).
async fn stalling(lease: Duration, timeout: Duration) -> (TestServer, Client) {
    let server = TestServer::start();
    let client = server
        .client_with(|c| fail_fast(c, lease, timeout).with_retry_attempts(2))
        .await;
    (server, client)
}

/// T11: the server is stalled (SIGSTOP) longer than the watchdog lease while a client holds a
/// lock. Calls fail with timeouts instead of hanging, the holder is told it lost the lock before
/// anyone else can take it, and everything recovers after SIGCONT (the key expired meanwhile, as
/// Redis expires by wall clock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_server_times_out_calls_and_recovers() {
    let lease = Duration::from_secs(3);
    let (server, client) = stalling(lease, Duration::from_millis(500)).await;
    let name = "fault:server-stop";
    let guard = client.get_lock(name).lock().await.unwrap();

    server.pause();
    let r = client.get_lock("fault:server-stop:other").try_lock().await;
    let err = r.expect_err("a call to a stopped server succeeded");
    assert!(err.is_timeout(), "{err}");
    // The hold's validity runs out during the stall: the holder is told, event-driven.
    tokio::time::timeout(BOUND, guard.lost())
        .await
        .expect("the holder was never told during the stall");
    assert!(guard.is_lost());
    // Keep the server stopped until its copy of the lease has run out too.
    tokio::time::sleep(lease / 2).await;
    server.resume();

    let other = server.client().await;
    let g = taken_within(
        &other.get_lock(name),
        BOUND,
        "the stalled hold never expired",
    )
    .await;
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
    g.unlock().await.unwrap();
    // The client recovers: new locks work once its connection is back.
    let mut ok = false;
    for _ in 0..20 {
        if let Ok(g) = client.get_lock(name).lock().await {
            g.unlock().await.unwrap();
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(ok, "the client never recovered after SIGCONT");
    // The acquire that timed out during the stall ran late on the server; it is trimmed or
    // expires with its lease, never kept.
    assert!(
        eventually(BOUND, || async {
            !exists(&server, "fault:server-stop:other").await && !exists(&server, name).await
        })
        .await
    );
}

/// Takes `name` with `lease` through `client`, then asks (`WAIT 1 <timeout_ms>` on the lock's
/// own connection `conn`) how many replicas confirmed the write: the guard and that count.
async fn lock_and_wait_replica(
    client: &Client,
    conn: &mut redisson_lock::Connection,
    name: &str,
    lease: Duration,
    timeout_ms: u64,
) -> (redisson_lock::RLockGuard, i64) {
    let g = client.get_lock(name).lock_with_lease(lease).await.unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(timeout_ms)
        .query_async(conn)
        .await
        .unwrap();
    (g, acked)
}

/// T30, the mechanism: a master with one replica (`--replicaof`). With the replica stalled
/// (SIGSTOP), a lock write followed by `WAIT 1 <timeout>` reports that no replica confirmed it
/// (what Redisson's `checkLockSyncedSlaves` relies on); the caller undoes the hold. With the
/// replica running, the same write is confirmed. Then the crate's own option
/// (`Config::with_replica_sync`) does the same: the acquire fails and no hold is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_replica_is_reported_by_wait_and_no_hold_is_left() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut raw = master.conn().await;
    let linked = eventually(BOUND, || async {
        let info = info(&mut replica.conn().await, "replication").await;
        info_field(&info, "master_link_status").as_deref() == Some("up")
    })
    .await;
    assert!(linked, "replica never linked");

    let client = master.client().await;
    let name = "fault:replica";
    let lease = Duration::from_secs(30);
    // Running replica: the lock write is confirmed on the lock's own connection.
    let mut conn = client.connection();
    let (g, acked) = lock_and_wait_replica(&client, &mut conn, name, lease, 5000).await;
    assert_eq!(acked, 1);
    g.unlock().await.unwrap();

    replica.pause();
    let (g, acked) = lock_and_wait_replica(&client, &mut conn, name, lease, 500).await;
    assert_eq!(acked, 0, "WAIT counted a stopped replica");
    // Redisson's reaction to no synced replica: release and fail.
    g.unlock().await.unwrap();
    assert!(!exists(&master, name).await);

    // The crate-level option: the acquire reports it and is undone.
    let synced = Client::with_config(
        master
            .config()
            .with_replica_sync(Some(Duration::from_millis(500))),
    )
    .await
    .unwrap();
    let err = synced
        .get_lock(name)
        .lock_with_lease(lease)
        .await
        .expect_err("a lock write no replica confirmed succeeded");
    assert!(err.is_no_synced_replicas(), "{err}");
    assert!(
        eventually(BOUND, || async {
            !exists(&master, name).await && synced.stats().tracked_holds == 0
        })
        .await,
        "an unconfirmed acquire left a hold: {:?}",
        synced.stats()
    );
    replica.resume();
    let g = synced
        .get_lock(name)
        .lock_with_lease(lease)
        .await
        .expect("a confirmed lock write failed");
    g.unlock().await.unwrap();
    let _: () = raw.set("fault:replica:done", 1).await.unwrap();
}

/// A release sent while the server is stalled: the caller gets a timeout (not a hang), the
/// release is completed in the background once the server is back (or the hold expires with its
/// lease, never renewed meanwhile), and a waiter of another client then gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_during_a_server_stall_completes_after_it() {
    let lease = Duration::from_secs(6);
    let (server, client) = stalling(lease, Duration::from_millis(300)).await;
    let other = server.client().await;
    let name = "fault:release-stall";
    let guard = client.get_lock(name).lock().await.unwrap();
    let waiter = parked_minute_waiter(&other, other.get_lock(name)).await;

    server.pause();
    let started = std::time::Instant::now();
    let r = guard.unlock().await;
    assert!(started.elapsed() < BOUND, "unlock hung on a stopped server");
    // Two tries of 300 ms (plus a 100 ms pause) end well inside the 1.5 s stall: the caller
    // must be told, not answered Ok.
    let e = r.expect_err("an unlock sent to a stopped server reported success");
    assert!(e.is_connection_error(), "{e}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.resume();
    let g = finished(waiter, BOUND, "the waiter never got the lock")
        .await
        .expect("waiter ran out of time");
    g.unlock().await.unwrap();
    assert_no_tracked_holds(&client, BOUND).await;
    assert!(!exists(&server, name).await);
}

async fn connections_received(server: &TestServer) -> u64 {
    let info = info(&mut server.conn().await, "stats").await;
    info_field(&info, "total_connections_received")
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// A subscriber that can connect but may not subscribe (an ACL user without channel access, a
/// common misconfiguration): the waiter fails at once with the refusal (`ChannelDenied`,
/// naming the channel), and the subscriber does not reconnect over it, let alone in a tight
/// loop against the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_denied_by_acl_backs_off_instead_of_spinning() {
    let server = TestServer::start();
    let mut raw = server.conn().await;
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("nochannels")
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("+@all")
        .arg("resetchannels")
        .query_async(&mut raw)
        .await
        .unwrap();
    let holder = server.client().await;
    let name = "fault:acl";
    let held = held_for_a_minute(&holder.get_lock(name)).await;
    let client = Client::with_config(
        Config::new(format!(
            "redis://nochannels:secret@127.0.0.1:{}/",
            server.port
        ))
        .with_subscription_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    let before = connections_received(&server).await;
    let r = client
        .get_lock(name)
        .try_lock_for(Duration::from_secs(3))
        .await;
    let during = connections_received(&server).await - before;
    match r {
        Err(e) => assert!(e.is_permission_denied(), "{e}"),
        Ok(None) => panic!("the refusal ended as a timed-out wait"),
        Ok(Some(_)) => panic!("acquired a held lock"),
    }
    assert!(
        during <= 30,
        "{during} connections: the subscriber reconnects in a tight loop"
    );
    assert_eq!(client.stats().subscriber_connections, 1);
    held.unlock().await.unwrap();
}

/// Fencing across an empty restart (outside the model, pinned so the docs stay true): the token
/// counter is lost with the lock, so tokens start again at 1. A resource that accepts only tokens
/// above the highest it has seen stays safe (it rejects the reissued tokens); liveness returns
/// once the new tokens pass the old maximum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_start_again_after_an_empty_restart() {
    let mut server = TestServer::start();
    let store = TestServer::start();
    let client = server.client().await;
    let name = "fault:token-restart";
    let write = |token: i64| {
        let store = &store;
        async move {
            let mut c = store.conn().await;
            let accepted: i64 = redis::Script::new(
                "local max = tonumber(redis.call('get', KEYS[1]) or '0') \
                 if tonumber(ARGV[1]) <= max then return 0 end \
                 redis.call('set', KEYS[1], ARGV[1]) return 1",
            )
            .key("resource")
            .arg(token)
            .invoke_async(&mut c)
            .await
            .unwrap();
            accepted == 1
        }
    };
    let mut before = 0;
    for _ in 0..3 {
        let g = client.get_fenced_lock(name).lock().await.unwrap();
        before = g.token();
        assert!(write(before).await);
        g.unlock().await.unwrap();
    }
    server.restart();
    let mut after = None;
    for _ in 0..50 {
        if let Ok(g) = client.get_fenced_lock(name).lock().await {
            after = Some(g.token());
            g.unlock().await.unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = after.expect("no lock after the restart");
    assert!(
        after <= before,
        "token {after} after the restart, {before} before"
    );
    assert!(!write(after).await, "a reissued token was accepted");
}
