//! Permits of a permit-expirable semaphore that live as long as their holder: the registry the
//! watchdog renews (`PermitGuard`, `src/sync/permit_guard.rs`). One [`WatchedPermit`] per guard:
//! the semaphore's keys, the permit id, when it was last renewed and whether it was found gone.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dashmap::DashMap;
use tokio::sync::Notify;

/// One watched permit.
#[derive(Debug)]
pub(crate) struct WatchedPermit {
    /// The semaphore's count key `<name>`.
    pub(crate) name: Arc<str>,
    /// Its leases' sorted set `{<name>}:timeout`.
    pub(crate) timeouts: Arc<str>,
    /// Its channel `redisson_sc:{<name>}`.
    pub(crate) channel: Arc<str>,
    /// The permit id's 16 raw bytes.
    pub(crate) id: [u8; 16],
    lost: AtomicBool,
    /// A renewal failed (or is late) since the last confirmed one; the lease still valid.
    at_risk: AtomicBool,
    /// Wakes those waiting for the permit to be lost or to go at risk (each re-checks).
    lost_notify: Notify,
    renewed_at: Mutex<Instant>,
}

impl WatchedPermit {
    pub(crate) fn new(
        name: Arc<str>,
        timeouts: Arc<str>,
        channel: Arc<str>,
        id: [u8; 16],
    ) -> WatchedPermit {
        WatchedPermit {
            name,
            timeouts,
            channel,
            id,
            lost: AtomicBool::new(false),
            at_risk: AtomicBool::new(false),
            lost_notify: Notify::new(),
            renewed_at: Mutex::new(Instant::now()),
        }
    }

    /// Marks the permit lost; `true` the first time.
    pub(crate) fn lose(&self) -> bool {
        let first = !self.lost.swap(true, Ordering::AcqRel);
        if first {
            self.lost_notify.notify_waiters();
        }
        first
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Resolves once the permit is lost.
    pub(crate) async fn lost(&self) {
        loop {
            let notified = self.lost_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_lost() {
                return;
            }
            notified.await;
        }
    }

    /// Marks the permit at risk (a renewal failed, or is late); `true` when it was not, and
    /// then its waiters are woken.
    pub(crate) fn risk(&self) -> bool {
        let first = !self.at_risk.swap(true, Ordering::AcqRel);
        if first {
            self.lost_notify.notify_waiters();
        }
        first
    }

    pub(crate) fn is_at_risk(&self) -> bool {
        self.at_risk.load(Ordering::Acquire)
    }

    /// Resolves at the next change: the permit lost or gone at risk (at once if `ready` holds,
    /// checked after the wake-up is registered).
    pub(crate) async fn changed(&self, ready: impl Fn() -> bool) {
        let notified = self.lost_notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if ready() {
            return;
        }
        notified.await;
    }

    /// A renewal sent at `at` was confirmed: the permit is no longer at risk.
    pub(crate) fn renewed(&self, at: Instant) {
        let mut r = self.renewed_at.lock().unwrap_or_else(|e| e.into_inner());
        if at > *r {
            *r = at;
        }
        self.at_risk.store(false, Ordering::Release);
    }

    pub(crate) fn renewed_at(&self) -> Instant {
        *self.renewed_at.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Every watched permit of one client, by a registration number.
#[derive(Default)]
pub(crate) struct Permits {
    next: AtomicU64,
    permits: DashMap<u64, Arc<WatchedPermit>>,
}

impl Permits {
    /// Registers a permit for renewal; the number unregisters it.
    pub(crate) fn watch(&self, permit: Arc<WatchedPermit>) -> u64 {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.permits.insert(n, permit);
        n
    }

    /// Stops renewing permit `n` (released, or its guard dropped).
    pub(crate) fn unwatch(&self, n: u64) {
        self.permits.remove(&n);
    }

    /// The permits to renew (those not found lost).
    pub(crate) fn watched(&self) -> Vec<Arc<WatchedPermit>> {
        self.permits
            .iter()
            .filter(|e| !e.value().is_lost())
            .map(|e| e.value().clone())
            .collect()
    }

    pub(crate) fn any(&self) -> bool {
        self.permits.iter().any(|e| !e.value().is_lost())
    }
}
