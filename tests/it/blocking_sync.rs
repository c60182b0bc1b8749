//! The blocking API beyond the single locks: MultiLock/RedLock (threads as owners, guards
//! that release on drop) and the synchronizers (threads woken by another thread's release or
//! count-down, the TTL trio, the semaphore extras, the permit-expirable semaphore's batches),
//! checked against the data in a real server.

use std::time::Duration;

use crate::support::*;
use redis::Commands;
use redisson_lock::blocking::{Client, MultiLock, RedLock};
use redisson_lock::{KeyTtl, LockError, LockOwner};

/// Generous bound for a wake-up on a loaded machine (the event itself is pub/sub).
const WAKE: Duration = Duration::from_secs(30);

#[test]
fn a_multi_lock_is_held_by_the_calling_thread_on_every_node() {
    let (sa, sb) = (TestServer::start(), TestServer::start());
    let (a, b) = (
        Client::connect(&sa.url()).unwrap(),
        Client::connect(&sb.url()).unwrap(),
    );
    let multi: MultiLock =
        MultiLock::new([a.get_lock("bm:orders"), b.get_lock("bm:stock")]).unwrap();
    assert_eq!(multi.required(), 2);
    let guard = multi.lock().unwrap();
    assert_eq!(guard.held_nodes(), vec![0, 1]);
    // Every member is held by this thread, the owner a Java thread would be.
    let me = LockOwner::current();
    let mut ra = sa.raw().get_connection().unwrap();
    let mut rb = sb.raw().get_connection().unwrap();
    let ca: Option<i64> = ra
        .hget("bm:orders", format!("{}:{}", a.id(), me.id()))
        .unwrap();
    let cb: Option<i64> = rb
        .hget("bm:stock", format!("{}:{}", b.id(), me.id()))
        .unwrap();
    assert_eq!((ca, cb), (Some(1), Some(1)));
    assert!(multi.is_held_by_current().unwrap());
    // Another thread is another owner: not held by it, and it cannot take it.
    let other = multi.clone();
    std::thread::spawn(move || {
        assert!(!other.is_held_by_current().unwrap());
        assert!(other.try_lock().unwrap().is_none());
    })
    .join()
    .unwrap();
    // Dropping the guard releases every member before drop returns.
    drop(guard);
    let left: (bool, bool) = (
        ra.exists("bm:orders").unwrap(),
        rb.exists("bm:stock").unwrap(),
    );
    assert_eq!(left, (false, false));
    assert!(!multi.is_held_by_current().unwrap());
    assert!(matches!(
        MultiLock::<redisson_lock::All>::new(Vec::<redisson_lock::blocking::MemberLock>::new()),
        Err(LockError::InvalidArgument(_))
    ));
}

/// The blocking MultiLock mixes kinds too: a fair lock and a write side, each with its own
/// data, held by the calling thread, and a read of the write-locked name refused elsewhere.
#[test]
fn a_multi_lock_mixes_lock_kinds() {
    use redisson_lock::blocking::MemberLock;
    let server = TestServer::start();
    let a = Client::connect(&server.url()).unwrap();
    let multi: MultiLock = MultiLock::new([
        MemberLock::from(a.get_fair_lock("bm:mix:fair")),
        MemberLock::from(a.get_read_write_lock("bm:mix:rw").write_lock()),
    ])
    .unwrap();
    assert_eq!(multi.locks()[1].name(), "bm:mix:rw");
    let guard = multi.lock().unwrap();
    let mut raw = server.raw().get_connection().unwrap();
    let mode: Option<String> = raw.hget("bm:mix:rw", "mode").unwrap();
    assert_eq!(mode.as_deref(), Some("write"));
    assert!(multi.is_held_by_current().unwrap());
    let other = a.clone();
    std::thread::spawn(move || {
        let read = other.get_read_write_lock("bm:mix:rw").read_lock();
        assert!(read.try_lock().unwrap().is_none(), "read vs write");
    })
    .join()
    .unwrap();
    guard.unlock().unwrap();
    let left: (bool, bool) = (
        raw.exists("bm:mix:fair").unwrap(),
        raw.exists("bm:mix:rw").unwrap(),
    );
    assert_eq!(left, (false, false));
}

