//! The Lua scripts in `lua/`, hashed once and called through typed functions so that the KEYS
//! and ARGV order of each script is written down in exactly one place.
//!
//! Scripts run by `EVALSHA`; on `NOSCRIPT` (after `SCRIPT FLUSH`, a restart or a failover to a
//! replica that never loaded it) the script is loaded where the call went and sent once more
//! (`call.rs`), which is safe because the script never ran.

use std::sync::LazyLock;

use redis::Script;

mod call;
pub(crate) use call::call;
pub use call::Call;
pub(crate) use call::Peer;

macro_rules! scripts {
    ($($name:ident => $file:literal,)*) => {
        $(pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../../lua/", $file))));)*
        /// Every script with its file name (for the SHA pins).
        #[cfg(test)]
        pub(crate) fn all() -> Vec<(&'static str, &'static Script)> {
            vec![$(($file, &*$name)),*]
        }

        /// The file name (without `.lua`) of `script`, one of the table's (for spans).
        pub(crate) fn name_of(script: &Script) -> &'static str {
            $(if std::ptr::eq(script, &*$name) {
                return $file.trim_end_matches(".lua");
            })*
            "script"
        }

        /// Every script's source.
        fn sources() -> Vec<&'static str> {
            vec![$(include_str!(concat!("../../lua/", $file))),*]
        }
    };
}

/// Loads every script (and the group-commit script) on the server(s), all at once (a cluster
/// routes `SCRIPT LOAD` to every master). Without it, a burst of first calls of one script each
/// get `NOSCRIPT` and load it themselves (measured: about 200 extra script calls when 10,000
/// waiters start together). Best effort: a script that could not be loaded is loaded by its
/// first call, as after a restart or a failover.
pub(crate) async fn preload<C>(conn: &C)
where
    C: redis::aio::ConnectionLike + Clone + Send,
{
    let batch = batch_source();
    let mut codes = sources();
    codes.push(&batch);
    let loads = codes.into_iter().map(|code| {
        let mut conn = conn.clone();
        async move {
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(code)
                .query_async::<redis::Value>(&mut conn)
                .await
        }
    });
    for r in futures_util::future::join_all(loads).await {
        if let Err(e) = r {
            tracing::debug!(error = %e, "script not preloaded; its first call loads it");
            break;
        }
    }
}

/// The connect-time check that the user may load and run scripts and that the server runs
/// them at all (see `Client::with_config`): `SCRIPT LOAD` and `EVALSHA` of a script that
/// touches nothing.
pub(crate) async fn probe<C>(conn: &mut C) -> Result<(), crate::error::LockError>
where
    C: redis::aio::ConnectionLike + Send,
{
    use crate::error::LockError;
    let load = redis::cmd("SCRIPT").arg("LOAD").arg("return 1").clone();
    let mut probe = load.query_async::<redis::Value>(&mut *conn).await;
    if probe.is_ok() {
        let run = redis::cmd("EVALSHA").arg(RETURN_1_SHA).arg(0).clone();
        probe = run.query_async::<redis::Value>(&mut *conn).await;
    }
    match probe {
        // NOSCRIPT (a script cache flushed between the two) says the command is allowed.
        Err(e) if e.code() == Some("NOPERM") => Err(LockError::Redis(e)),
        Err(e) if no_scripting(&e) => Err(LockError::NoScripting {
            detail: format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
        }),
        _ => Ok(()),
    }
}

/// A server with no Lua engine (Valkey 9+ without its `lua` module: "Could not find scripting
/// engine 'lua'") or no `SCRIPT` command (a proxy: "unknown command").
fn no_scripting(e: &redis::RedisError) -> bool {
    let detail = e.detail().unwrap_or("").to_ascii_lowercase();
    detail.contains("scripting engine") || detail.contains("unknown command")
}

/// SHA1 of `return 1`.
const RETURN_1_SHA: &str = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";

