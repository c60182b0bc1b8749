//! Lost wake-ups: a waiter registers for the release message *before* its attempt, so a release
//! that lands between the attempt and the wait is never missed (issue 10). The holder here is a
//! foreign client that set no expiry (Redis `PTTL` -1), so nothing but the message can wake a
//! waiter with no deadline: a missed message is a waiter asleep for good.
//!
//! (Checked by moving the registration after the attempt: the read-write test then loses a
//! reader in the first rounds. tokio's `notify_waiters` reaches every `Notified` created before
//! it, so what matters is creating the registration before the attempt.)
//!
//! To make the window likely, the waiters are kept cycling through attempts by a burst of
//! wake-up messages right before the real release, so at the release some of them are between
//! an attempt that saw the lock held and their next wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ROUNDS: usize = 15;
const WAITERS: usize = 6;
/// Far longer than a hand-over takes; a waiter that missed the release never wakes at all.
const BOUND: Duration = Duration::from_secs(10);

async fn burst_then_release(
    raw: &mut redis::aio::MultiplexedConnection,
    key: &str,
    channel: &str,
    message: &str,
) {
    for _ in 0..200 {
        let _: i64 = raw.publish(channel, message).await.unwrap();
    }
    // The release itself: delete and publish in one step, as an unlock script does.
    let _: () =
        redis::Script::new("redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1])")
            .key(key)
            .key(channel)
            .arg(message)
            .invoke_async(raw)
            .await
            .unwrap();
}

async fn subscribed(server: &TestServer, channel: &str) {
    let ok = eventually(BOUND, || async { numsub_on(server, channel).await > 0 }).await;
    assert!(ok, "nobody subscribed to {channel}");
}

/// The burst scenario, [`ROUNDS`] times on a fresh name per round (`kind` names it): a foreign
/// client holds the lock (hash `fields`), [`WAITERS`] tasks from `wait` park on its channel
/// (`channel` from the name), 200 stale `message`s precede the real release, and every waiter
/// must get through within [`BOUND`]; `done` then finishes each waiter's outcome.
async fn no_waiter_misses_the_release<T, W, D, DF>(
    kind: &str,
    channel: fn(&str) -> String,
    fields: &[(&str, &str)],
    message: &str,
    wait: impl Fn(&Client, String) -> W,
    done: D,
) where
    W: std::future::Future<Output = redisson_lock::Result<T>> + Send + 'static,
    T: Send + 'static,
    D: Fn(T) -> DF,
    DF: std::future::Future<Output = ()>,
{
    let (server, client, mut raw) = fixture().await;
    for round in 0..ROUNDS {
        let name = format!("wake:{kind}:{round}");
        let channel = channel(&name);
        let _: () = raw.hset_multiple(&name, fields).await.unwrap();
        let waiters: Vec<_> = (0..WAITERS)
            .map(|_| tokio::spawn(wait(&client, name.clone())))
            .collect();
        subscribed(&server, &channel).await;
        burst_then_release(&mut raw, &name, &channel, message).await;
        for (i, w) in waiters.into_iter().enumerate() {
            let outcome = tokio::time::timeout(BOUND, w)
                .await
                .unwrap_or_else(|_| panic!("{kind} round {round}: waiter {i} missed the release"))
                .unwrap()
                .unwrap();
            done(outcome).await;
        }
    }
}

/// The read-write lock's wake-all (`1` wakes every reader at once, with no permit kept for a
/// reader that is not waiting yet): the case where a late registration loses the release.
/// Every reader keeps its hold until all are in, so only the write release can wake them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_miss_a_writers_release() {
    no_waiter_misses_the_release(
        "rw",
        |name| format!("redisson_rwlock:{{{name}}}"),
        &[("mode", "write"), ("foreign-client:1:write", "1")],
        "1",
        |client, name| {
            let lock = client.get_read_write_lock(name).read_lock();
            async move { lock.lock().await }
        },
        |guard| async move { guard.unlock().await.unwrap() },
    )
    .await;
}

/// The same for the reentrant lock (`0` wakes one waiter per client; the lock then passes from
/// waiter to waiter by their own releases).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_waiters_never_miss_a_release() {
    no_waiter_misses_the_release(
        "rlock",
        |name| format!("redisson_lock__channel:{{{name}}}"),
        &[("foreign-client:1", "1")],
        "0",
        |client, name| {
            let lock = client.get_lock(name);
            async move {
                let g = lock.lock().await?;
                g.unlock().await
            }
        },
        |()| async {},
    )
    .await;
}

