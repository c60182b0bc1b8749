//! Re-entry and leases: the key's expiry always covers every hold its owner still has, so what
//! a guard believes about its lease is what Redis holds (issue 10, defects 1, 2 and 4).
//!
//! The rule (docs/locks.md, "Re-entry and leases"): every script that sets the key's expiry
//! sets it to the latest deadline among the owner's outstanding holds: a watchdog hold needs a
//! full watchdog lease, a fixed hold what is left of its own lease. Re-entering with a shorter
//! lease, releasing a watchdog hold while a fixed one remains, or a watchdog renewal never
//! shortens the key below an outstanding hold; releasing never leaves it longer than the
//! remaining holds need.

use std::time::Duration;

use crate::support::*;
use redis::AsyncCommands;
use redisson_lock::LockOwner;

/// An explicit owner: it re-enters plainly (Redisson's re-entry, with `detach` and owner-style
/// `unlock`), where the default owner would be refused a second acquire.
const OWNER: LockOwner = LockOwner::new(1);

const WAIT: Duration = Duration::from_secs(10);

/// An outer hold of `lock` (a fixed `outer` lease, or the watchdog's with `None`) re-entered
/// with the shorter fixed `inner` lease: the key's PTTL must stay above `floor` ms after the
/// re-entry and after the inner release (`what` names the outer hold), and the outer guard must
/// still hold. Returns the outer guard.
async fn reentered_shorter(
    raw: &mut redis::aio::MultiplexedConnection,
    lock: &redisson_lock::RLock,
    outer: Option<Duration>,
    inner: Duration,
    floor: i64,
    what: &str,
) -> redisson_lock::RLockGuard {
    let g1 = match outer {
        Some(lease) => lock.lock_with_lease(lease).await.unwrap(),
        None => lock.lock().await.unwrap(),
    };
    let g2 = g1.reenter_with_lease(inner).await.unwrap();
    let t = pttl(raw, lock.name()).await;
    assert!(t > floor, "re-entry shortened {what} to {t} ms");
    g2.unlock().await.unwrap();
    let t = pttl(raw, lock.name()).await;
    assert!(t > floor, "inner release left {t} ms for {what}");
    assert!(!g1.is_lost());
    g1
}

/// Defect 1: `g1 = lock_with_lease(10s)`, `g2 = lock_with_lease(500ms)`: the inner lease used to
/// become the key's expiry, so another client took the lock at ~500 ms while g1 believed it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_reentry_never_shortens_an_outer_fixed_hold() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    let lock = client.get_lock("lease:shorter");

    let outer = Some(Duration::from_secs(10));
    let inner = Duration::from_millis(500);
    let g1 = reentered_shorter(&mut raw, &lock, outer, inner, 8_000, "the outer 10 s hold").await;
    assert!(
        other
            .get_lock("lease:shorter")
            .try_lock()
            .await
            .unwrap()
            .is_none(),
        "another client took a lock held for 10 s"
    );
    g1.unlock().await.unwrap();
    assert!(!raw.exists::<_, bool>("lease:shorter").await.unwrap());
}

/// Defect 1, watchdog outer hold: `g1 = lock()`, `g2 = lock_with_lease(300ms)` used to set the
/// key to 300 ms while the watchdog guard believed it held until the next tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_reentry_never_shortens_a_watchdog_hold() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("lease:wd-outer");

    let inner = Duration::from_millis(300);
    let g1 = reentered_shorter(&mut raw, &lock, None, inner, 25_000, "a watchdog hold").await;
    g1.unlock().await.unwrap();
}

/// Defect 1, the reverse: releasing a watchdog hold while a fixed one remains used to push the
/// key to the watchdog's 30 s, past the fixed hold's lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_watchdog_hold_leaves_the_fixed_lease_that_remains() {
    let (_server, client, mut raw, other) = fixture_with_other().await;
    let lock = client.get_lock("lease:wd-inner").with_owner(OWNER);

    let g1 = lock.lock_with_lease(Duration::from_secs(2)).await.unwrap();
    let g2 = lock.lock().await.unwrap();
    let t = pttl(&mut raw, "lease:wd-inner").await;
    assert!(
        t > 25_000,
        "a watchdog re-entry must get the watchdog lease, got {t}"
    );
    g2.unlock().await.unwrap();
    let t = pttl(&mut raw, "lease:wd-inner").await;
    assert!(
        t > 0 && t <= 2_000,
        "after the watchdog hold went, the key must expire with the 2 s hold, not in {t} ms"
    );
    // The fixed hold runs out with its lease: the lock is free again, and its guard knows.
    let freed = eventually(WAIT, || async {
        other
            .get_lock("lease:wd-inner")
            .try_lock()
            .await
            .unwrap()
            .map(|g| g.detach())
            .is_some()
    })
    .await;
    assert!(freed, "the 2 s hold never expired");
    assert!(g1.is_lost());
    assert!(g1.unlock().await.unwrap_err().is_lease_lost());
}

/// The watchdog's renewal never shortens the key below a fixed hold of the same owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchdog_renewal_never_shortens_a_longer_fixed_hold() {
    let (_server, client, mut raw) =
        fixture_with(|c| c.with_watchdog_timeout(Duration::from_secs(3))).await;
    let lock = client.get_lock("lease:renew").with_owner(OWNER);

    let g1 = held_for_a_minute(&lock).await;
    let g2 = lock.lock().await.unwrap();
    assert!(pttl(&mut raw, "lease:renew").await > 55_000);
    client.renew_now().await;
    let t = pttl(&mut raw, "lease:renew").await;
    assert!(t > 55_000, "the watchdog shortened a 60 s hold to {t} ms");
    assert!(!g2.is_lost());
    g2.unlock().await.unwrap();
    assert!(pttl(&mut raw, "lease:renew").await > 55_000);
    g1.unlock().await.unwrap();
}

