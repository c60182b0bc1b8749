//! The libraries under test behind one small interface: lock a name (waiting the library's own
//! way), unlock it.
//!
//! * `ours`: `redisson_lock` `RLock::lock()` (watchdog lease) / `RLockGuard::unlock()` (default
//!   config); `ours-batch`: the same with group commit on (`Config::with_batching(true)`).
//! * `rslock`: 0.10 `LockManager::acquire_no_guard(name, 10 s)` / `unlock` (peer-bench config).
//! * `redisson`: the `redisson` crate 0.1, `AsyncRLock::lock()` / `unlock()`, one handle per task.
//! * `raw*`: the same commands as ours, sent straight through redis-rs with no lock logic around
//!   them: the floor of a Redisson-compatible cycle, used to price each part of ours.
//!   Since the latch-free unlock (issue 11 item 2) `lua/unlock.lua` writes no latch:
//!   `raw-nodel` = lock EVALSHA + unlock EVALSHA and nothing else (ours on the wire);
//!   `raw-nolatch` = the same with the unlock script inlined here (the same commands);
//!   `raw` = that plus one `UNLINK` per 10 ms of latch names (the old latch reaper's traffic);
//!   `raw-spawndel` = that plus a spawned `DEL` per unlock (Redisson's latch deletion).
//!   `raw` also waits (W3, W3w) the minimal pub/sub way: one redis-rs subscriber per process,
//!   one `Notify` per channel, register, try, then wait for a message or the PTTL. No local
//!   wake-up, no per-owner gate, no watchdog: the floor of our waiting path.
//! * `redisson-java`, `redisson-java-tuned`: real Java Redisson (`RLock.lock()` / `unlock()`,
//!   `getFairLock` for W3f) in its own JVM, driven by `java.rs`; never behind [`Lib`]. Not in the
//!   default `--libs` (they need a JDK and the peer's jar: `scripts/ensure-java`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{MultiplexedConnection, PubSubSink};
use redis::{Script, Value};
use tokio::sync::{mpsc, Notify, OnceCell};

use redisson_lock::{Fair, Lock, LockGuard, Write};

use crate::util::Result;

static LOCK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/lock.lua")));
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/unlock.lua")));
/// Same KEYS/ARGV as lua/unlock.lua, without the latch (KEYS[3] and ARGV[5] unused).
static UNLOCK_NO_LATCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end \
         local count = redis.call('hincrby', KEYS[1], ARGV[3], -1) \
         if count > 0 then redis.call('pexpire', KEYS[1], ARGV[2]) return 0 end \
         redis.call('del', KEYS[1]) redis.call(ARGV[4], KEYS[2], ARGV[1]) return 1",
    )
});

/// SHA1 and source of our acquire script (W0 runs exactly this script).
pub fn lock_script() -> (String, &'static str) {
    (
        LOCK.get_hash().to_owned(),
        include_str!("../../lua/lock.lua"),
    )
}

/// Lease every peer and raw cycle uses; ours uses its watchdog lease (30 s) as `lock()` does.
pub const PEER_TTL: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Ours,
    /// Ours with group commit on (`Config::with_batching(true)`).
    OursBatch,
    Rslock,
    Redisson,
    Raw,
    RawSpawnDel,
    RawNoDel,
    RawNoLatch,
    /// Java Redisson with its defaults (`java.rs`).
    RedissonJava,
    /// Java Redisson as a performance-minded user sets it up (`java.rs`).
    RedissonJavaTuned,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Ours,
        Kind::OursBatch,
        Kind::Rslock,
        Kind::Redisson,
        Kind::Raw,
        Kind::RawSpawnDel,
        Kind::RawNoDel,
        Kind::RawNoLatch,
    ];

    /// The Java libraries: accepted by `--libs`, outside the default set.
    pub const JAVA: [Kind; 2] = [Kind::RedissonJava, Kind::RedissonJavaTuned];

    /// Does it run in a JVM of its own (`java.rs`) rather than behind [`Lib`]?
    pub fn java(self) -> bool {
        Kind::JAVA.contains(&self)
    }

    pub fn key(self) -> &'static str {
        match self {
            Kind::Ours => "ours",
            Kind::OursBatch => "ours-batch",
            Kind::Rslock => "rslock",
            Kind::Redisson => "redisson",
            Kind::Raw => "raw",
            Kind::RawSpawnDel => "raw-spawndel",
            Kind::RawNoDel => "raw-nodel",
            Kind::RawNoLatch => "raw-nolatch",
            Kind::RedissonJava => "redisson-java",
            Kind::RedissonJavaTuned => "redisson-java-tuned",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .chain(Kind::JAVA)
            .find(|k| k.key() == s)
    }

    /// Can it wait for a held lock (W3, W3w)?
    pub fn waits(self) -> bool {
        matches!(
            self,
            Kind::Ours | Kind::OursBatch | Kind::Rslock | Kind::Redisson | Kind::Raw
        )
    }
}

