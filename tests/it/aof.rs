//! T32: `WAITAOF` beside `WAIT` (`Config::with_aof_sync`, Redis 7.2+). On an older server the
//! option is refused at connect with a clear error; on 7.2+ a lock write waits for the fsync.
//!
//! The two servers of CI take different branches, on purpose: Debian's Redis 7.0 has no
//! `WAITAOF` (the refusal is what runs there), Valkey (9.1 and 8.1) has it (it reports
//! `redis_version:7.2.4` beside `valkey_version`), so on Valkey the fsync path must run
//! for real and the test fails if it does not.

use std::time::Duration;

use crate::support::*;
use redisson_lock::{AofSync, Client};

fn local(timeout_ms: u64) -> Option<AofSync> {
    Some(AofSync {
        local: true,
        replicas: 0,
        timeout: Duration::from_millis(timeout_ms),
    })
}

async fn version(server: &TestServer) -> (u32, u32) {
    let info = info(&mut server.conn().await, "server").await;
    let v = info_field(&info, "redis_version").unwrap();
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// `calls` of `WAITAOF` in `INFO commandstats` (0 before the first).
async fn waitaof_calls(server: &TestServer) -> u64 {
    let stats = info(&mut server.conn().await, "commandstats").await;
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_waitaof:calls="))
        .and_then(|rest| rest.split(',').next())
        .map(|n| n.parse().expect("calls is a number"))
        .unwrap_or(0)
}

/// The server has `WAITAOF`; on Valkey it must (the path that has to run for real there).
async fn has_waitaof(server: &TestServer) -> bool {
    let has = version(server).await >= (7, 2);
    if is_valkey() {
        assert!(
            has,
            "Valkey 9.1 and 8.1 report redis_version 7.2.x and have WAITAOF"
        );
    }
    has
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waitaof_confirms_lock_writes_or_is_refused_at_connect() {
    let server = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let config = server.config().with_aof_sync(local(1_000));
    if !has_waitaof(&server).await {
        // Debian's Redis 7.0: no WAITAOF, the option is refused at connect.
        let err = Client::with_config(config)
            .await
            .expect_err("WAITAOF accepted by a server before 7.2");
        assert!(err.is_invalid_argument(), "{err}");
        assert!(err.to_string().contains("7.2"), "{err}");
        eprintln!(
            "note: {:?} {:?} has no WAITAOF (7.2+): only the refusal at connect was checked; \
             run with REDISSON_LOCK_SERVER=valkey (scripts/ensure-valkey) for the fsync path",
            family(),
            version(&server).await
        );
        return;
    }
    let client = Client::with_config(config).await.expect("WAITAOF on 7.2+");
    let lock = client.get_lock("aof:lock");
    let before = waitaof_calls(&server).await;
    let guard = lock.lock().await.unwrap();
    let after_acquire = waitaof_calls(&server).await;
    guard.unlock().await.unwrap();
    let after_release = waitaof_calls(&server).await;
    // Each lock write is followed by its own WAITAOF, the fsync it waited for confirmed.
    assert!(after_acquire > before, "the acquire sent no WAITAOF");
    assert!(after_release > after_acquire, "the release sent no WAITAOF");
    assert!(!exists_on(&server, "aof:lock").await);
    // Without an AOF there is nothing to fsync: refused at connect, not at the first lock.
    let plain = TestServer::start();
    let err = Client::with_config(plain.config().with_aof_sync(local(1_000)))
        .await
        .expect_err("local WAITAOF accepted without appendonly");
    assert!(err.is_invalid_argument(), "{err}");
}

/// A lock write that `WAITAOF` does not confirm in time (a replica fsync asked of a master
/// without replicas) fails with `ReplicaSync` and the acquire is undone, as with `WAIT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_waitaof_fails_the_acquire_and_undoes_it() {
    let server = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let one_replica = Some(AofSync {
        local: true,
        replicas: 1,
        timeout: Duration::from_millis(200),
    });
    let config = server.config().with_aof_sync(one_replica);
    if !has_waitaof(&server).await {
        let err = Client::with_config(config)
            .await
            .expect_err("WAITAOF accepted by a server before 7.2");
        assert!(err.is_invalid_argument(), "{err}");
        return;
    }
    let client = Client::with_config(config).await.expect("WAITAOF on 7.2+");
    let lock = client.get_lock("aof:unconfirmed");
    let err = lock
        .try_lock()
        .await
        .expect_err("a write no replica fsynced counted as taken");
    assert!(err.is_no_synced_replicas(), "{err}");
    // The unconfirmed acquire is trimmed back: nothing stays behind for another owner to meet.
    assert!(
        eventually(Duration::from_secs(10), || async {
            !exists_on(&server, "aof:unconfirmed").await
        })
        .await,
        "the unconfirmed acquire was not undone"
    );
    // WAITAOF really ran after the write (the probe at connect is one call, the acquire more).
    assert!(waitaof_calls(&server).await >= 2);
}

#[tokio::test]
async fn aof_sync_settings_are_checked() {
    let server = TestServer::start();
    let none = Some(AofSync {
        local: false,
        replicas: 0,
        timeout: Duration::from_secs(1),
    });
    for bad in [none, local(0)] {
        let err = Client::with_config(server.config().with_aof_sync(bad))
            .await
            .unwrap_err();
        assert!(err.is_invalid_argument(), "{err}");
    }
}

/// A user whose ACL denies `WAITAOF` is told so (`is_permission_denied`, the server's words), not
/// that the server is too old: on the pinned Valkey 9.1, which has `WAITAOF`, whatever server
/// this run tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waitaof_denied_by_acl_is_a_permission_error() {
    let server = TestServer::start_valkey9(&["--appendonly", "yes"]);
    let _: () = redis::cmd("ACL")
        .arg(
            &[
                "SETUSER", "nofsync", "on", ">pw-7719", "~*", "&*", "+@all", "-waitaof",
            ][..],
        )
        .query_async(&mut server.conn().await)
        .await
        .unwrap();
    let url = format!("redis://nofsync:pw-7719@127.0.0.1:{}/", server.port);
    let err = Client::with_config(redisson_lock::Config::new(url).with_aof_sync(local(1_000)))
        .await
        .expect_err("WAITAOF denied by the ACL, yet connected");
    assert!(err.is_permission_denied(), "{err:?}");
    assert!(
        !err.to_string().contains("7.2"),
        "blames the version: {err}"
    );
    // The same user without the option connects and locks.
    let client = Client::connect(&format!(
        "redis://nofsync:pw-7719@127.0.0.1:{}/",
        server.port
    ))
    .await
    .unwrap();
    client
        .get_lock("aof:acl")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}
