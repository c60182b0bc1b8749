//! `PermitExpirableSemaphore` (Redisson's `RPermitExpirableSemaphore`): ids and leases, expired
//! permits returning to the pool, unknown ids, the layout a Java client sees (Java's own
//! scripts acquire and release against ours), wake-ups, cancellation.

use std::time::Duration;

use crate::support::redisson::{
    self, eval_bytes, hex, now_ms, pes_timeouts, sem_channel, unhex, NON_EXPIRABLE,
};
use crate::support::*;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_lock::{LockError, PermitId};

/// Generous bound for anything event-driven; shorter than the 30 s re-check, so a waiter that
/// is woken neither by the message nor by the earliest lease's end fails the test.
const WAIT: Duration = Duration::from_secs(15);
/// How long a message that should not come is given to show up.
const QUIET: Duration = Duration::from_millis(500);

/// The timeout ZSET as (hex id, score).
async fn held(raw: &mut MultiplexedConnection, name: &str) -> Vec<(String, u64)> {
    let v: Vec<(Vec<u8>, u64)> = raw
        .zrange_withscores(pes_timeouts(name), 0, -1)
        .await
        .unwrap();
    v.into_iter().map(|(id, s)| (hex(&id), s)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_have_ids_and_leases() {
    let name = "pes:api";
    let (_server, client, mut raw) = fixture().await;
    let sem = client.get_permit_expirable_semaphore(name);

    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert!(sem.try_acquire().await.unwrap().is_none());
    assert!(sem.try_set_permits(2).await.unwrap());
    assert!(!sem.try_set_permits(5).await.unwrap());
    let forever = sem.acquire().await.unwrap();
    let before = now_ms();
    let leased = sem
        .with_lease(Duration::from_secs(60))
        .try_acquire()
        .await
        .unwrap()
        .expect("a second permit");
    assert_ne!(forever, leased);
    assert!(sem
        .try_acquire_for(Duration::from_millis(50))
        .await
        .unwrap()
        .is_none());
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));

    // Redisson's layout: 16-byte members, lease end in epoch ms, or the "never" score.
    let mut rows = held(&mut raw, name).await;
    rows.sort_by_key(|r| r.1);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].0, leased.as_str());
    assert!(
        rows[0].1 >= before + 60_000 && rows[0].1 <= now_ms() + 60_000,
        "{rows:?}"
    );
    assert_eq!(
        rows[1],
        (forever.to_string(), NON_EXPIRABLE.parse().unwrap())
    );

    // Leases move; `None` makes a permit permanent.
    assert!(sem.update_lease_time(&leased, None).await.unwrap());
    assert!(held(&mut raw, name)
        .await
        .iter()
        .all(|r| r.1.to_string() == NON_EXPIRABLE));
    assert!(sem
        .update_lease_time(&forever, Some(Duration::from_secs(90)))
        .await
        .unwrap());

    sem.release(&forever).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert!(
        !sem.update_lease_time(&forever, None).await.unwrap(),
        "released"
    );
    assert!(sem.try_release(&leased).await.unwrap());
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("2"));
    assert!(held(&mut raw, name).await.is_empty());
    assert!(sem.delete().await.unwrap());
    let all: Vec<String> = raw.keys("*").await.unwrap();
    assert!(all.is_empty(), "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ids_and_bad_leases_change_nothing() {
    let name = "pes:bad";
    let (server, _client, mut raw, sem) = pes_fixture(name, 2).await;
    let id = sem.acquire().await.unwrap();
    let mut messages = Listener::start(&server, &sem_channel(name)).await;

    let stranger = PermitId::parse("00112233445566778899aabbccddeeff").unwrap();
    let e = sem.release(&stranger).await.unwrap_err();
    assert!(matches!(e, LockError::UnknownPermit { .. }), "{e:?}");
    assert!(e.is_invalid_argument());
    assert!(!sem.try_release(&stranger).await.unwrap());
    assert!(!sem.update_lease_time(&stranger, None).await.unwrap());
    let e = sem.with_lease(Duration::ZERO).acquire().await.unwrap_err();
    assert!(matches!(e, LockError::InvalidArgument(_)), "{e:?}");
    let e = sem
        .update_lease_time(&id, Some(Duration::ZERO))
        .await
        .unwrap_err();
    assert!(e.is_invalid_argument());
    assert!(PermitId::parse("not-an-id").is_err());
    assert!(PermitId::parse(&"z".repeat(32)).is_err());

    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("1"));
    assert_eq!(
        held(&mut raw, name).await,
        vec![(id.to_string(), NON_EXPIRABLE.parse().unwrap())]
    );
    // Released twice: the second is refused and publishes nothing.
    sem.release(&id).await.unwrap();
    assert!(sem.release(&id).await.unwrap_err().is_invalid_argument());
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("2"));
    assert!(messages.next(Duration::from_millis(100)).await.is_none());
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_permits_return_to_the_pool() {
    let name = "pes:expiry";
    let (server, client, mut raw) = fixture().await;
    let timeouts = pes_timeouts(name);
    let sem = client.get_permit_expirable_semaphore(name);
    sem.try_set_permits(1).await.unwrap();
    let mut messages = Listener::start(&server, &sem_channel(name)).await;

    // Time passing, by hand: the permit's lease ended a second ago.
    let id = sem
        .with_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    let past = now_ms() - 1_000;
    let _: () = raw.zadd(&timeouts, unhex(id.as_str()), past).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("1"));
    assert!(held(&mut raw, name).await.is_empty());
    assert!(!sem.try_release(&id).await.unwrap(), "reclaimed already");
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("1"));

    // An expired permit released before anyone reclaimed it: back in the pool, reported false.
    let id = sem
        .with_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    let _: () = raw
        .zadd(&timeouts, unhex(id.as_str()), now_ms() - 1_000)
        .await
        .unwrap();
    assert!(!sem.try_release(&id).await.unwrap());
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("1"));

    // A waiter is woken when the holder's lease ends (expiry publishes nothing). Its own wait
    // budget is longer than the test's bound, so only the lease-end wake-up can pass.
    let _holder = sem
        .with_lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    messages.drain();
    let s = sem.clone();
    let waiting = tokio::spawn(async move { s.try_acquire_for(WAIT * 2).await });
    let got = finished(waiting, WAIT, "not woken when the holder's lease ended").await;
    assert!(got.is_some());
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
}

