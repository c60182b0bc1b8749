//! Fault injection on the *network* between a client and redis-server, through the test proxy
//! (`tests/it/support/proxy.rs`): blackholed renewals, a killed subscriber connection, replies
//! dropped after the server ran the request, and acquires cancelled under delay.
//! Scenarios T8 (in-process), T13, T15, T16 of docs/reliability.md.

use std::time::{Duration, Instant};

use crate::support::proxy::{proxied, Mode};
use crate::support::*;
use crate::support::{exists_on as exists, numsub_on as numsub};
use redis::AsyncCommands;
use redisson_lock::{Client, Config, LockOwner};

const BOUND: Duration = Duration::from_secs(30);
/// SHA1 of a script in lua/: how the proxy recognises an acquire or a release on the wire
/// (`EVALSHA <sha> ...`). Computed from the file, so editing a script cannot silently disarm
/// the proxy's trap.
fn sha_of(script: &str) -> Vec<u8> {
    redis::Script::new(script).get_hash().as_bytes().to_vec()
}

fn lock_sha() -> Vec<u8> {
    sha_of(include_str!("../../lua/lock.lua"))
}

fn unlock_sha() -> Vec<u8> {
    sha_of(include_str!("../../lua/unlock.lua"))
}

/// The toy fenced resource (as in tests/holder/src/main.rs): accept a write only with a token above
/// the highest seen.
const FENCED_WRITE: &str = r"
local max = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) <= max then return 0 end
redis.call('set', KEYS[1], ARGV[1])
return 1
";

async fn fenced_write(server: &TestServer, key: &str, token: i64) -> bool {
    let mut c = server.conn().await;
    let accepted: i64 = redis::Script::new(FENCED_WRITE)
        .key(key)
        .arg(token)
        .invoke_async(&mut c)
        .await
        .unwrap();
    accepted == 1
}

async fn hget(server: &TestServer, key: &str, field: &str) -> i64 {
    let mut c = server.conn().await;
    let v: Option<i64> = c.hget(key, field).await.unwrap();
    v.unwrap_or(0)
}

/// The lost-reply tests' client: a 2 s reply timeout, up to 4 attempts.
fn retrying(config: Config) -> Config {
    config
        .with_response_timeout(Duration::from_secs(2))
        .with_retry_attempts(4)
}

/// Runs one lock/unlock cycle so the lock and unlock scripts are in the server's script cache:
/// the trap must catch the real `EVALSHA`, not a first `NOSCRIPT` round.
async fn warm_up(client: &Client) {
    let l = client.get_lock("fault:warm-up");
    take_and_release_with_lease(&l, Duration::from_secs(5)).await;
}

/// T8, in process: the holder's renewals are blackholed (a partition, or a stalled holder
/// process as far as Redis can tell). Its lease runs out and another client takes the lock with
/// a higher fencing token. The old guard must already report the hold lost by then (its
/// validity ended with its last renewal), the fenced resource must reject its stale write, and
/// its release must report the lease lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackholed_renewals_lose_the_hold_and_fencing_rejects_the_stale_writer() {
    let lease = Duration::from_millis(4000);
    let timeout = Duration::from_millis(1000);
    let (server, proxy, stale_client) = proxied(|c| fail_fast(c, lease, timeout)).await;
    let fresh_client = server.client().await;
    let name = "fault:blackhole-renewals";
    let resource = "fault:blackhole-renewals:resource";

    let stale = stale_client.get_fenced_lock(name).lock().await.unwrap();
    assert!(fenced_write(&server, resource, stale.token()).await);
    // Renewals keep it alive past its lease.
    tokio::time::sleep(lease + lease / 2).await;
    let mut raw = server.conn().await;
    let pttl: i64 = raw.pttl(name).await.unwrap();
    assert!(
        !stale.is_lost() && pttl > 0,
        "not renewed before any fault: pttl {pttl}, {:?}",
        stale_client.stats()
    );

    proxy.set(Mode::Blackhole);
    let fresh = taken_within(
        &fresh_client.get_fenced_lock(name),
        BOUND,
        "the lease of the partitioned holder never ran out",
    )
    .await;
    // By the time anyone else can hold the lock, the old guard says it is lost.
    assert!(
        stale.is_lost(),
        "a second holder acquired while the first guard still believed it held the lock"
    );
    tokio::time::timeout(BOUND, stale.lost())
        .await
        .expect("lost() did not resolve");
    assert!(fresh.token() > stale.token());
    assert!(fenced_write(&server, resource, fresh.token()).await);
    // The stale holder writes anyway (it ignored the signal): fencing rejects it.
    assert!(!fenced_write(&server, resource, stale.token()).await);

    proxy.set(Mode::Pass);
    let err = stale.unlock().await.unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
    // The late renewals, delivered after the partition healed, did not touch the new hold.
    assert_eq!(
        hget(&server, name, &field(&fresh_client, fresh.owner())).await,
        1
    );
    fresh.unlock().await.unwrap();
    assert!(!exists(&server, name).await);
}