scripts! {
    LOCK => "lock.lua",
    UNLOCK => "unlock.lua",
    RENEW => "renew.lua",
    EXPIRE => "expire.lua",
    FORCE_UNLOCK => "force_unlock.lua",
    TRIM => "trim.lua",
    FENCED_LOCK => "fenced_lock.lua",
    FENCED_SET => "fenced_set.lua",
    FAIR_LOCK => "fair_lock.lua",
    FAIR_UNLOCK => "fair_unlock.lua",
    FAIR_CANCEL => "fair_cancel.lua",
    FAIR_FORCE_UNLOCK => "fair_force_unlock.lua",
    READ_LOCK => "read_lock.lua",
    READ_UNLOCK => "read_unlock.lua",
    READ_RENEW => "read_renew.lua",
    WRITE_LOCK => "write_lock.lua",
    WRITE_UNLOCK => "write_unlock.lua",
    RW_FORCE_UNLOCK => "rw_force_unlock.lua",
    RW_IS_LOCKED => "rw_is_locked.lua",
    SEMAPHORE_ACQUIRE => "semaphore_acquire.lua",
    SEMAPHORE_UNDO => "semaphore_undo.lua",
    SEMAPHORE_RELEASE => "semaphore_release.lua",
    SEMAPHORE_TRY_SET => "semaphore_try_set.lua",
    SEMAPHORE_ADD => "semaphore_add.lua",
    SEMAPHORE_DRAIN => "semaphore_drain.lua",
    LATCH_TRY_SET => "latch_try_set.lua",
    LATCH_COUNT_DOWN => "latch_count_down.lua",
    LATCH_DELETE => "latch_delete.lua",
    PES_ACQUIRE => "pes_acquire.lua",
    PES_RELEASE => "pes_release.lua",
    PES_AVAILABLE => "pes_available.lua",
    PES_UPDATE_LEASE => "pes_update_lease.lua",
    PES_ADD => "pes_add.lua",
    NR_LOCK => "nr_lock.lua",
    SEMAPHORE_RELEASE_IF_EXISTS => "semaphore_release_if_exists.lua",
    SYNC_EXPIRE => "sync_expire.lua",
    PES_COUNTS => "pes_counts.lua",
    PES_SET_PERMITS => "pes_set_permits.lua",
    PES_LEASE_TIME => "pes_lease_time.lua",
    PES_RELEASE_MANY => "pes_release_many.lua",
    RATE_TRY_SET => "rate_try_set.lua",
    RATE_SET => "rate_set.lua",
    RATE_ACQUIRE => "rate_acquire.lua",
    RATE_AVAILABLE => "rate_available.lua",
    RATE_RELEASE => "rate_release.lua",
    PES_RENEW => "pes_renew.lua",
}

/// The scripts a batch may carry (group commit, `src/conn/batch.rs`), with their sources: the
/// lock family's acquires and releases and their exact-outcome trims. Their index here (from
/// 1) is their function's in [`BATCH`].
static BATCHED: LazyLock<[(&'static Script, &'static str); 9]> = LazyLock::new(|| {
    [
        (&*LOCK, include_str!("../../lua/lock.lua")),
        (&*UNLOCK, include_str!("../../lua/unlock.lua")),
        (&*FENCED_LOCK, include_str!("../../lua/fenced_lock.lua")),
        (&*READ_LOCK, include_str!("../../lua/read_lock.lua")),
        (&*READ_UNLOCK, include_str!("../../lua/read_unlock.lua")),
        (&*WRITE_LOCK, include_str!("../../lua/write_lock.lua")),
        (&*WRITE_UNLOCK, include_str!("../../lua/write_unlock.lua")),
        (&*TRIM, include_str!("../../lua/trim.lua")),
        (&*EXPIRE, include_str!("../../lua/expire.lua")),
    ]
});

/// The group-commit script: one function per [`BATCHED`] script (its file's body, unchanged)
/// and the dispatcher `lua/batch.lua`.
pub(crate) static BATCH: LazyLock<Script> = LazyLock::new(|| Script::new(&batch_source()));

fn batch_source() -> String {
    // One function (one closure per call, not one per script) whose branch `op == i` is the
    // body of the i-th script: a body's `return` ends its branch's block, as Lua requires.
    let mut src = String::from("local function OP(op, k, a)\n");
    for (i, (_, body)) in BATCHED.iter().enumerate() {
        let branch = if i == 0 { "if" } else { "elseif" };
        src.push_str(&format!(
            "{branch} op == {} then\n{}\n",
            i + 1,
            at_offsets(body)
        ));
    }
    src.push_str("else\nreturn redis.error_reply('ERR unknown batch operation')\nend\nend\n");
    src.push_str(include_str!("../../lua/batch.lua"));
    src
}

