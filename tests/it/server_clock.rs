//! T28 on a real fast server clock. Debian's redis-server cannot run under libfaketime (its
//! jemalloc calls `clock_gettime` while libfaketime starts, which aborts), so on Redis
//! `clock_steps::server_clock_half_a_percent_fast_is_covered_by_the_drift_allowance` *plays*
//! the fast clock by shortening the key's TTL. Valkey 8.1.8 (the pinned wheel, built with libc
//! malloc) runs under libfaketime, so on Valkey the server's wall clock really runs fast here
//! (`FAKETIME="+0 x<rate>"`; key expiry reads the wall clock) and the guard is checked against
//! the server's own expiry. On Redis these tests say so and check nothing (the servers differ,
//! the harness does not).

use std::time::{Duration, Instant};

use crate::support::proxy::{Mode, Proxy};
use crate::support::*;
use redis::AsyncCommands;

/// A server whose wall clock runs `rate` times as fast as the real one (monotonic untouched);
/// `None` (with a note) on Redis or without libfaketime.
fn fast_clock_server(rate: &str) -> Option<TestServer> {
    if !is_valkey() {
        eprintln!(
            "note: {:?} cannot run under libfaketime: the real fast server clock runs on Valkey \
             only (REDISSON_LOCK_SERVER=valkey); clock_steps plays it on Redis",
            family()
        );
        return None;
    }
    let Some(lib) = faketime_lib() else {
        eprintln!("note: libfaketime missing (apt-get install faketime): real T28 not run");
        return None;
    };
    let spec = format!("+0 x{rate}");
    Some(TestServer::start_env(
        &[
            ("LD_PRELOAD", &lib),
            ("FAKETIME", &spec),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ("FAKETIME_NO_CACHE", "1"),
        ],
        &[],
    ))
}

/// Takes a 3 s watchdog hold on `server` through a proxy, blackholes the proxy (no renewal
/// arrives) and polls until the server expires the key. Returns whether the guard already said
/// lost when the key was seen gone, and when (after the acquire was sent) the key was gone.
async fn guard_vs_server_expiry(server: &TestServer) -> (bool, Duration) {
    let lease = Duration::from_secs(3);
    let proxy = Proxy::start(server.port).await;
    let client = redisson_lock::Client::with_config(
        redisson_lock::Config::new(proxy.url()).with_watchdog_timeout(lease),
    )
    .await
    .unwrap();
    let mut raw = server.conn().await;
    let sent = Instant::now();
    let guard = client.get_lock("clock:real").lock().await.unwrap();
    proxy.set(Mode::Blackhole);
    let deadline = Instant::now() + lease * 3;
    loop {
        assert!(Instant::now() < deadline, "the key never expired");
        let exists: bool = raw.exists("clock:real").await.unwrap();
        if !exists {
            // Asked after the key was seen gone: lost must be true already.
            return (guard.is_lost(), sent.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// T28 for real: a server clock 0.5 % fast (inside the 1 % + 2 ms drift allowance) expires a
/// 3 s watchdog lease about 15 ms early; the guard has said lost by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_clock_half_a_percent_fast_is_covered_by_the_drift_allowance() {
    let Some(server) = fast_clock_server("1.005") else {
        return;
    };
    let (lost, gone_after) = guard_vs_server_expiry(&server).await;
    assert!(
        lost,
        "server clock 0.5 % fast: the key expired {gone_after:?} after the acquire was sent, \
         while the guard said held"
    );
}

/// The limit, and the proof that the clock above really is fast: a server clock 25 % fast is
/// far outside the drift allowance. The key expires 600 ms early (2.4 s after the acquire on
/// the server), while the guard still says held (its validity ends 2.968 s after the send):
/// the allowance covers drift, not a broken clock (docs/reliability.md, T28).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_clock_a_quarter_fast_outruns_the_drift_allowance() {
    let Some(server) = fast_clock_server("1.25") else {
        return;
    };
    let (lost, gone_after) = guard_vs_server_expiry(&server).await;
    assert!(
        gone_after < Duration::from_millis(2_900),
        "the key lived {gone_after:?}: the server clock did not run 25 % fast"
    );
    assert!(
        !lost,
        "the guard said lost before a 25 % fast clock expired the key ({gone_after:?})"
    );
}
