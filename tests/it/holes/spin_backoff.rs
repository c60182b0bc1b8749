//! The spin lock's backoff, counted on the server (issue 23, area 4): while another client holds
//! the lock for a few seconds, `MONITOR` records every attempt script the waiting client sends,
//! with the server's timestamps. The gaps between attempts follow the configured backoff: each
//! is at least the configured delay (a try is sent only after the previous reply and the
//! sleep, so this lower bound holds on any machine), they grow by the multiplier, and they stop
//! growing at the cap.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;

use crate::support::*;
use redisson_lock::Backoff;

const WAIT: Duration = Duration::from_secs(30);

/// Server timestamps (ms) of the `EVALSHA`s whose arguments contain `needle`, as they arrive.
struct Monitor {
    seen: Arc<Mutex<Vec<f64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Monitor {
    async fn start(server: &TestServer, needle: String) -> Monitor {
        let monitor = server.raw().get_async_monitor().await.unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let out = seen.clone();
        let task = tokio::spawn(async move {
            let mut lines = monitor.into_on_message::<String>();
            while let Some(line) = lines.next().await {
                // `<secs>.<micros> [<db> <addr>] "EVALSHA" ...`; commands a script runs show
                // as `[<db> lua]` and are not attempts.
                if !line.contains("\"EVALSHA\"") && !line.contains("\"evalsha\"") {
                    continue;
                }
                if line.contains(" lua]") || !line.contains(&needle) {
                    continue;
                }
                let ts: f64 = line.split(' ').next().unwrap().parse().unwrap();
                out.lock().unwrap().push(ts * 1000.0);
            }
        });
        Monitor { seen, task }
    }

    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn stop(self) -> Vec<f64> {
        self.task.abort();
        self.seen.lock().unwrap().clone()
    }
}

/// Holds `name` from another client for `hold`, while a spin waiter with `backoff` waits; returns
/// the server times of the waiter's attempt scripts (the last one is the winning attempt).
async fn attempts(backoff: Backoff, hold: Duration, name: &str) -> Vec<f64> {
    let (server, [holder, waiter]) = two_clients().await;
    let held = holder
        .get_spin_lock(name)
        .lock_with_lease(Duration::from_secs(120))
        .await
        .unwrap();
    let monitor = Monitor::start(&server, waiter.id().to_owned()).await;
    let lock = waiter.get_spin_lock_with(name, backoff);
    let waiting = tokio::spawn(async move { lock.lock().await.unwrap() });
    tokio::time::sleep(hold).await;
    assert!(!waiting.is_finished(), "the waiter got a held lock");
    let before_release = monitor.count();
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("the waiter takes the freed lock")
        .unwrap();
    // The winning attempt's line arrives on the monitor connection soon after.
    assert!(
        eventually(WAIT, || {
            let n = monitor.count();
            async move { n > before_release }
        })
        .await,
        "the winning attempt was not seen"
    );
    let seen = monitor.stop();
    guard.unlock().await.unwrap();
    seen
}

/// Exponential 20 ms, x2, at most 250 ms, while the lock is held for 4 s: the gaps are at least
/// 20, 40, 80, 160, then 250 ms, and from the fifth on stay near the cap (about 19 attempts;
/// without growth there would be hundreds, without the cap fewer than ten with gaps of seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exponential_backoff_grows_by_its_multiplier_and_stops_at_the_cap() {
    let ms = Duration::from_millis;
    let backoff = Backoff::exponential(ms(20), ms(250), 2).unwrap();
    let times = attempts(backoff, ms(4_000), "bo:exp").await;
    let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() >= 8, "too few attempts in 4 s: {gaps:?}");
    // No more attempts than the backoff allows: every gap at least its delay.
    for (i, g) in gaps.iter().enumerate() {
        let least = (20.0 * 2f64.powi(i as i32)).min(250.0);
        assert!(
            *g >= least - 1.0,
            "gap {i} is {g:.1} ms, below the backoff's {least} ms: {gaps:?}"
        );
    }
    // Capped: past the growth, gaps stay near 250 ms (jitter adds at most a millisecond per
    // failed try; the rest is a loaded machine's scheduling).
    let mut late: Vec<f64> = gaps[4..].to_vec();
    late.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = late[late.len() / 2];
    assert!(
        median <= 250.0 + 150.0,
        "median gap past the cap {median:.1} ms: {gaps:?}"
    );
    let long = late.iter().filter(|g| **g > 250.0 + 400.0).count();
    assert!(
        long * 4 <= late.len(),
        "{long} gaps far above the cap: {gaps:?}"
    );
}

/// A constant 100 ms (plus at most an eighth of jitter) over 2 s: every gap at least 100 ms,
/// the typical gap near it, so about 20 attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constant_backoff_keeps_its_delay() {
    let ms = Duration::from_millis;
    let times = attempts(Backoff::constant(ms(100)).unwrap(), ms(2_000), "bo:const").await;
    let mut gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() >= 6, "too few attempts in 2 s: {gaps:?}");
    assert!(
        gaps.iter().all(|g| *g >= 99.0),
        "a gap below the delay: {gaps:?}"
    );
    gaps.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = gaps[gaps.len() / 2];
    assert!(
        median <= 112.5 + 150.0,
        "median gap {median:.1} ms: {gaps:?}"
    );
}
