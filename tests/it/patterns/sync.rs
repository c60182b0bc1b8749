//! The synchronizers in request code: a semaphore permit held by a guard across a `?` (no
//! permit may leak, none may be given back twice), a count-down latch across a worker pool, a
//! rate limiter in a request loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redisson_lock::{Client, CountDownLatch, LockError, RateLimiterConfig, RateType, Semaphore};
use tokio::sync::{mpsc, Mutex};

use super::*;
use crate::support::{eventually, fixture_with_other, semaphore_fixture};

/// Permits of the semaphore patterns.
const PERMITS: i32 = 2;

#[derive(Debug)]
enum AppError {
    Lock(LockError),
    Unavailable,
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

/// Calls in flight under the semaphore, and the most ever seen at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    max: AtomicUsize,
    calls: AtomicUsize,
}

impl InFlight {
    /// A downstream call that fails two times out of three.
    async fn call(&self) -> Result<(), AppError> {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        tokio::task::yield_now().await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        match self.calls.fetch_add(1, Ordering::SeqCst) % 3 {
            2 => Ok(()),
            _ => Err(AppError::Unavailable),
        }
    }
}

/// `let _permit = sem.acquire_guard().await?; downstream.call().await?;`
async fn call_api(sem: &Semaphore, downstream: &InFlight, i: usize) -> Result<(), AppError> {
    let permit = match i % 2 {
        0 => sem.acquire_guard().await?,
        _ => sem
            .try_acquire_many_guard_for(1, WAIT)
            .await?
            .expect("no permit within the wait"),
    };
    downstream.call().await?;
    if i % 4 == 1 {
        permit.release().await?;
    }
    Ok(())
}

async fn caller(sem: Semaphore, downstream: Arc<InFlight>) -> usize {
    let mut failures = 0;
    for i in 0..iterations() {
        loop {
            match call_api(&sem, &downstream, i).await {
                Ok(()) => break,
                Err(AppError::Unavailable) => failures += 1,
                Err(AppError::Lock(e)) => panic!("semaphore: {e}"),
            }
        }
    }
    failures
}

/// Every permit comes back: exactly [`PERMITS`] available once the background releases ran.
async fn all_permits_back(sem: &Semaphore) {
    let back = eventually(WAIT, || async {
        sem.available_permits().await.unwrap() == i64::from(PERMITS)
    })
    .await;
    assert!(
        back,
        "permits leaked or given back twice: {} available of {PERMITS}",
        sem.available_permits().await.unwrap()
    );
}

async fn semaphore_guard_across_a_question_mark() {
    let (_server, client, _raw, sem) = semaphore_fixture("pat:sync:sem", PERMITS).await;
    let other = client.get_semaphore("pat:sync:sem");
    let downstream = Arc::new(InFlight::default());
    let callers: Vec<_> = (0..4)
        .map(|c| {
            let sem = if c % 2 == 0 {
                sem.clone()
            } else {
                other.clone()
            };
            tokio::spawn(caller(sem, downstream.clone()))
        })
        .collect();
    let mut failures = 0;
    for c in callers {
        failures += tokio::time::timeout(Duration::from_secs(120), c)
            .await
            .expect("the callers did not finish")
            .unwrap();
    }
    assert_eq!(failures, 4 * 2 * iterations());
    let max = downstream.max.load(Ordering::SeqCst);
    assert!(
        max <= PERMITS as usize,
        "{max} calls at once under {PERMITS} permits"
    );
    all_permits_back(&sem).await;
}

shapes!(semaphore_guard_across_a_question_mark => semaphore_guard_across_a_question_mark);

/// A permit acquire cut short while none is free leaves none taken; `forget()` keeps one taken
/// until it is given back by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_guard_cut_short_and_forgotten() {
    let (_server, _client, _raw, sem) = semaphore_fixture("pat:sync:sem2", PERMITS).await;
    let held: Vec<_> = futures_util::future::join_all((0..PERMITS).map(|_| sem.acquire_guard()))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for i in 0..iterations() {
        let d = Duration::from_millis((i % 5) as u64);
        let r = tokio::time::timeout(d, sem.acquire_guard()).await;
        assert!(r.is_err(), "a permit came from a drained semaphore: {r:?}");
    }
    drop(held);
    all_permits_back(&sem).await;
    let kept = sem.acquire_guard().await.unwrap();
    kept.forget();
    let one_less = eventually(WAIT, || async {
        sem.available_permits().await.unwrap() == i64::from(PERMITS) - 1
    })
    .await;
    assert!(one_less, "a forgotten permit was given back");
    sem.release().await.unwrap();
    all_permits_back(&sem).await;
}

