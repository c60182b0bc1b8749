//! Least privilege (issue 21): the crate as a user restricted by the ACL rule of docs/locks.md
//! ("Least privilege"), on a real server (Redis or Valkey); a user lacking one permission gets
//! an error naming it, at connect where that can be known, and holds nothing; usernames in
//! URLs; passwords in no error.

use std::time::Duration;

use redisson_lock::{Client, Config};

use crate::support::{take_and_release, TestServer};

/// The rule of docs/locks.md for lock names under `orders:` (keep the two in step).
pub const LOCK_ONLY_RULE: &str = "on >locker-pw resetkeys resetchannels -@all \
    +ping +hello +script|load +evalsha +subscribe +unsubscribe +ssubscribe +sunsubscribe \
    +publish +spublish +info +wait +cluster|slots +cluster|shards +pubsub|shardnumsub \
    +del +unlink +get +set +type +exists +pttl +pexpire +incr +incrby +decr +decrby \
    +hset +hget +hincrby +hexists +hdel +hlen +hkeys +rpush +lindex +lpop +lrange +lrem \
    +zadd +zincrby +zrange +zrangebyscore +zrem +zscore \
    ~orders:* ~{orders:* ~redisson_*{orders:* &redisson_*{orders:*";

/// Creates user `name` with `rule` (the default user stays all-powerful for inspection).
async fn set_user(server: &TestServer, name: &str, rule: &str) {
    let mut raw = server.conn().await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg(name);
    for part in rule.split_whitespace() {
        cmd.arg(part);
    }
    let _: () = cmd.query_async(&mut raw).await.unwrap();
}

fn url(server: &TestServer, user: &str) -> String {
    format!("redis://{user}:locker-pw@127.0.0.1:{}/", server.port)
}

#[tokio::test]
async fn a_lock_only_user_runs_every_kind_and_waits() {
    let server = TestServer::start();
    set_user(&server, "locker", LOCK_ONLY_RULE).await;
    let config = Config::new(url(&server, "locker"));
    let a = Client::with_config(config.clone()).await.unwrap();
    let b = Client::with_config(config).await.unwrap();

    let held = a.get_lock("orders:1").lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = b.get_lock("orders:1");
        async move { lock.try_lock_for(Duration::from_secs(60)).await }
    });
    for _ in 0..1000 {
        if b.stats().subscribed_channels > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    held.unlock().await.unwrap();
    let guard = waiter.await.unwrap().unwrap().expect("woken");
    guard.unlock().await.unwrap();

    take_and_release(&a.get_fair_lock("orders:fair")).await;
    let rw = a.get_read_write_lock("orders:rw");
    take_and_release(&rw.read_lock()).await;
    take_and_release(&rw.write_lock()).await;
    take_and_release(&a.get_fenced_lock("orders:fenced")).await;
    take_and_release(&a.get_spin_lock("orders:spin")).await;
    let sem = a.get_semaphore("orders:sem");
    assert!(sem.try_set_permits(1).await.unwrap());
    sem.acquire().await.unwrap();
    sem.release().await.unwrap();
    let latch = a.get_count_down_latch("orders:latch");
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    let permits = a.get_permit_expirable_semaphore("orders:permits");
    assert!(permits.try_set_permits(1).await.unwrap());
    let id = permits.acquire().await.unwrap();
    permits.release(&id).await.unwrap();

    // Outside its key patterns the user is refused before anything is written.
    let e = a.get_lock("payments:1").try_lock().await.unwrap_err();
    assert!(e.is_permission_denied(), "{e:?}");
    let mut raw = server.conn().await;
    let exists: bool = redis::cmd("EXISTS")
        .arg("payments:1")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(!exists);
}