/// T13: waiters park on a holder with a long lease; their subscriber connection is killed
/// (`CLIENT KILL TYPE pubsub`) and cannot reconnect while the holder releases, so the release
/// message is lost. When the network comes back, the subscriber reconnects and wakes every
/// waiter: they acquire at once, not after the holder's 120 s TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_acquire_after_their_subscriber_is_killed_and_the_release_missed() {
    let (server, proxy, waiter_client) =
        proxied(|c| c.with_connection_timeout(Duration::from_millis(500))).await;
    let holder_client = server.client().await;
    let name = "fault:pubsub-kill";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let held = holder_client
        .get_lock(name)
        .lock_with_lease(Duration::from_secs(120))
        .await
        .unwrap();

    let (tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let lock = waiter_client.get_lock(name);
            let tx = tx.clone();
            tokio::spawn(async move {
                let g = lock.try_lock_for(Duration::from_secs(100)).await.unwrap();
                let g = g.expect("waiter ran out of time");
                tx.send((i, Instant::now())).unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                g.unlock().await.unwrap();
            })
        })
        .collect();
    assert!(eventually(BOUND, || async { numsub(&server, &channel).await == 1 }).await);
    assert!(subscribed(&waiter_client, 1).await);
    let connections_before = waiter_client.stats().subscriber_connections;

    proxy.set(Mode::Refuse);
    let refused_before = proxy.refused();
    assert!(kill_subscribers(&server).await >= 1);
    assert!(eventually(BOUND, || async { numsub(&server, &channel).await == 0 }).await);
    // The release is published to nobody: the message is lost.
    held.unlock().await.unwrap();
    let released_at = Instant::now();
    // The subscriber retries with backoff while refused, not in a tight loop.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let refused = proxy.refused() - refused_before;
    assert!(
        refused <= 20,
        "{refused} connection attempts in 1.5 s: the subscriber reconnects in a tight loop"
    );

    proxy.set(Mode::Pass);
    let (_, first_at) = tokio::time::timeout(BOUND, acquired.recv())
        .await
        .expect("no waiter acquired after the subscriber came back")
        .unwrap();
    assert!(first_at.duration_since(released_at) < Duration::from_secs(60));
    for w in waiters {
        tokio::time::timeout(BOUND, w).await.unwrap().unwrap();
    }
    for _ in 1..3 {
        assert!(acquired.recv().await.is_some());
    }
    assert!(waiter_client.stats().subscriber_connections > connections_before);
    assert!(
        eventually(BOUND, || async {
            waiter_client.stats().subscribed_channels == 0
                && waiter_client.stats().tracked_holds == 0
        })
        .await
    );
    assert!(!exists(&server, name).await);
}

