//! What a [`MultiLock`] can say about itself without acquiring.

use futures_util::future::join_all;

use super::{MultiLock, QuorumPolicy};
use crate::error::{LockError, QuorumError, QuorumOperation, Result};

impl<P: QuorumPolicy> MultiLock<P> {
    /// Whether the current owner holds the multi-lock: at least [`required`](Self::required)
    /// members (all of them for a [`MultiLock`], a majority for a [`RedLock`](crate::RedLock))
    /// are held by their member lock's current owner (the owner bound with
    /// [`Lock::with_owner`](crate::Lock::with_owner), else the calling task), each an
    /// `HEXISTS` on its node, all at once. Redisson's MultiLock and RedLock throw
    /// `UnsupportedOperationException` for `isHeldByCurrentThread`.
    ///
    /// A member whose node does not answer within the node timeout counts as failed; the
    /// answer is still given when the members that did answer settle it either way.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// [`LockError::Quorum`] with [`QuorumOperation::Query`] when failed members leave it
    /// undecided (held by fewer than the quorum among those that answered, and enough failed
    /// to make up the rest); [`LockError::InvalidArgument`] for an empty member name or a zero
    /// node timeout (nothing is sent).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:query:is_held_by_current2");
    /// let guard = redlock.lock().await?;
    /// assert!(redlock.is_held_by_current().await?);
    /// guard.unlock().await?;
    /// assert!(!redlock.is_held_by_current().await?);
    /// # Ok(()) })
    /// ```
    pub async fn is_held_by_current(&self) -> Result<bool> {
        self.check(None)?;
        let checks = self.locks.iter().map(|lock| {
            // The owner is the caller's: bind it before the checks run.
            let member = lock.bound();
            let timeout = self.node_timeout_for(lock, None);
            async move {
                match tokio::time::timeout(timeout, member.is_held_by_current()).await {
                    Ok(r) => r,
                    Err(_) => Err(LockError::Timeout {
                        what: "a multi-lock member's query",
                        waited: timeout,
                    }),
                }
            }
        });
        let mut held = 0;
        let mut errors = Vec::new();
        for (node, r) in join_all(checks).await.into_iter().enumerate() {
            match r {
                Ok(true) => held += 1,
                Ok(false) => {}
                Err(e) => errors.push((node, e)),
            }
        }
        let required = self.required();
        if held >= required {
            return Ok(true);
        }
        if held + errors.len() < required {
            return Ok(false);
        }
        Err(LockError::Quorum(QuorumError::new(
            QuorumOperation::Query,
            held,
            required,
            errors,
        )))
    }
}
