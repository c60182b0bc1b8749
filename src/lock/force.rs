//! Force-unlocking: Redisson's `forceUnlock` (delete whoever holds it, wake a waiter), and the
//! operator's safer form that deletes only while the holders it was shown still hold the lock.

use super::Lock;
use crate::error::{from_script, Result};
use crate::observe;
use crate::raw::LockKind;
use crate::scripts::holders_seen;

/// What [`Lock::force_unlock_held_by`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForceUnlock {
    /// The lock was deleted and a waiter woken.
    Deleted,
    /// Nobody held it (for a read-write side: not held in that mode).
    NotLocked,
    /// Others than the holders named hold it now (released and taken again meanwhile, or a
    /// reader came or went): nothing changed.
    HeldByOthers,
}

impl<K: LockKind> Lock<K> {
    /// Deletes the lock whoever holds it and wakes a waiter (Redisson's `forceUnlock`).
    /// Returns whether there was a lock to delete.
    ///
    /// Guards of the deleted holds in this client are told they are lost at their next renewal
    /// or release.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the delete either ran or did not.
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`](crate::LockError::WrongType) when the key exists but is not a
    /// lock (it is left alone), and connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:lock:force_unlock");
    /// let deleted = lock.force_unlock().await?;
    /// # Ok(()) })
    /// ```
    pub async fn force_unlock(&self) -> Result<bool> {
        Ok(self.force("").await? == ForceUnlock::Deleted)
    }

    /// [`force_unlock`](Lock::force_unlock), but only while exactly the holders `fields` names
    /// hold the lock: the hash fields (`<client uuid>:<id>`, a writer's with `:write`) an
    /// operator was shown. Checked and deleted in one script, so a lock released and taken by
    /// someone else between the look and the delete is left alone
    /// ([`ForceUnlock::HeldByOthers`]). The operator CLI's `force-unlock` deletes this way.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the check and delete either ran or did not.
    ///
    /// # Errors
    ///
    /// As [`force_unlock`](Lock::force_unlock).
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move {
    /// use redisson_lock::ForceUnlock;
    /// let lock = client.get_lock("doc:lock:force_unlock_held_by");
    /// lock.lock().await?.detach();
    /// let someone_else = vec![format!("{}:1", client.id())];
    /// assert_eq!(lock.force_unlock_held_by(&someone_else).await?, ForceUnlock::HeldByOthers);
    /// # Ok(()) })
    /// ```
    pub async fn force_unlock_held_by(&self, fields: &[String]) -> Result<ForceUnlock> {
        self.force(&holders_seen(fields)).await
    }

    async fn force(&self, seen: &str) -> Result<ForceUnlock> {
        self.engine.check_name()?;
        let mut conn = self.client().conn_synced();
        let op = self.engine.op("", 0, 0);
        let script = self.engine.kind.force_unlock_script(&op, seen);
        let run = Box::pin(async {
            let reply: i64 = script
                .invoke_async(&mut conn)
                .await
                .map_err(|e| from_script(K::SPEC.name, self.name(), e))?;
            Ok(match reply {
                1 => ForceUnlock::Deleted,
                -1 => ForceUnlock::HeldByOthers,
                _ => ForceUnlock::NotLocked,
            })
        });
        // Its message wakes the waiters (ours too: a direct local wake-up measured less fair).
        observe::traced(self.observed("force_unlock"), run, |done| match done {
            ForceUnlock::Deleted => "deleted",
            ForceUnlock::NotLocked => "not_locked",
            ForceUnlock::HeldByOthers => "held_by_others",
        })
        .await
    }
}