/// T16, release side: the server runs an unlock, its reply is lost and the connection dies.
/// The client retries with the trim to the count its gate knows Redis must have after the
/// release (no unlock latch): the hold count goes down once, not twice, the retry reports the
/// release (the lease could not have run out), and a final release publishes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_whose_reply_is_dropped_is_applied_exactly_once() {
    let (server, proxy, client) = proxied(retrying).await;
    warm_up(&client).await;
    let name = "fault:drop-unlock";
    let (lock, f) = owned_lock(&client, name, 1);
    let lease = Duration::from_secs(60);
    let g1 = lock.lock_with_lease(lease).await.unwrap();
    let g2 = lock.lock_with_lease(lease).await.unwrap();
    let g3 = lock.lock_with_lease(lease).await.unwrap();
    assert_eq!(hget(&server, name, &f).await, 3);

    // A re-entrant release: 3 -> 2, once.
    proxy.drop_reply_after(&unlock_sha());
    g3.unlock().await.unwrap();
    assert_eq!(proxy.dropped_replies(), 1);
    assert_eq!(hget(&server, name, &f).await, 2);
    g2.unlock().await.unwrap();
    assert_eq!(hget(&server, name, &f).await, 1);

    // The final release: the key goes and `0` is published exactly once.
    let mut listener =
        Listener::start(&server, &format!("redisson_lock__channel:{{{name}}}")).await;
    proxy.drop_reply_after(&unlock_sha());
    g1.unlock().await.unwrap();
    assert_eq!(proxy.dropped_replies(), 2);
    assert!(!exists(&server, name).await);
    assert_eq!(
        listener.next(Duration::from_secs(5)).await.as_deref(),
        Some("0")
    );
    assert_eq!(listener.next(Duration::from_millis(500)).await, None);
    // And the owner-style unlock reports "not owner" afterwards, changing nothing.
    assert!(lock.unlock().await.unwrap_err().is_not_owner());
    assert_no_tracked_holds(&client, BOUND).await;
}

/// T16, acquire side: the server runs an acquire (HINCRBY), its reply is lost. The acquire is
/// never retried blindly; the unknown hold is trimmed back to what the client knows, so the hold
/// count is not inflated and the lock is not leaked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_whose_reply_is_dropped_never_inflates_the_hold_count() {
    let (server, proxy, client) = proxied(retrying).await;
    warm_up(&client).await;
    let name = "fault:drop-acquire";
    let (lock, f) = owned_lock(&client, name, 1);
    let lease = Duration::from_secs(60);

    // A re-entry whose reply is lost: Redis counted 2, the client knows 1. The retry first
    // trims back to 1, then re-enters once: exactly 2 holds for 2 guards, never 3.
    let g1 = lock.lock_with_lease(lease).await.unwrap();
    proxy.drop_reply_after(&lock_sha());
    let g2 = lock
        .lock_with_lease(lease)
        .await
        .expect("the acquire rides out one lost reply");
    assert_eq!(proxy.dropped_replies(), 1);
    assert_eq!(hget(&server, name, &f).await, 2, "hold count inflated");
    g2.unlock().await.unwrap();
    assert_eq!(hget(&server, name, &f).await, 1);
    g1.unlock().await.unwrap();
    assert!(!exists(&server, name).await);

    // A first acquire whose reply is lost: trimmed to nothing, then taken once.
    proxy.drop_reply_after(&lock_sha());
    let g = lock.lock_with_lease(lease).await.unwrap();
    assert_eq!(proxy.dropped_replies(), 2);
    assert_eq!(hget(&server, name, &f).await, 1, "hold count inflated");
    g.unlock().await.unwrap();
    assert!(eventually(BOUND, || async { !exists(&server, name).await }).await);

    // A waiter whose winning acquire loses its reply rides it out: it ends up holding the lock
    // exactly once.
    let other = server.client().await;
    let held = other.get_lock(name).lock_with_lease(lease).await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_lock_with_lease(BOUND, lease).await })
    };
    assert!(subscribed(&client, 1).await);
    proxy.drop_reply_after(&lock_sha());
    held.unlock().await.unwrap();
    let g = finished(waiter, BOUND, "the task did not finish in time")
        .await
        .expect("waiter did not acquire");
    assert_eq!(proxy.dropped_replies(), 3);
    assert_eq!(hget(&server, name, &f).await, 1);
    g.unlock().await.unwrap();
    assert!(!exists(&server, name).await);
    assert_no_tracked_holds(&client, BOUND).await;
}