// The deterministic versions (by the watchdog-tier helper): a proxy holds the waiter's attempt
// replies while its subscriber connection passes, so the release lands exactly in the window.

/// A loopback proxy that delays the server's replies on every connection that has sent
/// `pattern` (here: the acquire script's SHA, so the waiter's command connection) by `delay`,
/// and passes everything else at once, in particular the subscriber connection's messages. A
/// release sent right after Redis ran an attempt then reaches the waiter *before* the attempt's
/// reply: exactly the window between the attempt and the wait.
pub(crate) struct ReplyDelay {
    port: u16,
    tasks: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl ReplyDelay {
    pub(crate) async fn start(upstream: u16, pattern: Vec<u8>, delay: Duration) -> ReplyDelay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let tasks = Arc::new(std::sync::Mutex::new(Vec::new()));
        let t = tasks.clone();
        let acceptor = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let delayed = Arc::new(AtomicBool::new(false));
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
                let pattern = pattern.clone();
                let flag = delayed.clone();
                let up = tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = cr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let chunk = &buf[..n];
                        if chunk.windows(pattern.len()).any(|w| w == pattern) {
                            // Before forwarding: the reply is surely read after this.
                            flag.store(true, Ordering::SeqCst);
                        }
                        if sw.write_all(chunk).await.is_err() {
                            break;
                        }
                    }
                });
                let down_read = tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = sr.read(&mut buf).await {
                        if n == 0 || tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                });
                let down_write = tokio::spawn(async move {
                    while let Some((read_at, chunk)) = rx.recv().await {
                        if delayed.load(Ordering::SeqCst) {
                            tokio::time::sleep_until((read_at + delay).into()).await;
                        }
                        if cw.write_all(&chunk).await.is_err() {
                            break;
                        }
                    }
                });
                t.lock().unwrap().extend([up, down_read, down_write]);
            }
        });
        tasks.lock().unwrap().push(acceptor);
        ReplyDelay { port, tasks }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for ReplyDelay {
    fn drop(&mut self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

/// Loads `source` into the server's script cache (so the client's EVALSHA needs no NOSCRIPT
/// round) and returns its SHA as it appears on the wire.
pub(crate) async fn preload(server: &TestServer, source: &str) -> Vec<u8> {
    let mut c = server.conn().await;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(sha, redis::Script::new(source).get_hash());
    sha.into_bytes()
}

/// Waits until Redis has run `n` EVALSHA in all. Callers count from a baseline taken after
/// their client connected: `connect` runs one of its own (the ACL probe of issue 21).
async fn wait_evalsha(server: &TestServer, n: u64) {
    let deadline = Instant::now() + BOUND;
    while crate::support::redisson::calls(server, "evalsha").await < n {
        assert!(
            Instant::now() < deadline,
            "the waiters never tried {n} times"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// How long the waiter's attempt replies are held back: the window a late `enable()` opens.
pub(crate) const WINDOW: Duration = Duration::from_millis(2000);

/// A waiter client whose acquire replies are delayed by [`WINDOW`].
pub(crate) async fn delayed_waiter(proxy: &ReplyDelay) -> Client {
    Client::with_config(
        Config::new(proxy.url())
            .with_response_timeout(Duration::from_secs(20))
            .with_connection_timeout(Duration::from_secs(20)),
    )
    .await
    .unwrap()
}

/// The window scenarios' setup: a server (with the lua/ script `source` preloaded, if given),
/// a [`ReplyDelay`] proxy holding back by [`WINDOW`] the replies to requests containing
/// `pattern`, a [`delayed_waiter`] client through it, and a raw connection:
/// `(server, proxy, client, raw)`.
pub(crate) async fn windowed(
    pattern: Vec<u8>,
    source: Option<&str>,
) -> (
    TestServer,
    ReplyDelay,
    Client,
    redis::aio::MultiplexedConnection,
) {
    let server = TestServer::start();
    if let Some(source) = source {
        assert_eq!(preload(&server, source).await, pattern);
    }
    let proxy = ReplyDelay::start(server.port, pattern, WINDOW).await;
    let client = delayed_waiter(&proxy).await;
    let raw = server.conn().await;
    (server, proxy, client, raw)
}

/// [`windowed`], delaying the replies to the lua/ script `source` (preloaded, so the client
/// sends it as EVALSHA).
pub(crate) async fn windowed_script(
    source: &str,
) -> (
    TestServer,
    ReplyDelay,
    Client,
    redis::aio::MultiplexedConnection,
) {
    let sha = redis::Script::new(source).get_hash().as_bytes().to_vec();
    windowed(sha, Some(source)).await
}

/// (c) Read-write lock, wake-all: three readers of one client wait (no deadline) on a write
/// hold that has no expiry (written directly, as a foreign client could), so only the release
/// message can wake them. The release (`DEL` + `1` on the rwlock channel) lands after Redis ran
/// each reader's attempt in the wait loop and before the replies reach the client. `1` wakes
/// the waiters registered at that moment (`notify_waiters`, no permit is stored): a reader that
/// registers (creates its `Notified`) only after its attempt misses it and sleeps forever.
/// (Creating it before and only *enabling* it after is fine: a `Notified` sees every
/// `notify_waiters` made after its creation.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rw_wake_all_between_attempt_and_wait_is_not_missed() {
    let (server, _proxy, client, mut raw) =
        windowed_script(include_str!("../../lua/read_lock.lua")).await;
    let name = "wd:rw-wake-all";
    let () = redis::pipe()
        .hset(name, "mode", "write")
        .hset(name, "foreign-client:1:write", 1)
        .query_async(&mut raw)
        .await
        .unwrap();
    let readers = 3;
    let base = crate::support::redisson::calls(&server, "evalsha").await;
    let tasks: Vec<_> = (0..readers)
        .map(|_| {
            let lock = client.get_read_write_lock(name).read_lock();
            tokio::spawn(async move {
                let g = lock.lock().await.unwrap();
                g.unlock().await.unwrap();
            })
        })
        .collect();
    // Each reader: a first attempt, a subscription, then the wait loop's first attempt.
    wait_evalsha(&server, base + 2 * readers).await;
    let released = Instant::now();
    let (_deleted, receivers): (i64, i64) = redis::pipe()
        .atomic()
        .del(name)
        .publish(format!("redisson_rwlock:{{{name}}}"), "1")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(
        receivers, 1,
        "the waiters' subscriber did not get the release"
    );
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(25), t)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "a reader slept through the wake-all sent {:?} ago: it registered for \
                     wake-ups after its attempt",
                    released.elapsed()
                )
            })
            .unwrap();
    }
}