/// A user lacking the pattern of Redisson's related keys (`redisson_lock_queue:{name}`...):
/// a fair lock is refused with `NOPERM` before its script runs, and nothing is acquired.
#[tokio::test]
async fn a_user_without_the_related_keys_gets_noperm_and_holds_nothing() {
    let server = TestServer::start();
    let rule = LOCK_ONLY_RULE.replace(" ~redisson_*{orders:*", "");
    set_user(&server, "nokeys", &rule).await;
    let client = Client::connect(&url(&server, "nokeys")).await.unwrap();
    let e = client
        .get_fair_lock("orders:7")
        .try_lock_for(Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(e.is_permission_denied(), "{e:?}");
    // The servers word it differently: Redis 7.0 "this user has no permissions to access one
    // of the keys used as arguments", Valkey 8.1 "No permissions to access a key".
    let text = e.to_string().to_lowercase();
    assert!(text.contains("no permissions to access"), "{e}");
    assert!(text.contains(" key"), "{e}");
    let mut raw = server.conn().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[tokio::test]
async fn a_user_without_evalsha_is_refused_at_connect() {
    let server = TestServer::start();
    let rule = LOCK_ONLY_RULE.replace(" +evalsha", "");
    set_user(&server, "noeval", &rule).await;
    let e = Client::connect(&url(&server, "noeval")).await.unwrap_err();
    assert!(e.is_permission_denied(), "{e:?}");
    assert!(e.to_string().contains("evalsha"), "{e}");
}

#[tokio::test]
async fn a_wrong_password_never_shows_it() {
    let server = TestServer::start();
    set_user(&server, "locker", LOCK_ONLY_RULE).await;
    let bad = format!("redis://locker:not-the-pw-42@127.0.0.1:{}/", server.port);
    let e = Client::connect(&bad).await.unwrap_err();
    assert!(e.is_auth(), "{e:?}");
    assert!(!e.to_string().contains("not-the-pw-42"), "{e}");
    assert!(!format!("{e:?}").contains("not-the-pw-42"), "{e:?}");
}

/// Polls `check` every 20 ms until it holds, for at most 30 s.
async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..1500 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// A user lacking the channel pattern: a call that has to wait fails as soon as its
/// subscription is refused, with an error naming the channel (not at its deadline, not without
/// the lock as if it had timed out); the fair waiter leaves the queue; the subscriber does not
/// reconnect over the refusal; once the channel is granted, the same client waits and is woken.
#[tokio::test]
async fn a_user_without_the_channel_pattern_gets_an_error_naming_the_channel() {
    let server = TestServer::start();
    let rule = LOCK_ONLY_RULE.replace(" &redisson_*{orders:*", "");
    assert_ne!(rule, LOCK_ONLY_RULE);
    set_user(&server, "nochan", &rule).await;
    let admin = server.client().await;
    let client = Client::connect(&url(&server, "nochan")).await.unwrap();
    // Far beyond the time the refusal takes: a wait that runs to its deadline fails the test.
    let patience = Duration::from_secs(120);

    let held = admin.get_lock("orders:9").lock().await.unwrap();
    let e = tokio::time::timeout(
        Duration::from_secs(60),
        client.get_lock("orders:9").try_lock_for(patience),
    )
    .await
    .expect("the refusal must end the wait, not its deadline")
    .unwrap_err();
    assert!(e.is_permission_denied(), "{e:?}");
    assert!(
        e.to_string().contains("redisson_lock__channel:{orders:9}"),
        "{e}"
    );
    assert!(e.to_string().contains("NOPERM"), "{e}");

    // The fair lock's per-waiter channel: refused too, and the waiter leaves the queue.
    let fair_held = admin.get_fair_lock("orders:f9").lock().await.unwrap();
    let e = tokio::time::timeout(
        Duration::from_secs(60),
        client.get_fair_lock("orders:f9").try_lock_for(patience),
    )
    .await
    .expect("the refusal must end the fair wait")
    .unwrap_err();
    assert!(e.is_permission_denied(), "{e:?}");
    assert!(
        e.to_string()
            .contains("redisson_lock__channel:{orders:f9}:"),
        "{e}"
    );
    let mut raw = server.conn().await;
    let mut queued = 1;
    for _ in 0..1500 {
        queued = redis::cmd("LLEN")
            .arg("redisson_lock_queue:{orders:f9}")
            .query_async(&mut raw)
            .await
            .unwrap();
        if queued == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(queued, 0, "the refused fair waiter is still queued");

    // A semaphore waits on its own channel: refused the same way.
    // (Set up by the admin: `trySetPermits` publishes, which this user may not.)
    assert!(admin
        .get_semaphore("orders:sem9")
        .try_set_permits(0)
        .await
        .unwrap());
    let sem = client.get_semaphore("orders:sem9");
    let e = tokio::time::timeout(Duration::from_secs(60), sem.try_acquire_for(patience))
        .await
        .expect("the refusal must end the semaphore wait")
        .unwrap_err();
    assert!(e.is_permission_denied(), "{e:?}");
    assert!(e.to_string().contains("redisson_sc:{orders:sem9}"), "{e}");

    // Nothing acquired: the holders' data only, unchanged.
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg("orders:9")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert!(!fields[0].starts_with(client.id()), "{fields:?}");

    // One subscriber connection all along: a refusal is not a broken connection.
    assert_eq!(client.stats().subscriber_connections, 1);

    // Granted the channels, the same client waits and is woken by the release.
    set_user(&server, "nochan", "&redisson_*{orders:*").await;
    let waiter = tokio::spawn({
        let lock = client.get_lock("orders:9");
        async move { lock.try_lock_for(Duration::from_secs(60)).await }
    });
    let subscribed = eventually(|| client.stats().subscribed_channels > 0).await;
    assert!(subscribed, "the waiter never subscribed");
    held.unlock().await.unwrap();
    let guard = waiter.await.unwrap().unwrap().expect("woken");
    guard.unlock().await.unwrap();
    fair_held.unlock().await.unwrap();
    assert_eq!(client.stats().subscriber_connections, 1);
}

/// Every tracing event and span field, as text (`name=value`), for the test that looks for
/// passwords in the crate's tracing output.
#[derive(Clone, Default)]
struct Capture(std::sync::Arc<std::sync::Mutex<String>>);

impl Capture {
    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

impl tracing::field::Visit for Capture {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let line = format!("{}={value:?} ", field.name());
        self.0.lock().unwrap().push_str(&line);
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        span.record(&mut self.clone());
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut self.clone());
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        event.record(&mut self.clone());
        self.0.lock().unwrap().push('\n');
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The crate's tracing output (every level) never carries the password of the URL: not while
/// a waiter's subscriber reconnects to a restarted server that refuses the user, nor while lock
/// calls fail and are retried. (The runtime is single-threaded, so the thread's subscriber sees
/// every task.)
#[tokio::test]
async fn tracing_never_shows_the_password() {
    const PW: &str = "trace-pw-8812";
    let capture = Capture::default();
    let _default = tracing::subscriber::set_default(capture.clone());
    let mut server = TestServer::start();
    let rule = format!("on >{PW} +@all ~* &*");
    set_user(&server, "tracer", &rule).await;
    let url = format!("redis://tracer:{PW}@127.0.0.1:{}/", server.port);
    let client = Client::connect(&url).await.unwrap();
    let admin = server.client().await;
    let _held = admin.get_lock("orders:t").lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = client.get_lock("orders:t");
        async move { lock.try_lock_for(Duration::from_secs(60)).await }
    });
    let subscribed = eventually(|| client.stats().subscribed_channels > 0).await;
    assert!(subscribed, "the waiter never subscribed");

    // An empty server on the same port: the user is gone, so the subscriber's reconnects fail
    // their authentication (and are logged) until the user is back.
    server.restart();
    let logged = eventually(|| capture.text().contains("subscriber connection failed")).await;
    assert!(
        logged,
        "no reconnect failure was traced:\n{}",
        capture.text()
    );
    set_user(&server, "tracer", &rule).await;
    let reconnected = eventually(|| client.stats().subscriber_connections >= 2).await;
    assert!(reconnected, "the subscriber did not come back");
    let _ = waiter.await.unwrap();
    let _ = Client::connect(&url.replace(PW, "wrong-pw")).await;

    let text = capture.text();
    assert!(
        text.contains("error="),
        "nothing traced with an error:\n{text}"
    );
    assert!(!text.contains(PW), "the password was traced:\n{text}");
}

/// The same refusal on a cluster with sharded pub/sub (`SSUBSCRIBE`): an error naming the
/// channel, no reconnect, nothing acquired.
#[tokio::test]
async fn a_cluster_user_without_the_channel_pattern_gets_an_error_naming_the_channel() {
    let cluster = crate::support::cluster::TestCluster::start(0);
    let rule = LOCK_ONLY_RULE.replace(" &redisson_*{orders:*", "");
    for node in &cluster.nodes {
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER").arg("nochan");
        for part in rule.split_whitespace() {
            cmd.arg(part);
        }
        let _: () = cmd.query(&mut node.conn()).unwrap();
    }
    let urls: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("redis://nochan:locker-pw@127.0.0.1:{}/", n.port))
        .collect();
    let admin = Client::with_config(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let client = Client::with_config(Config::cluster(urls)).await.unwrap();
    assert!(
        client.is_sharded_pubsub(),
        "Redis 7+ clusters shard pub/sub"
    );

    let held = admin.get_lock("orders:c").lock().await.unwrap();
    let e = tokio::time::timeout(
        Duration::from_secs(60),
        client
            .get_lock("orders:c")
            .try_lock_for(Duration::from_secs(120)),
    )
    .await
    .expect("the refusal must end the wait, not its deadline")
    .unwrap_err();
    assert!(e.is_permission_denied(), "{e:?}");
    assert!(
        e.to_string().contains("redisson_lock__channel:{orders:c}"),
        "{e}"
    );
    assert_eq!(client.stats().subscriber_connections, 1);
    assert!(!client
        .get_lock("orders:c")
        .is_held_by_current()
        .await
        .unwrap());
    held.unlock().await.unwrap();
}