#[test]
fn a_red_lock_takes_a_majority_and_waits_for_a_release() {
    let servers: Vec<TestServer> = (0..3).map(|_| TestServer::start()).collect();
    let clients: Vec<Client> = servers
        .iter()
        .map(|s| Client::connect(&s.url()).unwrap())
        .collect();
    // Another client holds the member on node 0.
    let intruder = Client::connect(&servers[0].url()).unwrap();
    let blocker = intruder
        .get_lock("bm:red")
        .lock_with_lease(Duration::from_secs(120))
        .unwrap();
    let red = RedLock::new(clients.iter().map(|c| c.get_lock("bm:red"))).unwrap();
    let guard = red
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(60))
        .unwrap()
        .expect("a majority is free");
    assert_eq!(guard.held_nodes(), vec![1, 2]);
    assert_eq!(guard.lease(), Some(Duration::from_secs(60)));
    assert!(guard.remaining_validity().unwrap() <= Duration::from_secs(60));
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    // All three needed by a MultiLock: a thread waits, and the intruder's release lets it in.
    let all: MultiLock = MultiLock::new(clients.iter().map(|c| c.get_lock("bm:red"))).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = all.clone();
    let t = std::thread::spawn(move || {
        let g = waiter.try_lock_for(Duration::from_secs(60)).unwrap();
        tx.send(g.as_ref().map(|g| g.held_nodes())).unwrap();
        if let Some(g) = g {
            g.unlock().unwrap();
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    blocker.unlock().unwrap();
    assert_eq!(rx.recv_timeout(WAKE), Ok(Some(vec![0, 1, 2])));
    t.join().unwrap();
}

#[test]
fn semaphore_waiters_wake_and_the_extras_reach_redis() {
    let server = TestServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let mut raw = server.raw().get_connection().unwrap();
    let sem = client.get_semaphore("bs:sem");
    assert!(sem
        .try_set_permits_with_ttl(1, Duration::from_secs(3600))
        .unwrap());
    let pttl: i64 = raw.pttl("bs:sem").unwrap();
    assert!(pttl > 0 && pttl <= 3_600_000, "pttl {pttl}");
    assert!(matches!(
        sem.remain_time_to_live().unwrap(),
        KeyTtl::Expires(_)
    ));
    assert!(sem.clear_expire().unwrap());
    assert_eq!(sem.remain_time_to_live().unwrap(), KeyTtl::NoExpiry);
    sem.acquire().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 0);
    // A thread blocked on the empty semaphore is woken by this thread's release.
    let (tx, rx) = std::sync::mpsc::channel();
    let other = sem.clone();
    let t = std::thread::spawn(move || {
        let _ = tx.send(other.try_acquire_for(Duration::from_secs(60)));
    });
    std::thread::sleep(Duration::from_millis(200));
    sem.release().unwrap();
    assert!(matches!(rx.recv_timeout(WAKE), Ok(Ok(true))));
    t.join().unwrap();
    let count: i64 = raw.get("bs:sem").unwrap();
    assert_eq!(count, 0);
    assert!(sem.expire(Duration::from_secs(60)).unwrap());
    assert!(sem.release_if_exists(1).unwrap());
    assert_eq!(sem.drain_permits().unwrap(), 1);
    assert!(sem.delete().unwrap());
    // Gone: release_if_exists refuses and creates nothing.
    assert!(!sem.release_if_exists(1).unwrap());
    let exists: bool = raw.exists("bs:sem").unwrap();
    assert!(!exists);
    assert_eq!(sem.remain_time_to_live().unwrap(), KeyTtl::NoKey);
}

#[test]
fn a_thread_waiting_on_a_latch_wakes_at_zero() {
    let server = TestServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let latch = client.get_count_down_latch("bs:latch");
    assert!(latch.try_set_count(2).unwrap());
    assert!(!latch.try_set_count(5).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let other = latch.clone();
    let t = std::thread::spawn(move || {
        let _ = tx.send(other.wait_for(Duration::from_secs(60)));
    });
    latch.count_down().unwrap();
    assert_eq!(latch.get_count().unwrap(), 1);
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "woke at 1"
    );
    latch.count_down().unwrap();
    assert!(matches!(rx.recv_timeout(WAKE), Ok(Ok(true))));
    t.join().unwrap();
    assert_eq!(latch.get_count().unwrap(), 0);
    latch.wait().unwrap();
}

#[test]
fn permit_batches_and_leases_through_the_blocking_semaphore() {
    let server = TestServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let mut raw = server.raw().get_connection().unwrap();
    let gpus = client.get_permit_expirable_semaphore("bs:gpu");
    assert!(gpus.try_set_permits(3).unwrap());
    let ids = gpus
        .with_lease(Duration::from_secs(60))
        .acquire_many(2)
        .unwrap();
    assert_eq!(ids.len(), 2);
    let leased: i64 = raw.zcard(redisson::pes_timeouts("bs:gpu")).unwrap();
    assert_eq!(leased, 2);
    assert_eq!(gpus.acquired_permits().unwrap(), 2);
    assert_eq!(gpus.get_permits().unwrap(), 3);
    assert_eq!(gpus.available_permits().unwrap(), 1);
    let left = gpus.get_lease_time(&ids[0]).unwrap().expect("a lease");
    assert!(left <= Duration::from_secs(60));
    assert!(gpus.try_acquire_many(2).unwrap().is_empty());
    let one = gpus.try_acquire().unwrap().expect("one left");
    assert_eq!(gpus.get_lease_time(&one).unwrap(), None);
    assert!(gpus.try_release(&one).unwrap());
    gpus.release_many(&ids).unwrap();
    assert_eq!(gpus.try_release_many(&ids).unwrap(), 0);
    assert_eq!(gpus.available_permits().unwrap(), 3);
    gpus.set_permits(5).unwrap();
    assert_eq!(gpus.get_permits().unwrap(), 5);
    assert!(gpus.expire(Duration::from_secs(60)).unwrap());
    assert!(matches!(
        gpus.remain_time_to_live().unwrap(),
        KeyTtl::Expires(_)
    ));
    // From inside a current-thread runtime the synchronizers refuse too, before sending anything.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (g, s) = (gpus.clone(), client.get_semaphore("bs:nested"));
    rt.block_on(async move {
        assert!(matches!(
            g.set_permits(1),
            Err(LockError::InvalidArgument(_))
        ));
        assert!(matches!(
            s.try_set_permits(1),
            Err(LockError::InvalidArgument(_))
        ));
    });
    assert_eq!(gpus.get_permits().unwrap(), 5);
    let exists: bool = raw.exists("bs:nested").unwrap();
    assert!(!exists);
}

#[test]
fn a_blocking_rate_limiter_shares_redissons_data_and_waits_for_the_window() {
    use redisson_lock::RateType;
    let server = TestServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let mut raw = server.raw().get_connection().unwrap();
    let limiter = client.get_rate_limiter("bs:rate");
    let window = Duration::from_millis(1500);
    assert!(limiter
        .try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            2,
            window
        ))
        .unwrap());
    // Redisson's configuration hash, written through the blocking wrapper.
    let rate: String = raw.hget("bs:rate", "rate").unwrap();
    let interval: String = raw.hget("bs:rate", "interval").unwrap();
    assert_eq!((rate.as_str(), interval.as_str()), ("2", "1500"));
    let config = limiter.config().unwrap().expect("a rate is set");
    assert_eq!((config.rate, config.interval), (2, window));
    assert!(!limiter
        .try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            5,
            window
        ))
        .unwrap());

    let taken = std::time::Instant::now();
    assert!(limiter.try_acquire_many(2).unwrap());
    assert_eq!(limiter.available_permits().unwrap(), 0);
    assert!(!limiter.try_acquire().unwrap());
    // acquire blocks this thread until the window of the first takes has passed.
    limiter.acquire().unwrap();
    assert!(
        taken.elapsed() >= Duration::from_millis(1400),
        "acquired {:?} after the window filled ({window:?})",
        taken.elapsed()
    );
    assert_eq!(limiter.available_permits().unwrap(), 1);
    limiter.release().unwrap();
    assert_eq!(limiter.available_permits().unwrap(), 2);
    // Bad input is the async API's refusal, before anything is sent.
    let e = client
        .get_rate_limiter("bs:rate:bad")
        .try_set_rate(redisson_lock::RateLimiterConfig::new(
            RateType::Overall,
            0,
            window,
        ))
        .unwrap_err();
    assert!(matches!(e, LockError::InvalidArgument(_)), "{e:?}");
    let exists: bool = raw.exists("bs:rate:bad").unwrap();
    assert!(!exists);
}
