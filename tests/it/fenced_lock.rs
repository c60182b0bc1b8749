//! FencedLock (Redisson's RFencedLock): an RLock whose every acquisition takes a token from
//! `redisson_lock_token:{<name>}`; tokens strictly increase across holders and re-entries, so a
//! resource can reject a stale holder.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::redisson::channel;
use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

/// Generous bound for anything event-driven (a wake-up, a release).
const WAIT: Duration = Duration::from_secs(10);
/// Long enough for a message that should *not* come to show up if it were sent.
const QUIET: Duration = Duration::from_millis(300);

fn token_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

async fn token(raw: &mut MultiplexedConnection, name: &str) -> Option<i64> {
    raw.get(token_key(name)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_counter_is_bumped_on_every_acquisition_including_reentry() {
    let name = "fenced:layout";
    let (_server, client, mut raw, mut listener) = fixture_listening(&channel(name)).await;
    // An explicit owner: it re-enters through every acquire method, as Redisson's thread does.
    let lock = client
        .get_fenced_lock(name)
        .with_owner(redisson_lock::LockOwner::new(1));

    let g1 = lock.lock().await.unwrap();
    assert_eq!(g1.token(), 1);
    assert_eq!(token(&mut raw, name).await, Some(1));
    let t: String = redis::cmd("TYPE")
        .arg(token_key(name))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(t, "string");
    // The lock itself is the RLock hash.
    let f: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(f, HashMap::from([(field(&client, lock.owner()), 1)]));
    let ttl: i64 = raw.pttl(name).await.unwrap();
    assert!(ttl > 25_000 && ttl <= 30_000, "{ttl}");

    // Re-entry bumps the token too, whichever method takes it.
    let g2 = lock.lock().await.unwrap();
    let g3 = lock.try_lock().await.unwrap().unwrap();
    let g4 = lock
        .try_lock_with_lease(WAIT, Duration::from_secs(20))
        .await
        .unwrap()
        .unwrap();
    assert_eq!([g2.token(), g3.token(), g4.token()], [2, 3, 4]);
    assert_eq!(lock.hold_count().await.unwrap(), 4);
    assert_eq!(token(&mut raw, name).await, Some(4));

    for g in [g4, g3, g2] {
        g.unlock().await.unwrap();
    }
    assert!(listener.next(QUIET).await.is_none(), "message while held");
    g1.unlock().await.unwrap();
    assert_eq!(listener.next(WAIT).await.as_deref(), Some("0"));
    assert!(!raw.exists::<_, bool>(name).await.unwrap());
    // The counter outlives the lock and never expires.
    assert_eq!(token(&mut raw, name).await, Some(4));
    let ttl: i64 = raw.pttl(token_key(name)).await.unwrap();
    assert_eq!(ttl, -1);

    // A counter a Java client advanced is continued, not restarted.
    let _: () = raw.set(token_key(name), 1000).await.unwrap();
    let g = lock.lock().await.unwrap();
    assert_eq!(g.token(), 1001);
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_across_contending_holders() {
    let (_server, clients) = two_clients().await;
    let name = "fenced:order";
    const TASKS: usize = 2;
    const ROUNDS: usize = 5;
    // Tokens in the order the holds were taken: recorded while holding the lock.
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for client in &clients {
        for _ in 0..TASKS {
            let lock = client.get_fenced_lock(name);
            let seen = seen.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let (outer, inner) = held_twice(&lock).await;
                    seen.lock().extend([outer.token(), inner.token()]);
                    tokio::task::yield_now().await;
                    inner.unlock().await.unwrap();
                    outer.unlock().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(WAIT * 3, t)
            .await
            .expect("contention stalled")
            .unwrap();
    }
    let seen = seen.lock().clone();
    let n = clients.len() * TASKS * ROUNDS * 2;
    assert_eq!(seen.len(), n);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "tokens not strictly increasing: {seen:?}"
    );
    assert_eq!(seen, (1..=n as i64).collect::<Vec<_>>());
}

/// What a fenced resource does: remember the highest token and refuse anything not newer. Each
/// hold writes once here, so an equal token is a second writer with a reissued token (e.g.
/// after the counter was lost) and is refused too.
#[derive(Default)]
struct Storage {
    max_token: i64,
    value: String,
}

impl Storage {
    fn write(&mut self, token: i64, value: &str) -> Result<(), i64> {
        if token <= self.max_token {
            return Err(self.max_token);
        }
        self.max_token = token;
        self.value = value.to_owned();
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holders_token_is_older_and_rejected() {
    let name = "fenced:stale";
    let (server, alice, mut raw, bob) = fixture_with_other().await;
    let mut storage = Storage::default();

    // Alice holds with a short lease, then stalls past it.
    let a = alice
        .get_fenced_lock(name)
        .lock_with_lease(Duration::from_millis(500))
        .await
        .unwrap();
    storage.write(a.token(), "alice 1").unwrap();
    assert!(
        eventually(WAIT, || async {
            let mut raw = server.conn().await;
            !raw.exists::<_, bool>(name).await.unwrap()
        })
        .await
    );
    // Bob takes over with a newer token and writes.
    let b = bob.get_fenced_lock(name).lock().await.unwrap();
    assert!(b.token() > a.token());
    storage.write(b.token(), "bob").unwrap();
    // Alice wakes up and tries to write under her old hold: refused.
    assert!(a.is_lost());
    assert_eq!(storage.write(a.token(), "alice 2"), Err(b.token()));
    // A token equal to the newest (a reissued one) is refused as well.
    assert_eq!(storage.write(b.token(), "bob again"), Err(b.token()));
    assert_eq!(storage.value, "bob");
    assert!(a.unlock().await.unwrap_err().is_lease_lost());
    // Bob's hold is untouched by Alice's late unlock.
    let f: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(f, HashMap::from([(field(&bob, b.owner()), 1)]));
    b.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_and_plain_locks_on_one_name_exclude_each_other() {
    let name = "fenced:mixed";
    let (_server, client, mut raw, other) = fixture_with_other().await;

    let fenced = client.get_fenced_lock(name).lock().await.unwrap();
    assert!(other.get_lock(name).try_lock().await.unwrap().is_none());
    fenced.unlock().await.unwrap();

    // A plain RLock (Java's `getLock` on the same name) excludes the fenced lock, takes no
    // token, and its release wakes a fenced waiter on the shared channel.
    let plain = other.get_lock(name).lock().await.unwrap();
    let before = token(&mut raw, name).await;
    assert!(client
        .get_fenced_lock(name)
        .try_lock()
        .await
        .unwrap()
        .is_none());
    let fl = client.get_fenced_lock(name);
    let waiter = tokio::spawn(async move {
        let g = fl.lock().await.unwrap();
        let t = g.token();
        g.unlock().await.unwrap();
        t
    });
    tokio::time::sleep(QUIET).await;
    assert!(!waiter.is_finished(), "fenced lock taken under an RLock");
    assert_eq!(token(&mut raw, name).await, before, "RLock took a token");
    plain.unlock().await.unwrap();
    let t = tokio::time::timeout(WAIT, waiter)
        .await
        .expect("fenced waiter not woken by the RLock release")
        .unwrap();
    assert_eq!(Some(t), before.map(|b| b + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_takes_no_token_and_cancelled_waits_hold_nothing() {
    let (server, client, mut raw) = fixture().await;
    let lock = client.get_fenced_lock("fenced:bad");
    assert_zero_lease_refused(&lock, WAIT).await;

    let _: () = raw.set("fenced:bad", "not a lock").await.unwrap();
    assert!(lock.lock().await.unwrap_err().is_wrong_type());
    assert!(lock.try_lock().await.unwrap_err().is_wrong_type());
    assert_eq!(token(&mut raw, "fenced:bad").await, None, "token burnt");

    // A lock() dropped while waiting behind another client holds nothing afterwards.
    let name = "fenced:cancel";
    let held = server
        .client()
        .await
        .get_fenced_lock(name)
        .lock()
        .await
        .unwrap();
    let before: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    let r = tokio::time::timeout(QUIET, client.get_fenced_lock(name).lock()).await;
    assert!(r.is_err());
    let after: HashMap<String, i64> = raw.hgetall(name).await.unwrap();
    assert_eq!(after, before);
    assert_eq!(token(&mut raw, name).await, Some(held.token()));
    held.unlock().await.unwrap();
    assert!(!raw.exists::<_, bool>(name).await.unwrap());
}

/// `current_token` reads the counter without acquiring (Redisson's `getToken`): `None` before
/// the first acquisition, then the latest token issued to anyone, re-entries included; reading
/// it changes nothing. A counter that is not an integer, or not a string, is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_token_reads_the_counter_without_acquiring() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    let name = "fenced:current";
    let lock = client.get_fenced_lock(name);
    assert_eq!(lock.current_token().await.unwrap(), None);
    assert_eq!(token(&mut raw, name).await, None, "the read created it");
    assert!(
        !raw.exists::<_, bool>(name).await.unwrap(),
        "the read locked"
    );

    let outer = lock.lock().await.unwrap();
    assert_eq!(lock.current_token().await.unwrap(), Some(outer.token()));
    let inner = outer.reenter().await.unwrap();
    assert_eq!(lock.current_token().await.unwrap(), Some(inner.token()));
    // Another client's handle reads the same counter, and is not let in by reading.
    let theirs = other.get_fenced_lock(name);
    assert_eq!(theirs.current_token().await.unwrap(), Some(inner.token()));
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let last = inner.token();
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    // Releases leave the counter alone.
    assert_eq!(theirs.current_token().await.unwrap(), Some(last));
    let next = theirs.lock().await.unwrap();
    assert_eq!(next.token(), last + 1);
    assert_eq!(lock.current_token().await.unwrap(), Some(next.token()));
    assert_eq!(token(&mut raw, name).await, Some(next.token()));
    next.unlock().await.unwrap();

    let _: () = raw.set(token_key("fenced:text"), "abc").await.unwrap();
    let e = client
        .get_fenced_lock("fenced:text")
        .current_token()
        .await
        .unwrap_err();
    assert!(
        matches!(e, redisson_lock::LockError::UnexpectedReply { .. }),
        "{e:?}"
    );
    let _: () = raw.sadd(token_key("fenced:set"), "x").await.unwrap();
    let e = client
        .get_fenced_lock("fenced:set")
        .current_token()
        .await
        .unwrap_err();
    assert!(e.is_wrong_type(), "{e:?}");
}
