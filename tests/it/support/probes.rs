//! Small probes of what Redis holds, shared by the test modules (what a Java client would see).

use std::collections::HashMap;

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

use super::TestServer;

pub async fn exists(raw: &mut MultiplexedConnection, key: &str) -> bool {
    raw.exists(key).await.unwrap()
}

pub async fn pttl(raw: &mut MultiplexedConnection, key: &str) -> i64 {
    raw.pttl(key).await.unwrap()
}

pub async fn key_type(raw: &mut MultiplexedConnection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(raw).await.unwrap()
}

pub async fn fields(raw: &mut MultiplexedConnection, key: &str) -> HashMap<String, i64> {
    raw.hgetall(key).await.unwrap()
}

/// Subscribers of `channel` on the server (`PUBSUB NUMSUB`).
pub async fn numsub(raw: &mut MultiplexedConnection, channel: &str) -> i64 {
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(raw)
        .await
        .unwrap();
    n
}

/// Asserts that `client` comes to track no hold within `within` (it forgot every hold it took
/// or gave up), showing its stats otherwise.
pub async fn assert_no_tracked_holds(client: &redisson_lock::Client, within: std::time::Duration) {
    assert!(
        super::eventually(within, || async { client.stats().tracked_holds == 0 }).await,
        "{:?}",
        client.stats()
    );
}

/// Whether `client` comes to have `n` channels with local waiters subscribed within a generous
/// bound (a waiter is parked on pub/sub once its channel is subscribed).
pub async fn subscribed(client: &redisson_lock::Client, n: usize) -> bool {
    super::eventually(std::time::Duration::from_secs(30), || async {
        client.stats().subscribed_channels == n
    })
    .await
}

/// [`exists`] on a fresh connection to `server`.
pub async fn exists_on(server: &TestServer, key: &str) -> bool {
    exists(&mut server.conn().await, key).await
}

/// [`numsub`] on a fresh connection to `server`.
pub async fn numsub_on(server: &TestServer, channel: &str) -> i64 {
    numsub(&mut server.conn().await, channel).await
}

/// Stops the server running writes for `ms` (`CLIENT PAUSE <ms> WRITE`): scripts sent meanwhile
/// are in flight until it ends (the "cancelled while the script runs" cases).
pub async fn pause_writes(raw: &mut MultiplexedConnection, ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("WRITE")
        .query_async(raw)
        .await
        .unwrap();
}

/// Waits (up to `within`) until `server` runs writes again after [`pause_writes`].
pub async fn writes_resumed(server: &TestServer, within: std::time::Duration) -> bool {
    super::eventually(within, || async {
        let mut raw = server.conn().await;
        raw.set::<_, _, ()>("probe:after-pause", 1).await.is_ok()
    })
    .await
}

/// A Java client's owner field in a lock hash (`<its uuid>:<thread id>`).
pub const JAVA_FIELD: &str = "1a2b3c4d-0000-4000-8000-00000000ffee:1";

/// Writes what Java's acquire script leaves for a holder `field` of lock `name`: that one
/// field with a count of 1, and a 60 s lease (only a release or a restart frees it in time).
pub async fn hold_as_java<C>(raw: &mut C, name: &str, field: &str)
where
    C: redis::aio::ConnectionLike + Send + Sync,
{
    let _: () = raw.hset(name, field, 1).await.unwrap();
    let _: () = raw.pexpire(name, 60_000).await.unwrap();
}

/// A string key's value (`GET`), `None` when missing.
pub async fn get_str(raw: &mut MultiplexedConnection, key: &str) -> Option<String> {
    raw.get(key).await.unwrap()
}

/// Whether `channel` comes to have exactly `n` subscribers on `server` (`PUBSUB NUMSUB`)
/// within a generous bound.
pub async fn channel_subscribers(server: &TestServer, channel: &str, n: i64) -> bool {
    subscribers_within(server, channel, n, std::time::Duration::from_secs(15)).await
}

/// Whether `channel` comes to have exactly `n` subscribers on `server` within `within`.
pub async fn subscribers_within(
    server: &TestServer,
    channel: &str,
    n: i64,
    within: std::time::Duration,
) -> bool {
    super::eventually(within, || async { numsub_on(server, channel).await == n }).await
}

/// `INFO <section>` of the server behind `raw`.
pub async fn info(raw: &mut MultiplexedConnection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query_async(raw)
        .await
        .unwrap()
}

/// The value of `field` in an `INFO` reply (its `field:value` line), trimmed.
pub fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_owned())
}

/// `CONFIG SET <parameter> <value>` on the server behind `raw`.
pub async fn config_set(raw: &mut MultiplexedConnection, parameter: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(parameter)
        .arg(value)
        .query_async(raw)
        .await
        .unwrap();
}

/// `CLIENT KILL TYPE pubsub`: every subscriber connection of `server` dropped; how many.
pub async fn kill_subscribers(server: &TestServer) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut server.conn().await)
        .await
        .unwrap()
}

/// Kills `client`'s subscriber connection and waits until it has reconnected and `channel` is
/// subscribed again (the waiter parked on it is back on pub/sub).
pub async fn kill_and_resubscribe(
    server: &TestServer,
    client: &redisson_lock::Client,
    channel: &str,
) {
    let before = client.stats().subscriber_connections;
    assert!(kill_subscribers(server).await >= 1, "no subscriber to kill");
    assert!(
        super::eventually(std::time::Duration::from_secs(15), || async {
            client.stats().subscriber_connections > before
        })
        .await,
        "the subscriber never reconnected"
    );
    assert!(
        channel_subscribers(server, channel, 1).await,
        "not resubscribed"
    );
}

/// Whether a script call is held by `CLIENT PAUSE` on `server`: a client blocked (flag `b`)
/// on `EVALSHA` or `EVAL` in `CLIENT LIST`, within a generous bound. `cmd=` alone is a
/// client's *last* command, so a connection that ran any script before (a fixture's set-up)
/// would pass for parked before the call under test was even sent (the cause of a rare
/// failure of `semaphore::permits_taken_for_a_dropped_acquire_are_given_back`: the acquire
/// was aborted before it was sent, and nothing was given back because nothing was taken).
pub async fn script_parked(server: &TestServer) -> bool {
    super::eventually(std::time::Duration::from_secs(15), || async {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut server.conn().await)
            .await
            .unwrap();
        list.lines().any(|client| {
            let field = |name: &str| {
                client
                    .split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or_default()
            };
            field("flags=").contains('b') && matches!(field("cmd="), "evalsha" | "eval")
        })
    })
    .await
}

/// Asserts that `server` comes to hold no key at all within a generous bound (a scenario left
/// nothing behind), naming what is left otherwise.
pub async fn assert_nothing_left(server: &TestServer) {
    let keys = || async {
        let keys: Vec<String> = server.conn().await.keys("*").await.unwrap();
        keys
    };
    let empty = super::eventually(std::time::Duration::from_secs(15), || async {
        keys().await.is_empty()
    })
    .await;
    assert!(empty, "keys left behind: {:?}", keys().await);
}

/// `cmdstat_<command>`'s `rejected_calls` on `server` since the last stats reset (0 when the
/// command was never refused).
pub async fn rejected_calls(server: &TestServer, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut server.conn().await)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
        .and_then(|l| {
            l.split(',')
                .find_map(|kv| kv.strip_prefix("rejected_calls="))
        })
        .map_or(0, |n| n.trim().parse().unwrap())
}