/// T15: acquires cancelled at many points while the proxy delays every chunk: whatever ran on
/// the server is undone, nothing stays held or renewed, and another client can take the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_cancelled_under_delay_leave_nothing_behind() {
    let (server, proxy, client) =
        proxied(|c| c.with_watchdog_timeout(Duration::from_secs(3))).await;
    warm_up(&client).await;
    let name = "fault:cancel-delay";
    let lock = client.get_lock(name).with_owner(LockOwner::new(1));
    proxy.set(Mode::Delay(Duration::from_millis(60)));
    let mut cancelled = 0;
    for step in 0..12u64 {
        let cut = Duration::from_millis(20 * step + 5);
        let watchdog = step % 2 == 0;
        let r = if watchdog {
            tokio::time::timeout(cut, lock.lock()).await
        } else {
            tokio::time::timeout(cut, lock.lock_with_lease(Duration::from_secs(60))).await
        };
        match r {
            Ok(g) => g.unwrap().unlock().await.unwrap(),
            Err(_) => cancelled += 1,
        }
        assert!(
            eventually(BOUND, || async {
                let s = client.stats();
                !exists(&server, name).await && s.tracked_holds == 0 && s.watched_holds == 0
            })
            .await,
            "cancel after {cut:?}: left behind, stats {:?}",
            client.stats()
        );
    }
    assert!(cancelled >= 3, "the sweep never cancelled in flight");
    proxy.set(Mode::Pass);
    let other = server.client().await;
    let g = other.get_lock(name).try_lock().await.unwrap();
    assert!(g.is_some());
    g.unwrap().unlock().await.unwrap();
}

/// Inside the model: every connection of a client is reset (and reconnects refused) for a
/// moment, shorter than the lease, while it holds a watchdog lock and one of its tasks waits.
/// The client reconnects on its own: the hold is renewed through the new connection and never
/// reported lost, the waiter does not get the lock early, and gets it when it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_connection_reset_is_ridden_out_without_losing_the_hold() {
    let lease = Duration::from_secs(4);
    let timeout = Duration::from_millis(500);
    let (server, proxy, client) = proxied(|c| fail_fast(c, lease, timeout)).await;
    let name = "fault:reset";
    let owner = LockOwner::new(1);
    let guard = client
        .get_lock(name)
        .with_owner(owner)
        .lock()
        .await
        .unwrap();
    let lock = client.get_lock(name).with_owner(LockOwner::new(2));
    let waiter = parked_minute_waiter(&client, lock).await;
    let accepted = proxy.accepted();

    proxy.set(Mode::Reset);
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set(Mode::Pass);
    // Reconnected, and renewed through the new connection for two more leases.
    assert!(eventually(BOUND, || async { proxy.accepted() >= accepted + 2 }).await);
    tokio::time::sleep(lease * 2).await;
    assert!(!guard.is_lost(), "a short reset lost the hold");
    assert_eq!(hget(&server, name, &field(&client, owner)).await, 1);
    let mut raw = server.conn().await;
    let pttl: i64 = raw.pttl(name).await.unwrap();
    assert!(pttl > 0, "pttl {pttl}");
    assert!(!waiter.is_finished(), "the waiter got a held lock");

    guard.unlock().await.unwrap();
    let g = finished(waiter, BOUND, "waiter not woken after the release")
        .await
        .expect("waiter ran out of time");
    g.unlock().await.unwrap();
    assert!(!exists(&server, name).await);
}

/// SHA1 of lua/fair_lock.lua.
fn fair_lock_sha() -> Vec<u8> {
    sha_of(include_str!("../../lua/fair_lock.lua"))
}

