//! T32: `WAITAOF` beside `WAIT` (`Config::with_aof_sync`, Redis 7.2+). On an older server the
//! option is refused at connect with a clear error; on 7.2+ a lock write waits for the fsync.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waitaof_confirms_lock_writes_or_is_refused_at_connect() {
    let server = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let config = server.config().with_aof_sync(local(1_000));
    if version(&server).await < (7, 2) {
        let err = Client::with_config(config)
            .await
            .expect_err("WAITAOF accepted by a server before 7.2");
        assert!(err.is_invalid_argument(), "{err}");
        assert!(err.to_string().contains("7.2"), "{err}");
        eprintln!(
            "note: redis-server {:?} has no WAITAOF (7.2+): only the refusal at connect was \
             checked; install Redis 7.2+ to run the fsync path",
            version(&server).await
        );
        return;
    }
    let client = Client::with_config(config).await.expect("WAITAOF on 7.2+");
    let lock = client.get_lock("aof:lock");
    lock.lock().await.unwrap().unlock().await.unwrap();
    // Without an AOF there is nothing to fsync: refused at connect, not at the first lock.
    let plain = TestServer::start();
    let err = Client::with_config(plain.config().with_aof_sync(local(1_000)))
        .await
        .expect_err("local WAITAOF accepted without appendonly");
    assert!(err.is_invalid_argument(), "{err}");
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
