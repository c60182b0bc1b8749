//! One round of the quorum algorithm: every member at once without waiting, then the busy ones
//! in list order, then the quorum check and the Redlock validity rule.

use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::member::{MemberGuard, MemberLock};
use super::{MultiLock, MultiLockGuard, QuorumPolicy};
use crate::error::{LockError, Result};
use crate::time::{drift, later, MAX_DURATION};

/// Values with the index of their member.
type Indexed<T> = Vec<(usize, T)>;

/// What one member attempt came to.
enum Node {
    Held(MemberGuard),
    /// Another owner held it for the whole wait.
    Busy,
    Failed(LockError),
    /// To be tried again in the ordered phase.
    Pending,
}

/// How a round ended.
pub(super) enum Outcome {
    Won(MultiLockGuard),
    Missed {
        acquired: usize,
        errors: Vec<(usize, LockError)>,
    },
}

impl<P: QuorumPolicy> MultiLock<P> {
    /// One round: every member at once, then ordered waits, then the lease and validity check.
    pub(super) async fn round(
        &self,
        locks: &[MemberLock],
        budget: Duration,
        lease: Option<Duration>,
    ) -> Outcome {
        let n = locks.len();
        let required = self.required();
        let limit = n - required;
        let start = Instant::now();
        let timeouts: Vec<Duration> = locks
            .iter()
            .map(|l| self.node_timeout_for(l, lease))
            .collect();
        let slowest = timeouts.iter().copied().max().unwrap_or_default();
        let per_lock_wait = if budget.is_zero() {
            Duration::ZERO
        } else {
            P::lock_wait_time(budget, n).min(budget)
        };
        // Members taken early must outlive the round; the caller's lease is re-applied at the end.
        let member_lease = lease.map(|l| {
            l.max(budget.saturating_add(slowest).saturating_mul(2))
                .min(MAX_DURATION)
        });

        // Phase 1: every member at once, no waiting.
        let mut nodes: Vec<Node> = join_all(
            locks
                .iter()
                .zip(&timeouts)
                .map(|(l, t)| take(l, Duration::ZERO, member_lease, *t)),
        )
        .await;

        // Phase 2: busy members are waited for in list order, holding only earlier members.
        let first_busy = nodes.iter().position(|s| matches!(s, Node::Busy));
        if let Some(first) = first_busy.filter(|_| !budget.is_zero()) {
            if held(&nodes) < required && errors(&nodes) <= limit {
                let mut later = Vec::new();
                for node in &mut nodes[first..] {
                    match std::mem::replace(node, Node::Pending) {
                        Node::Held(g) => later.push(g),
                        Node::Failed(e) => *node = Node::Failed(e),
                        Node::Busy | Node::Pending => {}
                    }
                }
                release_all(later).await;
                for i in first..n {
                    if held(&nodes) >= required || failures(&nodes) > limit {
                        break;
                    }
                    if !matches!(nodes[i], Node::Pending) {
                        continue;
                    }
                    let left = budget.saturating_sub(start.elapsed());
                    if left.is_zero() {
                        break;
                    }
                    let wait = per_lock_wait.min(left);
                    nodes[i] = take(&locks[i], wait, member_lease, timeouts[i]).await;
                }
            }
        }

        let (guards, errors) = split(nodes);
        if guards.len() < required {
            let acquired = guards.len();
            release_all(guards.into_iter().map(|(_, g)| g).collect()).await;
            return Outcome::Missed { acquired, errors };
        }
        self.confirm(guards, errors, &timeouts, lease).await
    }