/// A script body with every `KEYS[n]` read as `KEYS[k + n]` and every `ARGV[n]` as
/// `ARGV[a + n]`: inside the batch, an operation's keys and arguments are read in place from
/// the batch call's own (measured: copying them into tables of its own cost more server time
/// per operation than the script call the batch saves; benches/results/HISTORY.md). Every batched
/// script reads its keys and arguments only by literal index, which a unit test checks.
fn at_offsets(body: &str) -> String {
    [("KEYS[", "k + "), ("ARGV[", "a + ")].into_iter().fold(
        body.to_owned(),
        |src, (open, offset)| {
            let mut parts = src.split(open);
            let mut out = parts.next().unwrap_or_default().to_owned();
            for part in parts {
                out.push_str(open);
                let digits = part.bytes().take_while(u8::is_ascii_digit).count();
                if digits > 0 && part[digits..].starts_with(']') {
                    out.push_str(offset);
                }
                out.push_str(part);
            }
            out
        },
    )
}

/// The batch function index (from 1) of `script`, when a batch may carry it.
fn batch_index(script: &Script) -> Option<u8> {
    BATCHED
        .iter()
        .position(|(s, _)| std::ptr::eq(*s, script))
        .and_then(|i| u8::try_from(i + 1).ok())
}

/// The names and arguments of one operation.
#[derive(Debug)]
pub struct Op<'a> {
    /// The lock key.
    pub key: &'a str,
    /// The kind's unlock channel.
    pub channel: &'a str,
    /// The owner's hash field (already adjusted by the kind).
    pub field: &'a str,
    /// Lease in milliseconds.
    pub lease_ms: u64,
    /// Publish command.
    pub publish: &'a str,
    /// Epoch milliseconds (client clock), for kinds that need it.
    pub now_ms: u64,
    /// How long a queued waiter may be absent (fair lock), in milliseconds.
    pub wait_ms: u64,
}

/// `LockPubSub.UNLOCK_MESSAGE`: wakes one waiter per client.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// `LockPubSub.READ_UNLOCK_MESSAGE`: wakes every waiter (a write lock was released).
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

pub(crate) fn lock(key: &str, lease_ms: u64, field: &str) -> Call {
    call!(LOCK; key; lease_ms, field)
}

/// The non-reentrant lock's acquire (`lua/nr_lock.lua`).
pub(crate) fn nr_lock(key: &str, lease_ms: u64, field: &str) -> Call {
    call!(NR_LOCK; key; lease_ms, field)
}

/// The error both non-reentrant acquires reply when the owner already holds the lock
/// (Redisson's `RedissonNonReentrantLock.REENTRY_ERR`).
pub(crate) const REENTRY_ERR: &str = "NON_REENTRANT_REACQUIRE";

/// Whether `e` is a non-reentrant acquire's refusal ([`REENTRY_ERR`]).
pub(crate) fn is_reentry_refusal(e: &redis::RedisError) -> bool {
    e.code() == Some(REENTRY_ERR)
        || e.detail().is_some_and(|d| d.contains(REENTRY_ERR))
        || e.to_string().contains(REENTRY_ERR)
}

pub(crate) fn fenced_lock(key: &str, token_key: &str, lease_ms: u64, field: &str) -> Call {
    call!(FENCED_LOCK; key, token_key; lease_ms, field)
}

/// A resource write fenced by a token (`lua/fenced_set.lua`).
pub(crate) fn fenced_set(key: &str, fence: &str, token: i64, value: &[u8]) -> Call {
    call!(FENCED_SET; key, fence; token, value)
}

/// Releases one hold (no unlock latch: a retry after an unknown outcome trims instead).
pub(crate) fn unlock(op: &Op<'_>) -> Call {
    call!(UNLOCK; op.key, op.channel; UNLOCK_MESSAGE, op.lease_ms, op.field, op.publish)
}

/// `locks`: (hash, field) of each hold renewed.
pub(crate) fn renew<'k>(
    lease_ms: u64,
    locks: impl Iterator<Item = (&'k str, &'k str)> + Clone,
) -> Call {
    let mut call = Call::new(&RENEW, locks.clone().count());
    locks.clone().for_each(|(key, _)| _ = call.key(key));
    call.arg(lease_ms);
    locks.for_each(|(_, field)| _ = call.arg(field));
    call
}