/// (c) RLock: a waiter (no deadline) on a hold with no expiry. Right after Redis ran the wait
/// loop's attempt, the hold is deleted and the waiters' subscriber connection killed in one
/// transaction, so the release message is lost; only the wake-all after the subscriber's
/// reconnect can wake the waiter, and it comes while the attempt's reply is still delayed. (A
/// `0` message could not show the window: `notify_one` stores a permit for a late waiter.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rlock_reconnect_wake_between_attempt_and_wait_is_not_missed() {
    let (server, _proxy, client, mut raw) =
        windowed_script(include_str!("../../lua/lock.lua")).await;
    let name = "wd:rlock-reconnect";
    let () = raw.hset(name, "foreign-client:1", 1).await.unwrap();
    let lock = client.get_lock(name);
    let base = crate::support::redisson::calls(&server, "evalsha").await;
    let waiter = tokio::spawn(async move {
        let g = lock.lock().await.unwrap();
        g.unlock().await.unwrap();
    });
    wait_evalsha(&server, base + 2).await;
    let connections = client.stats().subscriber_connections;
    let released = Instant::now();
    let (killed, _deleted, receivers): (i64, i64, i64) = redis::pipe()
        .atomic()
        .cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .del(name)
        .publish(format!("redisson_lock__channel:{{{name}}}"), "0")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(killed, 1, "the waiter's subscriber was not connected");
    tokio::time::timeout(Duration::from_secs(25), waiter)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the waiter slept through its subscriber's reconnect ({} -> {} connections, \
                 release message to {receivers} receivers) {:?} ago: it registered for \
                 wake-ups after its attempt",
                connections,
                client.stats().subscriber_connections,
                released.elapsed()
            )
        })
        .unwrap();
    assert!(client.stats().subscriber_connections > connections);
}
