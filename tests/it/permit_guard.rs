//! Permits that live as long as their holder (`PermitGuard`): the watchdog moves their lease end
//! in `{<name>}:timeout` while the guard lives, the guard gives them back, and a dead holder's
//! permit returns within one lease. Java's side: `java::permit_guard`.

use std::time::Duration;

use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::{LockError, PermitGuard};

const WAIT: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_millis(1500);

/// Server time in epoch ms.
async fn server_ms(raw: &mut redis::aio::MultiplexedConnection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(raw).await.unwrap();
    s * 1000 + us / 1000
}

fn id_bytes(g: &PermitGuard) -> Vec<u8> {
    let hex = g.id().as_str();
    (0..16)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Each permit's lease end less the server's time: what is left of its lease.
async fn left_ms(
    raw: &mut redis::aio::MultiplexedConnection,
    name: &str,
    ids: &[Vec<u8>],
) -> Vec<i64> {
    let now = server_ms(raw).await;
    let mut out = Vec::new();
    for id in ids {
        let score: Option<f64> = raw.zscore(format!("{{{name}}}:timeout"), id).await.unwrap();
        out.push(score.map_or(-1, |s| s as i64 - now));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_permit_s_lease_keeps_moving() {
    let (server, _c, mut raw) = fixture().await;
    // Batches of two: three permits of one semaphore take two scripts, the other semaphore one.
    let client = server
        .client_with(|c| c.with_watchdog_timeout(LEASE).with_watchdog_batch_size(2))
        .await;
    let a = client.get_permit_expirable_semaphore("pg:moving");
    let b = client.get_permit_expirable_semaphore("pg:other");
    assert!(a.try_set_permits(3).await.unwrap());
    assert!(b.try_set_permits(1).await.unwrap());
    let guards_a = [
        a.acquire_guarded().await.unwrap(),
        a.acquire_guarded().await.unwrap(),
        a.acquire_guarded().await.unwrap(),
    ];
    let guard_b = b
        .try_acquire_guarded_for(Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let ids_a: Vec<_> = guards_a.iter().map(id_bytes).collect();
    let ids_b = vec![id_bytes(&guard_b)];
    let first = left_ms(&mut raw, "pg:moving", &ids_a).await;
    assert!(first.iter().all(|&l| l > 0 && l <= 1500), "{first:?}");
    // Over four leases each permit's lease end stays ahead of the server's clock.
    let start = std::time::Instant::now();
    while start.elapsed() < LEASE * 4 {
        let left = left_ms(&mut raw, "pg:moving", &ids_a).await;
        let left_b = left_ms(&mut raw, "pg:other", &ids_b).await;
        assert!(
            left.iter().chain(&left_b).all(|&l| l > 0),
            "a permit's lease ran out while held: {left:?} {left_b:?}"
        );
        // Never more than one lease ahead (score: client clock; TIME: the same machine's).
        assert!(
            left.iter().chain(&left_b).all(|&l| l <= 1500 + 50),
            "a permit's lease end is past one lease: {left:?} {left_b:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(a.available_permits().await.unwrap(), 0);
    assert_eq!(b.available_permits().await.unwrap(), 0);
    assert!(guards_a.iter().all(|g| !g.is_lost()) && !guard_b.is_lost());
    for g in guards_a {
        g.release().await.unwrap();
    }
    guard_b.release().await.unwrap();
    assert_eq!(a.available_permits().await.unwrap(), 3);
    assert_eq!(b.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_guard_gives_the_permit_back_and_wakes_a_waiter() {
    // The default 30 s lease: only the release can explain a waiter served within WAIT.
    let (server, _client, _raw, pes) = pes_fixture("pg:drop", 1).await;
    let other = server.client().await;
    let theirs = other.get_permit_expirable_semaphore("pg:drop");
    let guard = pes.acquire_guarded().await.unwrap();
    let waiter = tokio::spawn(async move { theirs.try_acquire_guarded_for(WAIT * 3).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter got a permit that is held"
    );
    drop(guard);
    let got = tokio::time::timeout(WAIT, waiter).await;
    let got = got.expect("the waiter was not woken").unwrap().unwrap();
    let got = got.expect("the waiter got no permit");
    assert_eq!(pes.available_permits().await.unwrap(), 0);
    got.release().await.unwrap();
    assert_eq!(pes.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_released_by_id_elsewhere_is_reported_lost() {
    let (server, _c, _raw) = fixture().await;
    // A 15 s lease renewed every 5 s: the renewal finds the permit gone within about 5 s of
    // its release, while a guard that merely went unrenewed would count as lost only about a
    // lease after its last renewal (10 s or more after the release).
    let lease = Duration::from_secs(15);
    let client = server.client_with(|c| c.with_watchdog_timeout(lease)).await;
    let pes = client.get_permit_expirable_semaphore("pg:lost");
    assert!(pes.try_set_permits(1).await.unwrap());
    let guard = pes.acquire_guarded().await.unwrap();
    assert!(!guard.is_lost());
    // Someone releases it by id (another client, as Java's release(id) would).
    let other = server.client().await;
    other
        .get_permit_expirable_semaphore("pg:lost")
        .release(guard.id())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(8), guard.lost())
        .await
        .expect("the renewal never reported the permit gone");
    assert!(guard.is_lost());
    let e = guard.release().await.unwrap_err();
    assert!(matches!(e, LockError::UnknownPermit { .. }), "{e:?}");
    assert_eq!(
        pes.available_permits().await.unwrap(),
        1,
        "released once only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holder_s_permit_comes_back_within_a_lease() {
    let (server, _client, _raw, pes) = pes_fixture("pg:dead", 1).await;
    let url = server.url();
    // The holder: its own runtime (its watchdog runs there), which dies without a release.
    let (acquired_tx, acquired_rx) = std::sync::mpsc::channel::<()>();
    let (die_tx, die_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let config = redisson_lock::Config::new(url).with_watchdog_timeout(LEASE);
            let client = redisson_lock::Client::with_config(config).await.unwrap();
            let guard = client
                .get_permit_expirable_semaphore("pg:dead")
                .acquire_guarded()
                .await
                .unwrap();
            // A crash: no release, ever.
            std::mem::forget(guard);
        });
        acquired_tx.send(()).unwrap();
        let _ = die_rx.recv();
        rt.shutdown_background();
    });
    tokio::task::spawn_blocking(move || acquired_rx.recv_timeout(WAIT * 3))
        .await
        .unwrap()
        .expect("the holder never acquired");
    // Alive: held for well over its lease (renewed).
    tokio::time::sleep(LEASE * 3).await;
    assert_eq!(
        pes.available_permits().await.unwrap(),
        0,
        "a live holder's permit came back"
    );
    die_tx.send(()).unwrap();
    tokio::task::spawn_blocking(move || holder.join().unwrap())
        .await
        .unwrap();
    // Dead: back after about one lease (reclaimed by the next operation).
    let back = eventually(WAIT, || async {
        pes.available_permits().await.unwrap() == 1
    })
    .await;
    assert!(back, "a dead holder's permit never came back");
}