/// Owner-checked exact `PEXPIRE` (see `lua/expire.lua`).
pub(crate) fn expire(key: &str, field: &str, expiry_ms: u64) -> Call {
    call!(EXPIRE; key; expiry_ms, field)
}

/// `locks`: (RW hash, owner's timeout prefix, read field).
pub(crate) fn read_renew<'k>(
    lease_ms: u64,
    locks: impl Iterator<Item = (&'k str, &'k str, &'k str)> + Clone,
) -> Call {
    let mut call = Call::new(&READ_RENEW, 2 * locks.clone().count());
    locks
        .clone()
        .for_each(|(key, prefix, _)| _ = call.key(key).key(prefix));
    call.arg(lease_ms);
    locks.for_each(|(_, _, field)| _ = call.arg(field));
    call
}

/// `seen`: the holders the caller saw (`holders_seen`), or empty: anyone.
pub(crate) fn force_unlock(key: &str, channel: &str, publish: &str, seen: &str) -> Call {
    call!(FORCE_UNLOCK; key, channel; UNLOCK_MESSAGE, publish, seen)
}

/// The holders a force-unlock was shown, as its scripts compare them: the hash fields, sorted,
/// joined by newlines (never empty: an empty list would mean "anyone").
pub(crate) fn holders_seen(fields: &[String]) -> String {
    let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    fields.sort_unstable();
    fields.dedup();
    match fields.join("\n") {
        s if s.is_empty() => "\n".to_owned(),
        s => s,
    }
}

/// Trim layouts (ARGV[6] of trim.lua).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A plain RLock hash (RLock, fenced).
    Plain,
    /// Fair lock: `extra_key` is the queue; a freed lock wakes its head on the head's channel.
    Fair,
    /// Read side: `extra_key` is the owner's `rwlock_timeout` prefix.
    Read,
    /// Write side of a read-write lock.
    Write,
}

/// `extra_key`: KEYS[3] of trim.lua (see [`Layout`]); the lock key when the layout needs none.
pub(crate) fn trim(op: &Op<'_>, extra_key: Option<&str>, target: u32, layout: Layout) -> Call {
    let (layout, message) = match layout {
        Layout::Plain => ("plain", UNLOCK_MESSAGE),
        Layout::Fair => ("fair", UNLOCK_MESSAGE),
        Layout::Read => ("read", UNLOCK_MESSAGE),
        Layout::Write => ("write", READ_UNLOCK_MESSAGE),
    };
    let extra = extra_key.unwrap_or(op.key);
    call!(TRIM; op.key, op.channel, extra;
        op.field, target, op.lease_ms, op.publish, message, layout)
}

/// KEYS of every fair-lock script: lock, queue, deadlines.
pub(crate) struct FairKeys<'k> {
    pub(crate) lock: &'k str,
    pub(crate) queue: &'k str,
    pub(crate) timeouts: &'k str,
    pub(crate) channel: &'k str,
}

/// `reentrant: false`: the non-reentrant fair lock (a second acquire by the holder is refused
/// with [`REENTRY_ERR`]).
pub(crate) fn fair_lock(
    k: &FairKeys<'_>,
    lease_ms: u64,
    field: &str,
    (wait_ms, now_ms): (u64, u64),
    enqueue: bool,
    reentrant: bool,
) -> Call {
    let enqueue = if enqueue { "1" } else { "0" };
    let non_reentrant = if reentrant { "0" } else { "1" };
    call!(FAIR_LOCK; k.lock, k.queue, k.timeouts;
        lease_ms, field, wait_ms, now_ms, enqueue, non_reentrant)
}

pub(crate) fn fair_unlock(k: &FairKeys<'_>, op: &Op<'_>) -> Call {
    call!(FAIR_UNLOCK; k.lock, k.queue, k.timeouts, k.channel;
        UNLOCK_MESSAGE, op.lease_ms, op.field, op.now_ms, op.publish)
}

pub(crate) fn fair_cancel(k: &FairKeys<'_>, field: &str, wait_ms: u64, publish: &str) -> Call {
    call!(FAIR_CANCEL; k.queue, k.timeouts, k.lock, k.channel;
        field, wait_ms, publish, UNLOCK_MESSAGE)
}

