//! Servers that refuse `WAIT` (issue 22, item 8), on a real master with a real replica whose
//! ACL user is denied the command (as a proxy or serverless offering refuses it): under
//! `ReplicaSync::Required` (the default) the refusal is an error, at connect or at the lock
//! write (an acquire is undone), never read as "no replica confirmed"; under `BestEffort` the
//! client says so once through `tracing` and goes on without sending `WAIT` again.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use redisson_lock::{Client, Config, LockError, LockOwner, ReplicaSync};

use crate::support::{eventually, field, TestServer};

const SYNC: Duration = Duration::from_secs(2);
const WITHIN: Duration = Duration::from_secs(30);

/// A master and a replica attached to it; the master has a user `locker` (password `pw`) that
/// may run everything, and `locker`'s URL.
async fn master_with_replica() -> (TestServer, TestServer, String) {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let linked = eventually(WITHIN, || async {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut master.conn().await)
            .await
            .unwrap();
        info.contains("connected_slaves:1") && info.contains("state=online")
    })
    .await;
    assert!(linked, "the replica never attached to the master");
    acl(&master, &["on", ">pw", "~*", "&*", "+@all"]).await;
    (
        master,
        replica,
        format!("redis://locker:pw@127.0.0.1:{port}/"),
    )
}

async fn acl(server: &TestServer, rules: &[&str]) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg(rules)
        .query_async(&mut server.conn().await)
        .await
        .unwrap();
}

/// `WAIT`s the master refused so far (`rejected_calls` of its command stats).
async fn waits_rejected(server: &TestServer) -> u64 {
    crate::support::rejected_calls(server, "wait").await
}

/// Replica sync on a single server is off by default: these configs ask for it.
fn config(url: &str, policy: ReplicaSync) -> Config {
    Config::new(url)
        .with_replica_sync(Some(SYNC))
        .with_replica_sync_policy(policy)
}

/// The warnings logged on this thread that say `WAIT` is refused.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    fn about_wait(&self) -> usize {
        let all = self.0.lock().unwrap();
        all.iter().filter(|w| w.contains("refuses WAIT")).count()
    }
}

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        *meta.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// At connect: `Required` refuses to connect with `SyncRefused` (the server's words in it);
/// `BestEffort` connects, says so once, and its lock writes reach the replica without another
/// `WAIT` sent. The same master with `WAIT` allowed syncs normally (the control).
#[tokio::test(flavor = "current_thread")]
async fn a_refusal_found_at_connect() {
    let warnings = Warnings::default();
    let _log = tracing::subscriber::set_default(warnings.clone());
    let (master, replica, url) = master_with_replica().await;

    // Control: WAIT allowed, one replica confirms every lock write.
    let allowed = Client::with_config(config(&url, ReplicaSync::Required))
        .await
        .unwrap();
    allowed
        .get_lock("wr:ok")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

    acl(&master, &["-wait"]).await;
    let refused = Client::with_config(config(&url, ReplicaSync::Required))
        .await
        .unwrap_err();
    match &refused {
        LockError::SyncRefused { command, detail } => {
            assert_eq!(*command, "WAIT");
            assert!(detail.to_lowercase().contains("noperm"), "{detail}");
        }
        other => panic!("expected SyncRefused, got {other:?}"),
    }
    assert!(refused.is_sync_refused());
    assert_eq!(warnings.about_wait(), 0, "Required never warns and goes on");

    let rejected = waits_rejected(&master).await;
    let client = Client::with_config(config(&url, ReplicaSync::BestEffort))
        .await
        .unwrap();
    assert_eq!(
        warnings.about_wait(),
        1,
        "the refusal is said once, at connect"
    );
    let lock = client.get_lock("wr:best").with_owner(LockOwner::new(1));
    for _ in 0..3 {
        let guard = lock.lock().await.unwrap();
        let owner = field(&client, LockOwner::new(1));
        assert!(
            eventually(WITHIN, || async {
                let mut conn = replica.conn().await;
                conn.hexists::<_, _, bool>("wr:best", &owner).await.unwrap()
            })
            .await,
            "the hold never reached the replica"
        );
        guard.unlock().await.unwrap();
    }
    assert_eq!(warnings.about_wait(), 1, "said once, not per write");
    assert_eq!(
        waits_rejected(&master).await,
        rejected + 1,
        "only the connect probe's WAIT was sent: the writes went on without it"
    );
}

/// On the first refused write (the ACL changes after connect): `Required` fails the acquire
/// with `SyncRefused` and undoes it (the lock is free again); `BestEffort` takes the lock,
/// says so once, and sends no `WAIT` after the refused one.
#[tokio::test(flavor = "current_thread")]
async fn a_refusal_found_at_the_first_write() {
    let warnings = Warnings::default();
    let _log = tracing::subscriber::set_default(warnings.clone());
    let (master, _replica, url) = master_with_replica().await;
    let required = Client::with_config(config(&url, ReplicaSync::Required))
        .await
        .unwrap();
    let best = Client::with_config(config(&url, ReplicaSync::BestEffort))
        .await
        .unwrap();
    acl(&master, &["-wait"]).await;
    let mut raw = master.conn().await;

    let err = required.get_lock("wr:req").lock().await.unwrap_err();
    assert!(err.is_sync_refused(), "{err:?}");
    assert!(
        eventually(WITHIN, || async {
            !master
                .conn()
                .await
                .exists::<_, bool>("wr:req")
                .await
                .unwrap()
        })
        .await,
        "the refused acquire was not undone"
    );
    assert_eq!(warnings.about_wait(), 0);

    let rejected = waits_rejected(&master).await;
    let lock = best.get_lock("wr:best2").with_owner(LockOwner::new(1));
    for _ in 0..3 {
        let guard = lock.lock().await.unwrap();
        let held: bool = raw
            .hexists("wr:best2", field(&best, LockOwner::new(1)))
            .await
            .unwrap();
        assert!(held);
        guard.unlock().await.unwrap();
    }
    assert_eq!(warnings.about_wait(), 1, "said once");
    assert_eq!(
        waits_rejected(&master).await,
        rejected + 1,
        "one WAIT refused, then none sent"
    );
    assert!(!raw.exists::<_, bool>("wr:best2").await.unwrap());
}