/// One connected library instance (one per process, as an application would have).
pub enum Lib {
    Ours(redisson_lock::Client),
    Rslock(Arc<rslock::LockManager>),
    Redisson(Arc<redisson::AsyncRedissonClient>),
    Raw(Arc<Raw>),
}

pub struct Raw {
    url: String,
    sub: OnceCell<RawSub>,
    conn: MultiplexedConnection,
    field: String,
    ids: AtomicU64,
    mode: Kind,
    reaper: Option<mpsc::UnboundedSender<String>>,
}

impl Lib {
    /// `pool`: connection pool size for the `redisson` crate (its default is 10, too few for more
    /// than 10 concurrent tasks; peer-bench used 64 for W2).
    pub async fn connect(kind: Kind, url: &str, pool: u32) -> Result<Lib> {
        Ok(match kind {
            Kind::Ours => Lib::Ours(redisson_lock::Client::connect(url).await?),
            Kind::OursBatch => Lib::Ours(
                redisson_lock::Client::with_config(
                    redisson_lock::Config::new(url).with_batching(true),
                )
                .await?,
            ),
            Kind::Rslock => Lib::Rslock(Arc::new(rslock::LockManager::new(vec![url.to_owned()]))),
            Kind::Redisson => {
                let config =
                    redisson::RedissonConfig::single_server(url).with_pool_size(pool.max(10));
                Lib::Redisson(Arc::new(
                    redisson::AsyncRedissonClient::new(config)
                        .await
                        .map_err(|e| format!("redisson 0.1: {e}"))?,
                ))
            }
            Kind::Raw | Kind::RawSpawnDel | Kind::RawNoDel | Kind::RawNoLatch => {
                let conn = redis::Client::open(url)?
                    .get_multiplexed_async_connection()
                    .await?;
                let reaper = (kind == Kind::Raw).then(|| spawn_reaper(conn.clone()));
                Lib::Raw(Arc::new(Raw {
                    url: url.to_owned(),
                    sub: OnceCell::new(),
                    conn,
                    field: format!("{:016x}", std::process::id()),
                    ids: AtomicU64::new(1),
                    mode: kind,
                    reaper,
                }))
            }
            Kind::RedissonJava | Kind::RedissonJavaTuned => {
                return Err(format!("{} runs in its own JVM (java.rs)", kind.key()).into())
            }
        })
    }

    pub fn handle(&self, name: &str) -> Handle {
        match self {
            Lib::Ours(c) => Handle::Ours(c.get_lock(name)),
            Lib::Rslock(m) => Handle::Rslock(m.clone(), name.to_owned()),
            Lib::Redisson(c) => Handle::Redisson(c.get_lock(name)),
            Lib::Raw(r) => {
                // One owner per handle (as ours has one per task): tasks must exclude each other.
                let owner = r.ids.fetch_add(1, Ordering::Relaxed);
                let field = format!("{}:{owner}", r.field);
                Handle::Raw(r.clone(), name.to_owned(), field)
            }
        }
    }
}

/// The raw waiter's subscriber: one connection, one `Notify` per subscribed channel.
struct RawSub {
    sink: tokio::sync::Mutex<PubSubSink>,
    channels: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

impl Raw {
    async fn sub(&self) -> Result<&RawSub> {
        self.sub
            .get_or_try_init(|| async {
                let (sink, mut stream) = redis::Client::open(self.url.as_str())?
                    .get_async_pubsub()
                    .await?
                    .split();
                let channels: Arc<Mutex<HashMap<String, Arc<Notify>>>> = Arc::default();
                let map = channels.clone();
                tokio::spawn(async move {
                    while let Some(msg) = stream.next().await {
                        let n = map
                            .lock()
                            .ok()
                            .and_then(|m| m.get(msg.get_channel_name()).cloned());
                        if let Some(n) = n {
                            n.notify_one();
                        }
                    }
                });
                Ok::<_, crate::util::Error>(RawSub {
                    sink: tokio::sync::Mutex::new(sink),
                    channels,
                })
            })
            .await
    }

