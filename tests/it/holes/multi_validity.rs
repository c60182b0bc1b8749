//! RedLock/MultiLock validity against the instant the re-apply round was sent (issue 23, area 1).
//!
//! One member sits behind a recording proxy that delays every reply by [`LATENCY`] and logs,
//! on the test's monotonic clock, when each request reached it and when each reply left it.
//! The first round (the members taken) and the lease re-apply (the caller's lease set again
//! on every member, `expire.lua`) both cross that latency. The re-apply was sent after the
//! first round's last reply left the proxy and before its own request reached the proxy, so the
//! deadline the guard reports, `sent + lease - drift`, is bracketed by those two instants. A
//! validity counted from the re-apply's reply comes out a latency too late; one counted from
//! the start of the round, a latency too early; one without the drift allowance, 1 % + 2 ms too
//! late. The moment the guard reports the lock lost is bracketed the same way.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;
use redisson_lock::{Client, Config, MultiLock, MultiLockGuard, QuorumPolicy};

/// The added reply latency on the slow member: well above scheduling noise, well below the
/// node timeout.
const LATENCY: Duration = Duration::from_millis(300);
/// The caller's lease.
const LEASE: Duration = Duration::from_secs(3);
/// Redlock's drift allowance for [`LEASE`] (`time::drift`: 1 % + 2 ms).
const DRIFT: Duration = Duration::from_millis(32);
/// `expire.lua`'s SHA1 (lua/SHA1SUMS): the re-apply script.
const EXPIRE_SHA: &[u8] = b"6bc1abcab0c540f2360887099bc2ea72c836174c";
/// Instant arithmetic slack: both clocks are this process's monotonic clock.
const EPS: Duration = Duration::from_millis(1);

/// What the proxy saw: (when, request?, bytes).
type Log = Arc<Mutex<Vec<(Instant, bool, Vec<u8>)>>>;

/// A loopback proxy that forwards requests at once and each reply chunk [`LATENCY`] after it
/// came from the server (order kept), logging both.
struct SlowReplies {
    port: u16,
    log: Log,
    delay: Arc<Mutex<Duration>>,
    task: tokio::task::JoinHandle<()>,
}