/// Defect 2: `detach()` then `lock.unlock()`: the hold that remains keeps its own lease (it used
/// to get the 30 s watchdog lease: `LOCK 60000` twice + unlock left 30000, `LOCK 5000` likewise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_style_unlock_keeps_the_remaining_holds_lease() {
    let (_server, client, mut raw) = fixture().await;

    for (name, lease_ms) in [("lease:detach60", 60_000u64), ("lease:detach5", 5_000)] {
        let lease = Duration::from_millis(lease_ms);
        let lock = client.get_lock(name).with_owner(OWNER);
        lock.lock_with_lease(lease).await.unwrap().detach();
        lock.lock_with_lease(lease).await.unwrap().detach();
        lock.unlock().await.unwrap();
        let t = pttl(&mut raw, name).await as u64;
        assert!(
            t <= lease_ms && t > lease_ms - 2_000,
            "{name}: one hold of {lease_ms} ms remains, pttl is {t}"
        );
        lock.unlock().await.unwrap();
        assert!(!raw.exists::<_, bool>(name).await.unwrap());
    }

    // Different leases: the hold that remains decides, not the one released.
    let lock = client.get_lock("lease:mixed").with_owner(OWNER);
    held_for_a_minute(&lock).await.detach();
    lock.lock_with_lease(Duration::from_secs(5))
        .await
        .unwrap()
        .detach();
    lock.unlock().await.unwrap(); // the latest: the 5 s hold
    let t = pttl(&mut raw, "lease:mixed").await;
    assert!(t > 55_000, "the 60 s hold remains, pttl is {t}");
    lock.unlock().await.unwrap();

    // The same for the write lock.
    let rw = client.get_read_write_lock("lease:rw");
    let w = rw.write_lock().with_owner(OWNER);
    held_for_a_minute(&w).await.detach();
    held_for_a_minute(&w).await.detach();
    w.unlock().await.unwrap();
    let t = pttl(&mut raw, "lease:rw").await;
    assert!(t > 55_000, "write lock: one 60 s hold remains, pttl is {t}");
    w.unlock().await.unwrap();
    assert!(!raw.exists::<_, bool>("lease:rw").await.unwrap());
}

/// An owner-style unlock releases the owner's latest hold; the guard of that hold then has
/// nothing left to release and must not take the outer hold with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_whose_hold_was_released_owner_style_leaves_the_outer_hold() {
    let (_server, client) = with_client().await;
    let lock = client.get_lock("lease:latest");

    let (outer, inner) = held_twice(&lock).await;
    lock.unlock().await.unwrap(); // releases `inner`'s hold
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(inner.unlock().await.unwrap_err().is_lease_lost());
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "a stale guard released the outer hold"
    );
    assert!(!outer.is_lost());
    outer.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 0);
}

/// Defect 4: an acquire whose outcome was never learned can still run later (after the
/// background settle gave up), leaving a hold the client does not know of. The owner's next
/// acquire used to adopt it (count 2), so after the user's single unlock the key stayed held
/// for a whole lease with nothing renewing it. Now the next acquire trims it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_of_a_late_unknown_acquire_are_trimmed_not_adopted() {
    let (_server, client, mut raw) = fixture().await;
    let lock = client.get_lock("lease:phantom");
    let owner = redisson_lock::LockOwner::new(7);
    let lock = lock.with_owner(owner);

    // What the late acquire leaves: the owner's field, count 1, the watchdog lease.
    let f = field(&client, owner);
    let _: () = raw.hset("lease:phantom", &f, 1).await.unwrap();
    let _: () = raw.pexpire("lease:phantom", 30_000).await.unwrap();

    let guard = lock.lock().await.unwrap();
    let count: i64 = raw.hget("lease:phantom", &f).await.unwrap();
    assert_eq!(count, 1, "the unknown hold was adopted");
    guard.unlock().await.unwrap();
    assert!(
        !raw.exists::<_, bool>("lease:phantom").await.unwrap(),
        "the key stayed held after the owner's only unlock"
    );
}

/// A fixed lease is trusted for its length less the clock-drift allowance (1 % + 2 ms), as a
/// watchdog hold is: a server whose clock runs fast expires the key early. (Found by the clock
/// tests: a 3 s fixed lease expired 2.988 s after its acquire was sent on a server 0.5 % fast
/// while `is_lost()` still said false.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_is_trusted_a_drift_allowance_less_than_its_length() {
    let (_server, client) = with_client().await;
    let lease = Duration::from_secs(5);
    let drift = lease / 100 + Duration::from_millis(2);
    let before = std::time::Instant::now();
    let guard = client
        .get_lock("lease:drift")
        .lock_with_lease(lease)
        .await
        .unwrap();
    let after = std::time::Instant::now();
    // Sent in [before, after]: valid until at most after + lease - drift.
    tokio::time::sleep_until((after + lease - drift / 2).into()).await;
    assert!(
        guard.is_lost(),
        "a fixed lease was still trusted {:?} after its acquire (lease {lease:?}, drift {drift:?})",
        before.elapsed()
    );
    if after - before >= drift / 2 {
        eprintln!(
            "note: the acquire took {:?}; the drift check was not sharp",
            after - before
        );
    }
}