    /// Re-applies the lease to every member taken (owner-checked `PEXPIRE`) and applies the
    /// Redlock validity rule from that moment.
    async fn confirm(
        &self,
        guards: Vec<(usize, MemberGuard)>,
        mut errors: Vec<(usize, LockError)>,
        timeouts: &[Duration],
        lease: Option<Duration>,
    ) -> Outcome {
        let n = self.locks.len();
        let required = self.required();
        let sent = Instant::now();
        let mut guards = guards;
        let checks = join_all(guards.iter_mut().map(|(i, g)| {
            let member_lease = lease.unwrap_or_else(|| g.watchdog_timeout());
            let timeout = timeouts.get(*i).copied().unwrap_or(Duration::from_secs(1));
            async move { (member_lease, reapply(g, member_lease, timeout).await) }
        }))
        .await;
        let mut kept = Vec::new();
        let mut valid_until = Vec::new();
        for ((i, g), (member_lease, check)) in guards.into_iter().zip(checks) {
            match check {
                Ok(true) => {
                    let drift = drift(member_lease);
                    let deadline = later(sent, member_lease);
                    valid_until.push(deadline.checked_sub(drift).unwrap_or(sent));
                    kept.push((i, g));
                }
                // Expired or deleted while the others were taken: a miss, not a node error.
                Ok(false) => {
                    tracing::debug!(node = i, lock = %g.name(), "member lost before the quorum was confirmed")
                }
                Err(e) => errors.push((i, e)),
            }
        }
        // The lock stands while `required` members do: the required-th latest deadline.
        valid_until.sort_unstable_by(|a, b| b.cmp(a));
        let deadline = valid_until.get(required.saturating_sub(1)).copied();
        match deadline {
            Some(d) if kept.len() >= required && Instant::now() < d => {
                Outcome::Won(MultiLockGuard {
                    kind: P::KIND,
                    name: self.label.clone(),
                    taken: Instant::now(),
                    guards: kept,
                    nodes: n,
                    required,
                    lease,
                    valid_until: lease.map(|_| d),
                })
            }
            _ => {
                if kept.len() >= required {
                    tracing::warn!(
                        elapsed = ?sent.elapsed(),
                        "multi-lock quorum reached but its validity had already run out \
                         (lease too short for the latency); giving it back"
                    );
                }
                let acquired = kept.len();
                release_all(kept.into_iter().map(|(_, g)| g).collect()).await;
                Outcome::Missed { acquired, errors }
            }
        }
    }
}

/// The members held and the members failed, each with its index.
fn split(nodes: Vec<Node>) -> (Vec<(usize, MemberGuard)>, Indexed<LockError>) {
    let mut guards = Vec::new();
    let mut errors = Vec::new();
    for (i, node) in nodes.into_iter().enumerate() {
        match node {
            Node::Held(g) => guards.push((i, g)),
            Node::Failed(e) => errors.push((i, e)),
            Node::Busy | Node::Pending => {}
        }
    }
    (guards, errors)
}

fn held(nodes: &[Node]) -> usize {
    nodes.iter().filter(|s| matches!(s, Node::Held(_))).count()
}

fn errors(nodes: &[Node]) -> usize {
    nodes
        .iter()
        .filter(|s| matches!(s, Node::Failed(_)))
        .count()
}

fn failures(nodes: &[Node]) -> usize {
    nodes
        .iter()
        .filter(|s| matches!(s, Node::Busy | Node::Failed(_)))
        .count()
}

/// One member attempt, bounded by its wait plus the node timeout.
async fn take(
    lock: &MemberLock,
    wait: Duration,
    lease: Option<Duration>,
    timeout: Duration,
) -> Node {
    let attempt = lock.take(wait, lease);
    let bound = wait.saturating_add(timeout);
    // A dropped attempt is cancel safe: a script that may have run is trimmed back.
    match tokio::time::timeout(bound, attempt).await {
        Ok(Ok(Some(g))) => Node::Held(g),
        Ok(Ok(None)) => Node::Busy,
        Ok(Err(e)) => Node::Failed(e),
        Err(_) => Node::Failed(LockError::Timeout {
            what: "taking a member lock (node timeout)",
            waited: bound,
        }),
    }
}

/// Re-applies a member's lease from now (owner-checked `PEXPIRE` covering the owner's holds):
/// `Ok(false)` when the member is no longer ours.
async fn reapply(guard: &mut MemberGuard, lease: Duration, timeout: Duration) -> Result<bool> {
    tokio::time::timeout(timeout, guard.reapply_lease(lease))
        .await
        .map_err(|_| LockError::Timeout {
            what: "re-applying the lease to a member lock (node timeout)",
            waited: timeout,
        })?
}

/// Gives members back concurrently and waits until they are released. Each release runs in its
/// own task, so it completes even if the acquire that started it is dropped meanwhile.
async fn release_all(guards: Vec<MemberGuard>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        // No runtime: each guard's drop handles it (the member expires with its lease).
        drop(guards);
        return;
    };
    let tasks: Vec<_> = guards
        .into_iter()
        .map(|g| {
            rt.spawn(async move {
                let name = g.name().to_owned();
                if let Err(e) = g.unlock().await {
                    tracing::debug!(lock = %name, error = %e, "giving back a member lock failed");
                }
            })
        })
        .collect();
    join_all(tasks).await;
}