pub(crate) fn fair_force_unlock(k: &FairKeys<'_>, now_ms: u64, publish: &str, seen: &str) -> Call {
    call!(FAIR_FORCE_UNLOCK; k.lock, k.queue, k.timeouts, k.channel;
        UNLOCK_MESSAGE, now_ms, publish, seen)
}

pub(crate) fn read_lock(
    key: &str,
    timeout_prefix: &str,
    lease_ms: u64,
    field: &str,
    write_field: &str,
) -> Call {
    call!(READ_LOCK; key, timeout_prefix; lease_ms, field, write_field)
}

pub(crate) fn read_unlock(op: &Op<'_>, timeout_prefix: &str, key_prefix: &str) -> Call {
    call!(READ_UNLOCK; op.key, op.channel, timeout_prefix, key_prefix;
        UNLOCK_MESSAGE, op.field, op.publish)
}

pub(crate) fn write_lock(key: &str, lease_ms: u64, field: &str) -> Call {
    call!(WRITE_LOCK; key; lease_ms, field)
}

pub(crate) fn write_unlock(op: &Op<'_>) -> Call {
    call!(WRITE_UNLOCK; op.key, op.channel;
        READ_UNLOCK_MESSAGE, op.lease_ms, op.field, op.publish)
}

/// `mode`: `read` or `write`.
pub(crate) fn rw_force_unlock(
    key: &str,
    channel: &str,
    mode: &str,
    publish: &str,
    seen: &str,
) -> Call {
    let message = if mode == "write" {
        READ_UNLOCK_MESSAGE
    } else {
        UNLOCK_MESSAGE
    };
    call!(RW_FORCE_UNLOCK; key, channel; mode, message, publish, seen)
}

pub(crate) fn rw_is_locked(key: &str, mode: &str) -> Call {
    call!(RW_IS_LOCKED; key; mode)
}

mod sync;
pub(crate) use sync::*;

#[cfg(test)]
mod tests {
    /// A batched script reads its keys and arguments by literal index only (`KEYS[2]`, not
    /// `KEYS[i]` or `#ARGV`): the batch rewrites those to offsets into its own call.
    #[test]
    fn batched_scripts_read_keys_and_arguments_by_literal_index() {
        for (_, body) in super::BATCHED.iter() {
            let code: String = body
                .lines()
                .map(|l| l.split_once("--").map_or(l, |(code, _)| code))
                .collect::<Vec<_>>()
                .join("\n");
            let rewritten = super::at_offsets(&code);
            let left = rewritten.replace("KEYS[k + ", "").replace("ARGV[a + ", "");
            assert!(
                !left.contains("KEYS") && !left.contains("ARGV"),
                "a key or argument read other than by literal index in:\n{body}"
            );
            assert!(rewritten.contains("KEYS[k + 1]"), "reads its lock key");
        }
        assert_eq!(
            super::at_offsets("redis.call('del', KEYS[12], ARGV[3]) -- KEYS ARGV[x] KEYS[]"),
            "redis.call('del', KEYS[k + 12], ARGV[a + 3]) -- KEYS ARGV[x] KEYS[]"
        );
    }

    /// Pins every script's SHA1 (`lua/SHA1SUMS`, checkable with `cd lua && sha1sum -c
    /// SHA1SUMS`): editing a Redisson-compatible script must be deliberate, and must come with a
    /// reviewed update of that file.
    #[test]
    fn script_hashes_are_pinned() {
        let pinned: Vec<(&str, &str)> = include_str!("../../lua/SHA1SUMS")
            .lines()
            .map(|line| {
                let (sha, file) = line.split_once("  ").expect("sha1sum format");
                (file, sha)
            })
            .collect();
        // The batch dispatcher is pinned as a file (the script sent is built around it).
        let dispatcher = redis::Script::new(include_str!("../../lua/batch.lua"));
        let mut all = super::all();
        all.push(("batch.lua", &dispatcher));
        assert_eq!(all.len(), pinned.len(), "every script is pinned");
        for ((file, script), (pfile, sha)) in all.into_iter().zip(pinned) {
            assert_eq!(file, pfile);
            assert_eq!(script.get_hash(), sha, "lua/{file} changed");
        }
    }
}