/// T16 for the fair lock: a queued waiter's winning acquire loses its reply. It is undone (the
/// lock handed on, not kept twice), the waiter rides it out, both waiters get the lock in turn,
/// never at the same time, and the queue ends empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiter_whose_winning_acquire_loses_its_reply_is_safe() {
    let (server, proxy, via_proxy) = proxied(retrying).await;
    let direct = server.client().await;
    let name = "fault:fair-drop";
    let lease = Duration::from_secs(30);
    // Load the fair scripts into the cache first.
    take_and_release_with_lease(&via_proxy.get_fair_lock(name), lease).await;
    let held = direct
        .get_fair_lock(name)
        .lock_with_lease(lease)
        .await
        .unwrap();
    let inside = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let spawn_waiter = |client: Client| {
        let inside = inside.clone();
        tokio::spawn(async move {
            let g = client
                .get_fair_lock(name)
                .try_lock_with_lease(BOUND, lease)
                .await
                .unwrap()
                .expect("waiter ran out of time");
            let n = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(n, 0, "two holders of a fair lock at once");
            tokio::time::sleep(Duration::from_millis(100)).await;
            inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            g.unlock().await.unwrap();
        })
    };
    let first = spawn_waiter(via_proxy.clone());
    assert!(fair_queue_is(&server, name, 1).await);
    let second = spawn_waiter(direct.clone());
    assert!(fair_queue_is(&server, name, 2).await);

    proxy.drop_reply_after(&fair_lock_sha());
    held.unlock().await.unwrap();
    tokio::time::timeout(BOUND, first).await.unwrap().unwrap();
    tokio::time::timeout(BOUND, second).await.unwrap().unwrap();
    assert_eq!(proxy.dropped_replies(), 1);
    assert!(
        fair_queue_is(&server, name, 0).await,
        "the queue kept an entry"
    );
    assert!(!exists(&server, name).await);
    assert_no_tracked_holds(&via_proxy, BOUND).await;
}

async fn fair_queue_is(server: &TestServer, name: &str, n: usize) -> bool {
    eventually(BOUND, || async {
        let mut c = server.conn().await;
        let len: usize = c
            .llen(format!("redisson_lock_queue:{{{name}}}"))
            .await
            .unwrap();
        len == n
    })
    .await
}

/// T16, release side, for the other kinds whose release went latch-free (read, write, fair; the
/// fenced and spin locks share lua/unlock.lua): a re-entrant release and a final release each
/// lose their reply; each is retried by a trim, reports success, moves the count once, and the
/// final one publishes exactly one message (the spin lock none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_lost_releases_of_every_kind_are_applied_exactly_once() {
    let (server, proxy, client) = proxied(retrying).await;
    let owner = LockOwner::new(7);
    let lease = Duration::from_secs(60);
    let f = field(&client, owner);
    let mut dropped = 0;

    macro_rules! check {
        ($name:expr, $lock:expr, $script:literal, $field:expr, $channel:expr, $message:expr) => {{
            let name: &str = $name;
            let lock = $lock;
            let sha = sha_of(include_str!(concat!("../../lua/", $script)));
            // Warm the script cache so the trap catches the real EVALSHA.
            take_and_release_with_lease(&lock, lease).await;
            let g1 = lock.lock_with_lease(lease).await.unwrap();
            let g2 = lock.lock_with_lease(lease).await.unwrap();
            assert_eq!(hget(&server, name, &$field).await, 2, "{name}");
            let mut listener = Listener::start(&server, &$channel).await;

            proxy.drop_reply_after(&sha);
            g2.unlock().await.unwrap();
            dropped += 1;
            assert_eq!(
                proxy.dropped_replies(),
                dropped,
                "{name}: the trap did not fire"
            );
            assert_eq!(
                hget(&server, name, &$field).await,
                1,
                "{name}: re-entrant release"
            );
            assert!(!g1.is_lost(), "{name}");

            proxy.drop_reply_after(&sha);
            g1.unlock().await.unwrap();
            dropped += 1;
            assert_eq!(
                proxy.dropped_replies(),
                dropped,
                "{name}: the trap did not fire"
            );
            assert!(!exists(&server, name).await, "{name}: not released");
            let message: Option<&str> = $message;
            if let Some(m) = message {
                assert_eq!(
                    listener.next(Duration::from_secs(5)).await.as_deref(),
                    Some(m),
                    "{name}"
                );
            }
            assert_eq!(
                listener.next(Duration::from_millis(300)).await,
                None,
                "{name}: published twice"
            );
        }};
    }

    let name = "fault:drop-unlock:read";
    let rw = client.get_read_write_lock(name);
    check!(
        name,
        rw.read_lock().with_owner(owner),
        "read_unlock.lua",
        f.clone(),
        format!("redisson_rwlock:{{{name}}}"),
        Some("0")
    );
    let name = "fault:drop-unlock:write";
    let rw = client.get_read_write_lock(name);
    check!(
        name,
        rw.write_lock().with_owner(owner),
        "write_unlock.lua",
        format!("{f}:write"),
        format!("redisson_rwlock:{{{name}}}"),
        Some("1")
    );
    let name = "fault:drop-unlock:fenced";
    check!(
        name,
        client.get_fenced_lock(name).with_owner(owner),
        "unlock.lua",
        f.clone(),
        format!("redisson_lock__channel:{{{name}}}"),
        Some("0")
    );
    let name = "fault:drop-unlock:spin";
    check!(
        name,
        client.get_spin_lock(name).with_owner(owner),
        "unlock.lua",
        f.clone(),
        format!("redisson_lock__channel:{{{name}}}"),
        None
    );
    // The fair lock wakes the queue head on its own channel: a waiter from another client.
    let name = "fault:drop-unlock:fair";
    let other = server.client().await;
    let waiter_field = field(&other, LockOwner::new(1));
    check!(
        name,
        client.get_fair_lock(name).with_owner(owner),
        "fair_unlock.lua",
        f.clone(),
        format!("redisson_lock__channel:{{{name}}}:{waiter_field}"),
        None
    );
    let _ = other;
    assert_eq!(
        latch_keys(&server).await,
        Vec::<String>::new(),
        "a release wrote an unlock latch"
    );
    assert_no_tracked_holds(&client, BOUND).await;
}