    /// The channel's `Notify`, subscribing on first use.
    async fn channel(&self, channel: &str) -> Result<Arc<Notify>> {
        let sub = self.sub().await?;
        let mut sink = sub.sink.lock().await;
        let existing = sub
            .channels
            .lock()
            .map_err(|_| "poisoned")?
            .get(channel)
            .cloned();
        if let Some(n) = existing {
            return Ok(n);
        }
        let n = Arc::new(Notify::new());
        sub.channels
            .lock()
            .map_err(|_| "poisoned")?
            .insert(channel.to_owned(), n.clone());
        sink.subscribe(channel).await?;
        Ok(n)
    }
}

/// Latch deletes as `src/latches.rs` does them: 10 ms after the first queued name, one `UNLINK`
/// of everything queued by then (at most 500 keys).
fn spawn_reaper(mut conn: MultiplexedConnection) -> mpsc::UnboundedSender<String> {
    const BATCH: usize = 500;
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(first) = rx.recv().await {
            tokio::time::sleep(Duration::from_millis(10)).await;
            batch.push(first);
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(k) => batch.push(k),
                    Err(_) => break,
                }
            }
            let _: redis::RedisResult<i64> = redis::cmd("UNLINK")
                .arg(&batch)
                .query_async(&mut conn)
                .await;
            batch.clear();
        }
    });
    tx
}

/// A lock handle bound to one name (and, for `redisson` 0.1, to one task).
pub enum Handle {
    Ours(redisson_lock::RLock),
    Rslock(Arc<rslock::LockManager>, String),
    Redisson(redisson::AsyncRLock),
    Raw(Arc<Raw>, String, String),
}

/// What a successful lock returns, to give back to unlock.
pub enum Held {
    Ours(redisson_lock::RLockGuard),
    Rslock(rslock::Lock),
    Redisson,
    Raw,
}

impl Handle {
    /// Locks, waiting without a bound (the library's own way of waiting).
    pub async fn lock(&self) -> Result<Held> {
        Ok(match self {
            Handle::Ours(l) => Held::Ours(l.lock().await?),
            Handle::Rslock(m, name) => Held::Rslock(
                m.acquire_no_guard(name.as_str(), PEER_TTL)
                    .await
                    .map_err(|e| format!("rslock: {e:?}"))?,
            ),
            Handle::Redisson(l) => {
                l.lock().await.map_err(|e| format!("redisson 0.1: {e}"))?;
                Held::Redisson
            }
            Handle::Raw(r, name, field) => {
                let attempt = |mut conn: MultiplexedConnection| async move {
                    let reply: Value = LOCK
                        .key(name.as_str())
                        .arg(PEER_TTL.as_millis() as u64)
                        .arg(field)
                        .invoke_async(&mut conn)
                        .await?;
                    Ok::<_, crate::util::Error>(match reply {
                        Value::Array(_) => None,
                        Value::Int(ttl) => Some(ttl),
                        other => return Err(format!("raw lock of {name}: {other:?}").into()),
                    })
                };
                let Some(_) = attempt(r.conn.clone()).await? else {
                    return Ok(Held::Raw);
                };
                // Held: subscribe, then register-try-wait until taken.
                let notify = r
                    .channel(&format!("redisson_lock__channel:{{{name}}}"))
                    .await?;
                loop {
                    let notified = notify.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    match attempt(r.conn.clone()).await? {
                        None => break,
                        Some(ttl) => {
                            let pause = Duration::from_millis(ttl.max(1) as u64);
                            let _ = tokio::time::timeout(pause, notified).await;
                        }
                    }
                }
                Held::Raw
            }
        })
    }