/// Java's `tryAcquire` of one permit with id `id_hex` and a lease ending at `expire_at` (ms),
/// run with its own script; the reply as Java would read it.
async fn java_try_acquire(
    raw: &mut MultiplexedConnection,
    name: &str,
    id_hex: &str,
    expire_at: &str,
) -> redis::Value {
    let now = now_ms().to_string();
    eval_bytes(
        raw,
        redisson::PES_TRY_ACQUIRE,
        &[name, &pes_timeouts(name), &sem_channel(name)],
        &[
            b"1",
            expire_at.as_bytes(),
            now.as_bytes(),
            NON_EXPIRABLE.as_bytes(),
            b"PUBLISH",
            &unhex(id_hex),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_share_permits() {
    let name = "pes:java";
    let (server, client, mut raw) = fixture().await;
    let timeouts = pes_timeouts(name);
    let channel = sem_channel(name);
    let sem = client.get_permit_expirable_semaphore(name);
    assert!(sem.try_set_permits(2).await.unwrap());
    let mut messages = Listener::start(&server, &channel).await;

    // Java takes a permit with a lease (its own script, a 16-byte id).
    let java_id = "0123456789abcdef0123456789abcdef";
    let expire_at = (now_ms() + 60_000).to_string();
    let reply = java_try_acquire(&mut raw, name, java_id, &expire_at).await;
    assert_eq!(reply, redis::Value::BulkString(b"OK".to_vec()));
    // We take the other one; then Java finds none, and tells the earliest expiry (its lease).
    let ours = sem.acquire().await.unwrap();
    let reply = java_try_acquire(
        &mut raw,
        name,
        "ffffffffffffffffffffffffffffffff",
        &expire_at,
    )
    .await;
    assert_eq!(
        reply,
        redis::Value::BulkString(format!(":{expire_at}").into_bytes())
    );
    assert_eq!(sem.available_permits().await.unwrap(), 0);

    // Java releases our permit by its hex id; we release Java's.
    let now = now_ms().to_string();
    let reply = eval_bytes(
        &mut raw,
        redisson::PES_TRY_RELEASE,
        &[name, &channel, &timeouts],
        &[&unhex(ours.as_str()), b"1", now.as_bytes(), b"PUBLISH"],
    )
    .await;
    assert_eq!(reply, redis::Value::Int(1));
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("1"));
    sem.release(&PermitId::parse(java_id).unwrap())
        .await
        .unwrap();
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("2"));
    // Java's availablePermits reads our count.
    let now = now_ms().to_string();
    let reply = eval_bytes(
        &mut raw,
        redisson::PES_AVAILABLE,
        &[name, &timeouts, &channel],
        &[now.as_bytes(), b"PUBLISH"],
    )
    .await;
    assert_eq!(reply, redis::Value::BulkString(b"2".to_vec()));

    // Our permit with a lease, where Java's script would put it; the zset takes the count's
    // TTL as in Java.
    let _: () = raw.pexpire(name, 600_000).await.unwrap();
    let id = sem
        .with_lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    let score: Option<u64> = raw.zscore(&timeouts, unhex(id.as_str())).await.unwrap();
    assert!(score.is_some_and(|s| s > now_ms() + 50_000), "{score:?}");
    let ttl = pttl(&mut raw, &timeouts).await;
    assert!(ttl > 500_000 && ttl <= 600_000, "{ttl}");
    assert_eq!(key_type(&mut raw, &timeouts).await, "zset");
    assert!(messages.drain().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_another_clients_release() {
    let (server, [waiter_client, other]) = two_clients().await;
    let name = "pes:wake";
    let holder = other.get_permit_expirable_semaphore(name);
    holder.try_set_permits(1).await.unwrap();
    let id = holder.acquire().await.unwrap();

    let sem = waiter_client.get_permit_expirable_semaphore(name);
    let release = async { holder.release(&id).await.unwrap() };
    let waiting = async move { sem.acquire().await };
    let got = woken_by_release(&server, &sem_channel(name), WAIT, waiting, release).await;
    let mut raw = server.conn().await;
    assert_eq!(
        held(&mut raw, name).await,
        vec![(got.to_string(), NON_EXPIRABLE.parse().unwrap())]
    );
}

/// The acquire script is held in flight (writes paused) and its caller dropped: the permit it
/// takes must be released again, by its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_taken_for_a_dropped_acquire_is_released() {
    let name = "pes:cancel";
    let (server, _client, mut raw, sem) = pes_fixture(name, 1).await;
    let mut messages = Listener::start(&server, &sem_channel(name)).await;

    pause_writes(&mut raw, 1_000).await;
    let s = sem.clone();
    let acquiring =
        tokio::spawn(async move { s.with_lease(Duration::from_secs(600)).acquire().await });
    assert!(
        script_parked(&server).await,
        "the acquire never reached the server"
    );
    acquiring.abort();
    assert!(writes_resumed(&server, WAIT).await);
    assert_eq!(
        messages.next(WAIT).await.as_deref(),
        Some("1"),
        "not given back"
    );
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("1"));
    assert!(held(&mut raw, name).await.is_empty());

    // A cancelled wait leaves nothing either (the listener is the channel's other subscriber).
    let id = sem.acquire().await.unwrap();
    let s = sem.clone();
    let waiting = parked_on(
        &server,
        &sem_channel(name),
        2,
        async move { s.acquire().await },
    )
    .await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert!(channel_subscribers(&server, &sem_channel(name), 1).await);
    assert_eq!(held(&mut raw, name).await.len(), 1);
    sem.release(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_nothing_behind() {
    let name = "pes:cancel-wait";
    let (server, client, mut raw, sem) = pes_fixture(name, 1).await;
    let holder = sem.acquire().await.unwrap();
    let s = sem.clone();
    let channel = sem_channel(name);
    cancelled_wait_unsubscribes(&server, &client, &channel, async move { s.acquire().await }).await;
    // Only the holder's permit was ever taken; released, the pool is whole again.
    assert_eq!(held(&mut raw, name).await.len(), 1);
    sem.release(&holder).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert!(held(&mut raw, name).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_survives_a_subscriber_kill_and_a_server_restart() {
    let name = "pes:faults";
    let (mut server, client, _raw, sem) = pes_fixture(name, 1).await;
    let holder = sem.acquire().await.unwrap();
    let channel = sem_channel(name);

    // Subscriber connection killed: the waiter is resubscribed and woken by another client's
    // release of the holder's permit.
    let s = sem.clone();
    let waiting = parked_on(&server, &channel, 1, async move { s.acquire().await }).await;
    kill_and_resubscribe(&server, &client, &channel).await;
    let other = server.client().await;
    other
        .get_permit_expirable_semaphore(name)
        .release(&holder)
        .await
        .unwrap();
    let first = finished(
        waiting,
        WAIT,
        "waiter not woken after the subscriber came back",
    )
    .await;
    let mut raw = server.conn().await;
    assert_eq!(
        held(&mut raw, name).await,
        vec![(first.to_string(), NON_EXPIRABLE.parse().unwrap())]
    );

    // Server restarted empty (every permit gone with it): the waiter reconnects and takes the
    // permit set afterwards by another client.
    let s = sem.clone();
    let waiting = parked_on(&server, &channel, 1, async move { s.acquire().await }).await;
    tokio::task::block_in_place(|| server.restart());
    assert!(
        channel_subscribers(&server, &channel, 1).await,
        "not resubscribed after the restart"
    );
    let other = server.client().await;
    assert!(other
        .get_permit_expirable_semaphore(name)
        .try_set_permits(1)
        .await
        .unwrap());
    let second = finished(waiting, WAIT, "waiter not woken after the restart").await;
    let mut raw = server.conn().await;
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("0"));
    assert_eq!(
        held(&mut raw, name).await,
        vec![(second.to_string(), NON_EXPIRABLE.parse().unwrap())]
    );
}

/// `add_permits` does what Java's `addPermits` does to the same data (compared key by key and
/// message by message), keeps the permits held, and a positive amount wakes a waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_permits_grows_and_shrinks_the_pool_as_java_does() {
    let (server, client, mut raw) = fixture().await;
    let (ours, java) = ("pes:add-ours", "pes:add-java");
    let sem = client.get_permit_expirable_semaphore(ours);
    let mut our_messages = Listener::start(&server, &sem_channel(ours)).await;
    let mut java_messages = Listener::start(&server, &sem_channel(java)).await;
    for amount in [2, -3, 4] {
        sem.add_permits(amount).await.unwrap();
        let _ = eval_bytes(
            &mut raw,
            redisson::PES_ADD,
            &[java, &sem_channel(java)],
            &[amount.to_string().as_bytes(), b"PUBLISH"],
        )
        .await;
        assert_eq!(get_str(&mut raw, ours).await, get_str(&mut raw, java).await);
        // A message is awaited as an event; its absence for the time a message takes.
        let within = if amount > 0 { WAIT } else { QUIET };
        let (a, b) = (
            our_messages.next(within).await,
            java_messages.next(within).await,
        );
        assert_eq!(a, b, "after adding {amount}");
        assert_eq!(a.is_some(), amount > 0, "published only when positive");
    }
    assert_eq!(get_str(&mut raw, ours).await.as_deref(), Some("3"));
    // A TTL on the count is cleared, as Java's SET does; permits held keep their leases.
    let held_id = sem
        .with_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    let _: () = raw.pexpire(ours, 60_000).await.unwrap();
    sem.add_permits(1).await.unwrap();
    assert_eq!(pttl(&mut raw, ours).await, -1);
    assert_eq!(held(&mut raw, ours).await.len(), 1);
    assert_eq!(sem.available_permits().await.unwrap(), 3);

    // A waiter on an empty pool is woken by another client's add.
    sem.add_permits(-3).await.unwrap();
    let s = sem.clone();
    let waiting = parked_on(
        &server,
        &sem_channel(ours),
        2,
        async move { s.acquire().await },
    )
    .await;
    let other = server.client().await;
    other
        .get_permit_expirable_semaphore(ours)
        .add_permits(1)
        .await
        .unwrap();
    let got = finished(waiting, WAIT, "waiter not woken by add_permits").await;
    assert_ne!(got, held_id);
    assert_eq!(held(&mut raw, ours).await.len(), 2);
}

/// A permit released after its lease ran out, before anything reclaimed it, goes back to the
/// pool (its count published) and is reported as not released, as Redisson's `tryRelease`
/// (its script answers 0 there, `EVAL_BOOLEAN` false) and `release` (which throws
/// `IllegalArgumentException`) do: ours answers `false` and `UnknownPermit`, Java's own script
/// on the same data answers 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_released_after_its_lease_is_returned_and_reported_as_java_does() {
    let name = "pes:late-release";
    let (server, client, mut raw) = fixture().await;
    let (timeouts, channel) = (pes_timeouts(name), sem_channel(name));
    let sem = client.get_permit_expirable_semaphore(name);
    sem.try_set_permits(3).await.unwrap();
    let leased = sem.with_lease(Duration::from_secs(600));
    let (a, b, c) = (
        leased.acquire().await.unwrap(),
        leased.acquire().await.unwrap(),
        leased.acquire().await.unwrap(),
    );
    // Time passing, by hand: every lease ended a second ago.
    for id in [&a, &b, &c] {
        let past = now_ms() - 1_000;
        let _: () = raw.zadd(&timeouts, unhex(id.as_str()), past).await.unwrap();
    }
    let mut messages = Listener::start(&server, &channel).await;

    assert!(!sem.try_release(&a).await.unwrap());
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("1"));
    let e = sem.release(&b).await.unwrap_err();
    assert!(
        matches!(e, LockError::UnknownPermit { .. }) && e.is_invalid_argument(),
        "{e:?}"
    );
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("2"));
    let now = now_ms().to_string();
    let java = eval_bytes(
        &mut raw,
        redisson::PES_TRY_RELEASE,
        &[name, &channel, &timeouts],
        &[&unhex(c.as_str()), b"1", now.as_bytes(), b"PUBLISH"],
    )
    .await;
    assert_eq!(java, redis::Value::Int(0), "Java's tryRelease: false");
    assert_eq!(messages.next(WAIT).await.as_deref(), Some("3"));
    assert!(held(&mut raw, name).await.is_empty());
    assert_eq!(get_str(&mut raw, name).await.as_deref(), Some("3"));
    // Released already: now unknown, and nothing more is published.
    assert!(!sem.try_release(&a).await.unwrap());
    assert!(messages.next(QUIET).await.is_none());
}