async fn latch_keys(server: &TestServer) -> Vec<String> {
    let mut c = server.conn().await;
    c.keys("redisson_unlock_latch*").await.unwrap()
}

/// A release whose first try is held up by the network until the lease has really run out
/// (the key expired in Redis), then retried: the retry reports the lost lease, no message is
/// published (nothing was released), and nothing is left behind. With the lease still valid
/// the same lost reply reports success (the test above): the report follows the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_retried_after_the_lease_ran_out_reports_it_lost() {
    let (server, proxy, client) = proxied(|c| {
        c.with_response_timeout(Duration::from_millis(300))
            .with_retry_delay(Duration::from_millis(100))
            .with_retry_attempts(30)
    })
    .await;
    warm_up(&client).await;
    let name = "fault:unlock-after-expiry";
    let lease = Duration::from_millis(1500);
    let lock = client.get_lock(name);
    let guard = lock.lock_with_lease(lease).await.unwrap();
    let taken = Instant::now();
    // Load the trim (the retry) into the script cache as well.
    let mut raw = server.conn().await;
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(include_str!("../../lua/trim.lua"))
        .query_async(&mut raw)
        .await
        .unwrap();
    let mut listener =
        Listener::start(&server, &format!("redisson_lock__channel:{{{name}}}")).await;

    proxy.set(Mode::Blackhole);
    let release = tokio::spawn(async move { guard.unlock().await });
    // The key expires in Redis while the release and its retries are held up.
    assert!(
        eventually(BOUND, || async { !exists(&server, name).await }).await,
        "the lease never ran out"
    );
    assert!(taken.elapsed() >= lease - Duration::from_millis(50));
    proxy.set(Mode::Pass);
    let err = tokio::time::timeout(BOUND, release)
        .await
        .expect("the release never returned")
        .unwrap()
        .unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
    assert_eq!(listener.next(Duration::from_millis(500)).await, None);
    assert!(!exists(&server, name).await);
    assert_eq!(latch_keys(&server).await, Vec::<String>::new());
}
