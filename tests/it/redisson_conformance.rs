//! Conformance with Java Redisson, as data: a scripted sequence in which "Java" (Redisson's own
//! scripts, `crate::support::redisson`, written from the protocol reference, not from our `lua/`) and
//! this crate take turns on one lock, and after every step the table says what Redis must hold
//! (the hash, its TTL range, the latches) and which messages the unlock channel carried. If our
//! scripts changed the data layout, a TTL or a message, a row here fails.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::redisson::{self, ACQUIRE, RENEW, UNLOCK};
use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{LockGuard, LockOwner, Reentrant};

/// What one step does.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Java's acquire script with this lease.
    JavaLock(u64),
    /// Java's unlock script with this lease to re-apply and this request id.
    JavaUnlock(u64, &'static str),
    /// Java's (≤3.43) renewal of its own hold to this lease.
    JavaRenew(u64),
    /// Our `try_lock()` (watchdog lease), kept as a guard.
    RustTryLock,
    /// Our `lock_with_lease` (fixed lease), kept as a guard.
    RustLockLease(u64),
    /// Our release of the latest guard.
    RustUnlock,
    /// Our `force_unlock()`.
    RustForceUnlock,
    /// Shorten the key's TTL by hand (a stand-in for time passing).
    Pexpire(u64),
    /// Our watchdog's renewal pass.
    RustRenew,
}

/// What Redis and the channel look like after it.
struct Step {
    act: Act,
    /// The script's reply (Java) or our outcome, as text: `nil`, a number, `ttl>0`, `taken`,
    /// `busy`, `ok`, `true`.
    reply: &'static str,
    /// The hash: (owner, count); owner `J` is Java's field, `R` ours. Empty: no key.
    hash: &'static [(&'static str, i64)],
    /// PTTL bounds (ms), when the key exists.
    ttl: (i64, i64),
    /// Latches that must exist with this stored value: (request id, value).
    latches: &'static [(&'static str, &'static str)],
    /// Messages on `redisson_lock__channel:{name}` caused by this step.
    messages: &'static [&'static str],
}

const J: &str = "9f6c3a2e-1111-4222-8333-944455556666:1";
const REQ1: &str = "0123456789abcdef0123456789abcdef";
const REQ2: &str = "fedcba9876543210fedcba9876543210";
const REQ3: &str = "00000000000000000000000000000003";

