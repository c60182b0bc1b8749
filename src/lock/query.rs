//! The read-only questions a [`Lock`] answers: is it locked, by whom, how often, for how long.
//! Asked right after a guard of the handle's owner was dropped, each first waits for that
//! guard's background release, so the answer sees it released.

use std::time::Duration;

use redis::AsyncCommands;

use super::Lock;
use crate::error::{from_script, LockError, Result};
use crate::owner::LockOwner;
use crate::raw::LockKind;

/// Remaining time to live of a lock key, from [`Lock::remain_time_to_live`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockTtl {
    /// The lock is not held (Redis `PTTL` -2).
    NotLocked,
    /// The lock is held with no expiry (`PTTL` -1; only a foreign client does that).
    NoExpiry,
    /// The lock expires in this much time unless renewed.
    Expires(Duration),
}

impl<K: LockKind> Lock<K> {
    /// Whether anyone holds the lock (`EXISTS`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// Connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:query:is_locked");
    /// let busy = lock.is_locked().await?;
    /// # Ok(()) })
    /// ```
    pub async fn is_locked(&self) -> Result<bool> {
        self.engine.check_name()?;
        self.engine.after_releases(self.owner()).await;
        let mut conn = self.client().conn();
        match self.engine.kind.is_locked_script(self.name()) {
            Some(script) => {
                let locked: i64 = script
                    .invoke_async(&mut conn)
                    .await
                    .map_err(|e| from_script(K::SPEC.name, self.name(), e))?;
                Ok(locked == 1)
            }
            None => Ok(conn.exists(self.name()).await?),
        }
    }

    /// Whether the current owner holds the lock (Redisson's `isHeldByCurrentThread`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`](crate::LockError::WrongType) if the key is not a lock; connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:query:is_held_by_current");
    /// let guard = lock.lock().await?;
    /// assert!(lock.is_held_by_current().await?);
    /// # Ok(()) })
    /// ```
    pub async fn is_held_by_current(&self) -> Result<bool> {
        self.is_held_by(self.owner()).await
    }

    /// Whether `owner` (of this client) holds the lock (Redisson's `isHeldByThread`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`](crate::LockError::WrongType) if the key is not a lock; connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:query:is_held_by");
    /// use redisson_lock::LockOwner;
    /// let held = lock.is_held_by(LockOwner::new(7)).await?;
    /// # Ok(()) })
    /// ```
    pub async fn is_held_by(&self, owner: LockOwner) -> Result<bool> {
        self.engine.check_name()?;
        self.engine.after_releases(owner).await;
        let mut conn = self.client().conn();
        conn.hexists(self.name(), self.engine.field(owner))
            .await
            .map_err(|e| from_script(K::SPEC.name, self.name(), e))
    }

    /// How many times the current owner holds the lock; 0 when it does not (Redisson's
    /// `getHoldCount`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// [`LockError::WrongType`](crate::LockError::WrongType) if the key is not a lock; connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:query:hold_count");
    /// let outer = lock.lock().await?;
    /// let inner = outer.reenter().await?; // a second `lock()` here would be refused
    /// assert_eq!(lock.hold_count().await?, 2);
    /// # Ok(()) })
    /// ```
    pub async fn hold_count(&self) -> Result<u32> {
        self.engine.check_name()?;
        self.engine.after_releases(self.owner()).await;
        let mut conn = self.client().conn();
        let count: Option<u32> = conn
            .hget(self.name(), self.engine.field(self.owner()))
            .await
            .map_err(|e| from_script(K::SPEC.name, self.name(), e))?;
        Ok(count.unwrap_or(0))
    }

    /// Time left before the lock expires (Redisson's `remainTimeToLive`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// Connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_lock("doc:query:remain_time_to_live");
    /// use redisson_lock::LockTtl;
    /// if let LockTtl::Expires(left) = lock.remain_time_to_live().await? {
    ///     println!("free in at most {left:?}");
    /// }
    /// # Ok(()) })
    /// ```
    pub async fn remain_time_to_live(&self) -> Result<LockTtl> {
        self.engine.check_name()?;
        self.engine.after_releases(self.owner()).await;
        let mut conn = self.client().conn();
        let ttl: i64 = conn.pttl(self.name()).await?;
        Ok(match ttl {
            -2 => LockTtl::NotLocked,
            t if t < 0 => LockTtl::NoExpiry,
            t => LockTtl::Expires(Duration::from_millis(t as u64)),
        })
    }
}

impl Lock<crate::raw::Fenced> {
    /// The fencing token counter's current value, without acquiring (Redisson's
    /// `RFencedLock.getToken`): the token of the latest acquisition by anyone (re-entries
    /// included), `None` before the first (where Java's `getToken` answers `0`; tokens start at
    /// 1). A `GET` of `redisson_lock_token:{<name>}`.
    ///
    /// It says nothing about who holds the lock now; a holder's own token is its guard's
    /// [`token`](crate::LockGuard::token).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (read only).
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`](crate::LockError::InvalidArgument) for a name refused on
    /// a cluster (nothing is sent); [`LockError::UnexpectedReply`](crate::LockError::UnexpectedReply)
    /// when the counter holds something that is not an integer; connection errors.
    ///
    /// # Examples
    ///
    /// ```
    /// # redisson_lock::__doctest::run(|client| async move { let lock = client.get_fenced_lock("doc:query:current_token");
    /// let guard = lock.lock().await?;
    /// assert_eq!(lock.current_token().await?, Some(guard.token()));
    /// # Ok(()) })
    /// ```
    pub async fn current_token(&self) -> Result<Option<i64>> {
        self.engine.check_name()?;
        let key = crate::keys::prefix_name(crate::keys::TOKEN_PREFIX, self.name());
        let mut conn = self.client().conn();
        let value: Option<String> = conn
            .get(&key)
            .await
            .map_err(|e| from_script("fenced", &key, e))?;
        value
            .map(|v| {
                v.parse().map_err(|_| LockError::UnexpectedReply {
                    key: key.clone(),
                    reply: format!("{v:?}"),
                })
            })
            .transpose()
    }
}