/// A worker pool: jobs from a channel, each done under a lock and counted down on a latch the
/// dispatcher waits on. Half the workers use another client (another process).
async fn pool_worker(
    client: Client,
    jobs: Arc<Mutex<mpsc::Receiver<usize>>>,
    latch: CountDownLatch,
    section: Occupancy,
) -> Result<usize, LockError> {
    let ledger = client.get_lock("pat:sync:ledger");
    let mut done = 0;
    loop {
        let job = jobs.lock().await.recv().await;
        let Some(_job) = job else { return Ok(done) };
        {
            let _guard = ledger.lock().await?;
            let _inside = section.enter("ledger");
            do_work().await?;
        }
        latch.count_down().await?;
        done += 1;
    }
}

async fn latch_across_a_worker_pool() {
    let (_server, client, raw, other) = fixture_with_other().await;
    let jobs = iterations();
    let latch = client.get_count_down_latch("pat:sync:latch");
    assert!(latch.try_set_count(jobs as i64).await.unwrap());
    let (tx, rx) = mpsc::channel(16);
    let rx = Arc::new(Mutex::new(rx));
    let section = Occupancy::default();
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let c = if w % 2 == 0 { &client } else { &other };
            let latch = c.get_count_down_latch("pat:sync:latch");
            tokio::spawn(pool_worker(c.clone(), rx.clone(), latch, section.clone()))
        })
        .collect();
    let dispatcher = async {
        for j in 0..jobs {
            tx.send(j).await.unwrap();
        }
        drop(tx);
    };
    let (opened, ()) = tokio::join!(latch.wait_for(Duration::from_secs(120)), dispatcher);
    assert!(opened.unwrap(), "the latch did not open");
    assert_eq!(latch.get_count().await.unwrap(), 0);
    let mut done = 0;
    for w in workers {
        done += tokio::time::timeout(WAIT, w)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
    assert_eq!(done, jobs);
    assert_eq!(section.entries(), jobs);
    assert_freed(&raw, "pat:sync:ledger").await;
}

shapes!(count_down_latch_across_a_worker_pool => latch_across_a_worker_pool);

/// A request loop that answers "429" when the limiter refuses: with 5 per hour, exactly 5 of
/// 20 requests get through, whichever client serves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limiter_rejects_over_the_limit() {
    let (_server, client, _raw, other) = fixture_with_other().await;
    let limiter = client.get_rate_limiter("pat:sync:rate429");
    let rate = RateLimiterConfig::new(RateType::Overall, 5, Duration::from_secs(3600));
    assert!(limiter.try_set_rate(rate).await.unwrap());
    let mut served = 0;
    let mut rejected = 0;
    for r in 0..20 {
        let c = if r % 2 == 0 { &client } else { &other };
        if c.get_rate_limiter("pat:sync:rate429")
            .try_acquire()
            .await
            .unwrap()
        {
            served += 1;
        } else {
            rejected += 1;
        }
    }
    assert_eq!((served, rejected), (5, 15));
    assert_eq!(limiter.available_permits().await.unwrap(), 0);
}

/// A request loop that waits for its permit: every request is served, and the limiter never
/// reports more permits than its rate.
async fn rate_limited_request_loop() {
    let (_server, client, _raw, _other) = fixture_with_other().await;
    let limiter = client.get_rate_limiter("pat:sync:rate");
    let per_window = 10;
    let rate = RateLimiterConfig::new(RateType::Overall, per_window, Duration::from_millis(100));
    assert!(limiter.try_set_rate(rate).await.unwrap());
    let served = async {
        let mut served = 0;
        for _ in 0..iterations() {
            limiter.acquire().await?;
            served += 1;
            let left = limiter.available_permits().await?;
            assert!(
                (0..=i64::from(per_window)).contains(&left),
                "{left} permits available of {per_window}"
            );
        }
        Ok::<usize, LockError>(served)
    };
    let served = tokio::time::timeout(Duration::from_secs(120), served)
        .await
        .expect("the request loop stalled")
        .unwrap();
    assert_eq!(served, iterations());
}

shapes!(rate_limiter_in_a_request_loop => rate_limited_request_loop);