    pub async fn unlock(&self, held: Held) -> Result<()> {
        match (self, held) {
            (Handle::Ours(_), Held::Ours(g)) => g.unlock().await?,
            (Handle::Rslock(m, _), Held::Rslock(l)) => m.unlock(&l).await,
            (Handle::Redisson(l), Held::Redisson) => {
                l.unlock().await.map_err(|e| format!("redisson 0.1: {e}"))?;
            }
            (Handle::Raw(r, name, field), Held::Raw) => {
                // Unique across processes too: a latch another process left would be taken as
                // this unlock's earlier result.
                let id = r.ids.fetch_add(1, Ordering::Relaxed);
                let latch = format!("redisson_unlock_latch:{{{name}}}:{}{id:016x}", r.field);
                let mut conn = r.conn.clone();
                let channel = format!("redisson_lock__channel:{{{name}}}");
                let script = if r.mode == Kind::RawNoLatch {
                    &*UNLOCK_NO_LATCH
                } else {
                    &*UNLOCK
                };
                let mut inv = script.prepare_invoke();
                inv.key(name.as_str())
                    .key(channel)
                    .key(&latch)
                    .arg("0")
                    .arg(PEER_TTL.as_millis() as u64)
                    .arg(field)
                    .arg("PUBLISH")
                    .arg(20_000u64);
                let reply: Value = inv.invoke_async(&mut conn).await?;
                if reply != Value::Int(1) {
                    return Err(format!("raw unlock of {name}: {reply:?}").into());
                }
                match r.mode {
                    Kind::RawSpawnDel => {
                        tokio::spawn(async move {
                            let _: redis::RedisResult<i64> =
                                redis::cmd("DEL").arg(latch).query_async(&mut conn).await;
                        });
                    }
                    Kind::Raw => {
                        if let Some(tx) = &r.reaper {
                            let _ = tx.send(latch);
                        }
                    }
                    _ => {}
                }
            }
            _ => return Err("unlock with a hold of another library".into()),
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------
// The lock a W3 child takes (W3, W3f, W3rw; issue 24 item 3).

/// Which lock a W3 child takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LockKind {
    /// The library's own lock (ours: the RLock): plain W3.
    #[default]
    Plain,
    /// `get_fair_lock`: W3f.
    Fair,
    /// The write side of `get_read_write_lock`: W3rw.
    RwWrite,
}

impl LockKind {
    /// The workload key (`--only` name and figure prefix).
    pub fn key(self) -> &'static str {
        match self {
            LockKind::Plain => "w3",
            LockKind::Fair => "w3f",
            LockKind::RwWrite => "w3rw",
        }
    }

    /// The child's `--lock` value.
    pub fn arg(self) -> &'static str {
        match self {
            LockKind::Plain => "plain",
            LockKind::Fair => "fair",
            LockKind::RwWrite => "rw",
        }
    }

    pub fn parse(s: &str) -> Option<LockKind> {
        [LockKind::Plain, LockKind::Fair, LockKind::RwWrite]
            .into_iter()
            .find(|k| k.arg() == s)
    }
}

/// A lock handle of any kind a W3 child takes.
pub enum W3Handle {
    Base(Handle),
    Fair(Lock<Fair>),
    Write(Lock<Write>),
}

/// What [`W3Handle::lock`] returns, to give back to [`W3Handle::unlock`].
pub enum W3Held {
    Base(Held),
    Fair(LockGuard<Fair>),
    Write(LockGuard<Write>),
}

/// The handle on `name` a W3 child uses: the fair and read-write kinds exist for ours only.
pub fn w3_handle(lib: &Lib, lock: LockKind, name: &str) -> Result<W3Handle> {
    Ok(match (lock, lib) {
        (LockKind::Plain, _) => W3Handle::Base(lib.handle(name)),
        (LockKind::Fair, Lib::Ours(c)) => W3Handle::Fair(c.get_fair_lock(name)),
        (LockKind::RwWrite, Lib::Ours(c)) => {
            W3Handle::Write(c.get_read_write_lock(name).write_lock())
        }
        (l, _) => return Err(format!("{} needs ours or ours-batch", l.key()).into()),
    })
}

impl W3Handle {
    pub async fn lock(&self) -> Result<W3Held> {
        Ok(match self {
            W3Handle::Base(h) => W3Held::Base(h.lock().await?),
            W3Handle::Fair(l) => W3Held::Fair(l.lock().await?),
            W3Handle::Write(l) => W3Held::Write(l.lock().await?),
        })
    }

    pub async fn unlock(&self, held: W3Held) -> Result<()> {
        match (self, held) {
            (W3Handle::Base(h), W3Held::Base(g)) => h.unlock(g).await?,
            (W3Handle::Fair(_), W3Held::Fair(g)) => g.unlock().await?,
            (W3Handle::Write(_), W3Held::Write(g)) => g.unlock().await?,
            _ => return Err("unlock with a hold of another kind".into()),
        }
        Ok(())
    }
}
