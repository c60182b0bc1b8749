//! The holder's side for an on-call engineer: [`Client::holds`] lists what this client holds
//! now, read from its holds registry (`holds/`) without asking Redis and without taking any
//! hold's gate (so a hold stuck behind a slow script still shows).

use std::time::{Duration, Instant, SystemTime};

use crate::shared::Client;

/// One lock hold of this client, as [`Client::holds`] saw it: which lock, which owner, since
/// when, and how much lease is left.
///
/// A snapshot: the hold may be released (or lost) right after it was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldLock {
    /// The lock's name (its Redis key).
    pub name: String,
    /// The lock's kind, as the metrics' `kind` label: `lock`, `fair`, `spin`, `fenced`,
    /// `read`, `write`, `non_reentrant`, ...
    pub kind: &'static str,
    /// The owner: the lock hash's field, `<client id>:<owner id>` (with the kind's suffix for
    /// a write lock), as `redisson-lock inspect` and Redisson show it.
    pub owner: String,
    /// Since when the owner holds the lock (its first acquisition still held; a re-entry
    /// does not move it), on this process's monotonic clock.
    pub since: Instant,
    /// The same instant on the wall clock (for display next to logs and Redis' data).
    pub since_wall: SystemTime,
    /// How long it has been held, when the snapshot was taken.
    pub held_for: Duration,
    /// Lease left, as far as the client knows, when the snapshot was taken: until the last
    /// confirmed watchdog renewal plus the watchdog lease, or the latest fixed lease's end,
    /// whichever is later; zero once that has passed (the hold is then about to be reported
    /// lost).
    pub lease_left: Duration,
    /// Whether the watchdog renews it (taken without an explicit lease).
    pub watchdog: bool,
    /// Whether it is at risk: a renewal failed, or none was confirmed for two renewal periods,
    /// while the lease is still valid ([`LockGuard::is_at_risk`](crate::LockGuard::is_at_risk)).
    pub at_risk: bool,
}

impl Client {
    /// The lock holds this client (any of its clones) has now, oldest first: one per lock and
    /// owner, however many times the owner re-entered it. Read from the client's own registry:
    /// nothing is sent to Redis, and the call never waits. Permits of semaphores are not
    /// listed (they are not owned); the sub-locks of a `MultiLock` or `RedLock` are, each on
    /// the client it was taken through.
    ///
    /// A hold the watchdog (or a release) found lost is no longer listed, though its guard may
    /// still be alive: [`LockGuard::is_lost`](crate::LockGuard::is_lost) says so on that side.
    ///
    /// For a stuck lock while it is stuck: a hold whose `held_for` keeps growing. The same
    /// shows in the `redisson_lock_holds` and `redisson_lock_oldest_hold_seconds` gauges
    /// ([`observe`](crate::observe)).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// let guard = client.get_lock("doc:holds").lock().await?;
    /// let holds = client.holds();
    /// assert_eq!(holds.len(), 1);
    /// assert_eq!((holds[0].name.as_str(), holds[0].kind), ("doc:holds", "lock"));
    /// assert!(holds[0].lease_left > std::time::Duration::ZERO);
    /// guard.unlock().await?;
    /// assert!(client.holds().is_empty());
    /// # Ok(()) })
    /// ```
    pub fn holds(&self) -> Vec<HeldLock> {
        let watchdog = self.inner.config.watchdog_timeout();
        let now = Instant::now();
        let wall = SystemTime::now();
        let mut holds: Vec<HeldLock> = self
            .inner
            .holds
            .held(watchdog)
            .into_iter()
            .map(|(hold, held)| {
                let held_for = now.saturating_duration_since(held.since);
                HeldLock {
                    name: hold.key.to_string(),
                    kind: hold.kind.name,
                    owner: hold.field.to_string(),
                    since: held.since,
                    since_wall: wall.checked_sub(held_for).unwrap_or(wall),
                    held_for,
                    lease_left: held.expires.saturating_duration_since(now),
                    watchdog: held.watchdog,
                    at_risk: held.at_risk,
                }
            })
            .collect();
        holds.sort_by(|a, b| a.since.cmp(&b.since).then_with(|| a.name.cmp(&b.name)));
        holds
    }
}