#[rustfmt::skip]
const STEPS: &[Step] = &[
    // Java takes the lock for 30 s: nil, one field, count 1, PTTL = lease; no message.
    Step { act: Act::JavaLock(30_000), reply: "nil", hash: &[("J", 1)], ttl: (29_000, 30_000), latches: &[], messages: &[] },
    // Java re-enters with 60 s: count 2, PTTL reset to the new lease.
    Step { act: Act::JavaLock(60_000), reply: "nil", hash: &[("J", 2)], ttl: (59_000, 60_000), latches: &[], messages: &[] },
    // We try while Java holds: refused, nothing written.
    Step { act: Act::RustTryLock, reply: "busy", hash: &[("J", 2)], ttl: (58_000, 60_000), latches: &[], messages: &[] },
    // Java's inner unlock: 0, count 1, lease re-applied, latch stores 0, no message.
    Step { act: Act::JavaUnlock(60_000, REQ1), reply: "0", hash: &[("J", 1)], ttl: (59_000, 60_000), latches: &[(REQ1, "0")], messages: &[] },
    // The same request again (a retry): the latch answers 0, the count does not move.
    Step { act: Act::JavaUnlock(60_000, REQ1), reply: "0", hash: &[("J", 1)], ttl: (58_000, 60_000), latches: &[(REQ1, "0")], messages: &[] },
    // Java renews (≤3.43 watchdog) to 30 s.
    Step { act: Act::JavaRenew(30_000), reply: "1", hash: &[("J", 1)], ttl: (29_000, 30_000), latches: &[], messages: &[] },
    // Java's final unlock: 1, key deleted, exactly one `0` published, latch stores 1.
    Step { act: Act::JavaUnlock(30_000, REQ2), reply: "1", hash: &[], ttl: (0, 0), latches: &[(REQ2, "1")], messages: &["0"] },
    // We take it with the watchdog: our field `<uuid>:<owner>`, count 1, PTTL 30 s.
    Step { act: Act::RustTryLock, reply: "taken", hash: &[("R", 1)], ttl: (29_000, 30_000), latches: &[], messages: &[] },
    // Java tries: its script answers our PTTL, writes nothing.
    Step { act: Act::JavaLock(30_000), reply: "ttl>0", hash: &[("R", 1)], ttl: (28_000, 30_000), latches: &[], messages: &[] },
    // Java unlocks what it does not hold: nil (IllegalMonitorStateException), nothing changes.
    Step { act: Act::JavaUnlock(30_000, REQ3), reply: "nil", hash: &[("R", 1)], ttl: (28_000, 30_000), latches: &[], messages: &[] },
    // Time passes (TTL down to 5 s); our watchdog renews to the full 30 s, as Java's would.
    Step { act: Act::Pexpire(5_000), reply: "ok", hash: &[("R", 1)], ttl: (4_000, 5_000), latches: &[], messages: &[] },
    Step { act: Act::RustRenew, reply: "ok", hash: &[("R", 1)], ttl: (29_000, 30_000), latches: &[], messages: &[] },
    // We re-enter with a fixed 10 s lease: count 2, the key keeps what the watchdog hold needs.
    Step { act: Act::RustLockLease(10_000), reply: "taken", hash: &[("R", 2)], ttl: (29_000, 30_000), latches: &[], messages: &[] },
    // Our inner release: count 1, no message.
    Step { act: Act::RustUnlock, reply: "ok", hash: &[("R", 1)], ttl: (29_000, 30_000), latches: &[], messages: &[] },
    // Our final release: key deleted, exactly one `0`, which Java's LockPubSub reads as UNLOCK.
    Step { act: Act::RustUnlock, reply: "ok", hash: &[], ttl: (0, 0), latches: &[], messages: &["0"] },
    // Java holds again; our force_unlock deletes it and publishes one `0`, as Redisson's does.
    Step { act: Act::JavaLock(30_000), reply: "nil", hash: &[("J", 1)], ttl: (29_000, 30_000), latches: &[], messages: &[] },
    Step { act: Act::RustForceUnlock, reply: "true", hash: &[], ttl: (0, 0), latches: &[], messages: &["0"] },
];