impl SlowReplies {
    async fn start(upstream: u16) -> SlowReplies {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let log: Log = Arc::default();
        let delay = Arc::new(Mutex::new(Duration::ZERO));
        let (l, d) = (log.clone(), delay.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
                let (l, d) = (l.clone(), d.clone());
                tokio::spawn(async move {
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let log = l.clone();
                    let up = async move {
                        let mut buf = vec![0u8; 65536];
                        while let Ok(n @ 1..) = cr.read(&mut buf).await {
                            log.lock()
                                .unwrap()
                                .push((Instant::now(), true, buf[..n].to_vec()));
                            if sw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    };
                    let down = async move {
                        let mut buf = vec![0u8; 65536];
                        while let Ok(n @ 1..) = sr.read(&mut buf).await {
                            let due = Instant::now() + *d.lock().unwrap();
                            tokio::time::sleep_until(due.into()).await;
                            if cw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                            l.lock()
                                .unwrap()
                                .push((Instant::now(), false, buf[..n].to_vec()));
                        }
                    };
                    tokio::select! { _ = up => {}, _ = down => {} }
                });
            }
        });
        SlowReplies {
            port,
            log,
            delay,
            task,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn slow(&self, on: bool) {
        *self.delay.lock().unwrap() = if on { LATENCY } else { Duration::ZERO };
    }

    /// The bracket of the re-apply's send instant, from what the proxy saw since `since`: the
    /// last reply that left it before the re-apply's request arrived, and that arrival.
    fn reapply_sent(&self, since: Instant) -> (Instant, Instant) {
        let log = self.log.lock().unwrap();
        let (req, _, _) = log
            .iter()
            .find(|(t, request, bytes)| {
                *t >= since && *request && bytes.windows(EXPIRE_SHA.len()).any(|w| w == EXPIRE_SHA)
            })
            .expect("the re-apply reached the slow member");
        let (reply, _, _) = log
            .iter()
            .rev()
            .find(|(t, request, _)| *t >= since && !*request && t <= req)
            .expect("the first round's reply left the proxy before the re-apply");
        (*reply, *req)
    }
}

impl Drop for SlowReplies {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Three members, the middle one behind the slow proxy; a node timeout far above the latency.
async fn members(name: &str) -> (Vec<TestServer>, SlowReplies, Vec<redisson_lock::RLock>) {
    let servers = servers(3);
    let proxy = SlowReplies::start(servers[1].port).await;
    let mut locks = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        let url = if i == 1 { proxy.url() } else { s.url() };
        let client = Client::with_config(Config::new(url)).await.unwrap();
        locks.push(client.get_lock(name));
    }
    (servers, proxy, locks)
}

/// Takes `multi` with [`LEASE`] through the slow member and checks the reported validity and
/// the moment the guard reports the lock lost against the re-apply's send bracket.
async fn validity_is_counted_from_the_reapply_send<P: QuorumPolicy>(
    multi: MultiLock<P>,
    proxy: &SlowReplies,
    what: &str,
) {
    let multi = multi.with_node_timeout(Duration::from_secs(3));
    // Once without latency: scripts are loaded (no NOSCRIPT round trip in the measured round).
    multi
        .lock_with_lease(LEASE)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

    proxy.slow(true);
    let start = Instant::now();
    let guard: MultiLockGuard = multi.lock_with_lease(LEASE).await.unwrap();
    let returned = Instant::now();
    proxy.slow(false);
    let (after_first_round, reapply_arrived) = proxy.reapply_sent(start);
    assert!(
        after_first_round >= start + LATENCY,
        "{what}: the first round crossed the latency"
    );
    assert!(
        returned >= reapply_arrived + LATENCY,
        "{what}: so did the re-apply"
    );
    assert_eq!(guard.lease(), Some(LEASE));

    // The reported deadline: now + remaining, bracketed by the calls around it.
    let before = Instant::now();
    let left = guard
        .remaining_validity()
        .expect("a fixed lease has a validity");
    let after = Instant::now();
    let (earliest, latest) = (
        after_first_round + LEASE - DRIFT,
        reapply_arrived + LEASE - DRIFT,
    );
    assert!(
        before + left <= latest + EPS,
        "{what}: validity ends {:?} after the re-apply reached the member (lease {LEASE:?} less \
         drift {DRIFT:?} at most): counted from a later instant",
        (before + left).duration_since(reapply_arrived)
    );
    assert!(
        after + left + EPS >= earliest,
        "{what}: validity ends {:?} before the first round's last reply + lease - drift: \
         counted from an earlier instant",
        earliest.duration_since(after + left)
    );

    // Lost exactly then: every `is_lost()` answer agrees with the bracket.
    let mut told_lost = None;
    while told_lost.is_none() {
        let before = Instant::now();
        let lost = guard.is_lost();
        let after = Instant::now();
        if lost {
            assert!(
                after + EPS >= earliest,
                "{what}: reported lost {:?} before the validity could end",
                earliest.duration_since(after)
            );
            told_lost = Some(after);
        } else {
            assert!(
                before <= latest + EPS,
                "{what}: still valid {:?} after the validity ended",
                before.duration_since(latest)
            );
            assert!(
                before < latest + Duration::from_secs(30),
                "{what}: never lost"
            );
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    // `lost()` agrees once the validity ran out.
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() resolves once the validity ran out");
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_validity_counts_from_the_reapply_send() {
    let (_servers, proxy, locks) = members("mv:red").await;
    let red = redisson_lock::RedLock::new(locks).unwrap();
    validity_is_counted_from_the_reapply_send(red, &proxy, "RedLock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multilock_validity_counts_from_the_reapply_send() {
    let (_servers, proxy, locks) = members("mv:multi").await;
    let multi: MultiLock = MultiLock::new(locks).unwrap();
    validity_is_counted_from_the_reapply_send(multi, &proxy, "MultiLock").await;
}