fn reply_text(v: &redis::Value) -> String {
    match v {
        redis::Value::Nil => "nil".into(),
        redis::Value::Int(n) if *n > 1 => "ttl>0".into(),
        redis::Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// Runs Java's `ACQUIRE` or `RENEW` (KEYS: name; ARGV: lease, Java's owner field) on `name`
/// as the Java client; the reply as step text.
async fn java_lock_script(
    raw: &mut redis::aio::MultiplexedConnection,
    script: &str,
    name: &str,
    lease: u64,
) -> String {
    let v: redis::Value = redis::Script::new(script)
        .key(name)
        .arg(lease)
        .arg(J)
        .invoke_async(raw)
        .await
        .unwrap();
    reply_text(&v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_take_turns_and_redis_holds_what_redisson_expects() {
    let name = "conformance:rlock";
    let (server, client, mut raw) = fixture().await;
    let channel = redisson::channel(name);
    let mut listener = Listener::start(&server, &channel).await;
    let owner = LockOwner::new(42);
    let lock = client.get_lock(name).with_owner(owner);
    let r_field = field(&client, owner);
    let mut guards: Vec<LockGuard<Reentrant>> = Vec::new();

    for (i, step) in STEPS.iter().enumerate() {
        let reply = match step.act {
            Act::JavaLock(lease) => java_lock_script(&mut raw, ACQUIRE, name, lease).await,
            Act::JavaUnlock(lease, request) => {
                let v: redis::Value = redis::Script::new(UNLOCK)
                    .key(name)
                    .key(&channel)
                    .key(redisson::latch(name, request))
                    .arg(0)
                    .arg(lease)
                    .arg(J)
                    .arg("PUBLISH")
                    .arg(20_000)
                    .invoke_async(&mut raw)
                    .await
                    .unwrap();
                reply_text(&v)
            }
            Act::JavaRenew(lease) => java_lock_script(&mut raw, RENEW, name, lease).await,
            Act::RustTryLock => match lock.try_lock().await.unwrap() {
                Some(g) => {
                    guards.push(g);
                    "taken".into()
                }
                None => "busy".into(),
            },
            Act::RustLockLease(ms) => {
                guards.push(
                    lock.lock_with_lease(Duration::from_millis(ms))
                        .await
                        .unwrap(),
                );
                "taken".into()
            }
            Act::RustUnlock => {
                guards.pop().expect("a guard").unlock().await.unwrap();
                "ok".into()
            }
            Act::RustForceUnlock => lock.force_unlock().await.unwrap().to_string(),
            Act::Pexpire(ms) => {
                let _: () = raw.pexpire(name, ms as i64).await.unwrap();
                "ok".into()
            }
            Act::RustRenew => {
                client.renew_now().await;
                "ok".into()
            }
        };
        let at = format!("step {i} ({:?})", step.act);
        assert_eq!(reply, step.reply, "{at}: reply");

        let hash: BTreeMap<String, i64> = raw.hgetall(name).await.unwrap();
        let want: BTreeMap<String, i64> = step
            .hash
            .iter()
            .map(|(who, n)| {
                (
                    if *who == "J" {
                        J.to_owned()
                    } else {
                        r_field.clone()
                    },
                    *n,
                )
            })
            .collect();
        assert_eq!(hash, want, "{at}: hash");
        let ttl: i64 = raw.pttl(name).await.unwrap();
        if want.is_empty() {
            assert_eq!(ttl, -2, "{at}: the key should be gone");
        } else {
            assert!(
                ttl > step.ttl.0 && ttl <= step.ttl.1,
                "{at}: pttl {ttl} not in {:?}",
                step.ttl
            );
        }
        for (request, value) in step.latches {
            let stored: Option<String> = raw.get(redisson::latch(name, request)).await.unwrap();
            assert_eq!(stored.as_deref(), Some(*value), "{at}: latch {request}");
        }
        // Messages: exactly these (anything else within the quiet period fails).
        let mut got = Vec::new();
        for _ in step.messages {
            got.extend(listener.next(Duration::from_secs(5)).await);
        }
        got.extend(listener.next(Duration::from_millis(150)).await);
        assert_eq!(got, step.messages, "{at}: messages on {channel}");
    }
}

/// The last release deletes the field (or the whole hash) without decrementing it to 0 first
/// (`lua/unlock.lua`, `write_unlock.lua`, `fair_unlock.lua`; the end state Java sees is the
/// same): the release runs no `HINCRBY`, one `DEL`/`HDEL` and, for the plain kinds, one
/// `PUBLISH`. A re-entered hold still goes through `HINCRBY -1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_release_deletes_without_decrementing() {
    let (_server, client, mut raw) = fixture().await;
    last_release_skips_the_decrement(client.get_lock("conf:last-rlock"), &mut raw, "del").await;
    last_release_skips_the_decrement(client.get_fenced_lock("conf:last-fenced"), &mut raw, "del")
        .await;
    last_release_skips_the_decrement(client.get_fair_lock("conf:last-fair"), &mut raw, "del").await;
    let rw = client.get_read_write_lock("conf:last-rw");
    last_release_skips_the_decrement(rw.write_lock(), &mut raw, "hdel").await;
    let rw = client.get_read_write_lock("conf:last-read");
    last_release_skips_the_decrement(rw.read_lock(), &mut raw, "hdel").await;
}

/// Commands the server ran since the last `CONFIG RESETSTAT`, by name.
async fn calls_since_reset(raw: &mut redis::aio::MultiplexedConnection, cmd: &str) -> u64 {
    let stats = info(raw, "commandstats").await;
    info_field(&stats, &format!("cmdstat_{cmd}"))
        .and_then(|v| v.strip_prefix("calls=")?.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

async fn reset_stats(raw: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(raw)
        .await
        .unwrap();
}

async fn last_release_skips_the_decrement<K: redisson_lock::LockKind>(
    lock: redisson_lock::Lock<K>,
    raw: &mut redis::aio::MultiplexedConnection,
    delete: &str,
) {
    let name = lock.name().to_owned();
    // Twice held: the inner release decrements, the outer (last) one deletes.
    let (outer, inner) = held_twice(&lock).await;
    reset_stats(raw).await;
    inner.unlock().await.unwrap();
    assert_eq!(
        calls_since_reset(raw, "hincrby").await,
        1,
        "{name}: inner release"
    );
    reset_stats(raw).await;
    outer.unlock().await.unwrap();
    assert_eq!(
        calls_since_reset(raw, "hincrby").await,
        0,
        "{name}: last release"
    );
    assert_eq!(calls_since_reset(raw, delete).await, 1, "{name}: {delete}");
    assert!(!lock.is_locked().await.unwrap(), "{name} still locked");
}
