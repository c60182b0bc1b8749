//! Fencing that reaches the resource: [`FencedValue`], a value kept in Redis that only the
//! holder with the newest [`FencedLock`](crate::FencedLock) token may write. A token is only
//! useful if the resource checks it; this is the check for resources in Redis (the SQL recipe is
//! in docs/locks.md, "Fencing the resource").

use crate::error::{from_script, LockError, Result};
use crate::keys::{slot_of, suffix_name};
use crate::retry::Retry;
use crate::scripts;
use crate::shared::Client;

/// The suffix of a fenced value's fence key: `{<key>}:redisson_lock_fence`.
const FENCE_SUFFIX: &str = "redisson_lock_fence";

/// A value kept in Redis under `key` (a STRING) that accepts a write only with a fencing token
/// at least as great as the greatest that wrote it before
/// ([`Client::get_fenced_value`](crate::Client::get_fenced_value)).
///
/// A holder of a [`FencedLock`](crate::FencedLock) that stalls past its lease (a pause, a
/// slow network) may still try to write after another holder took the lock over: the new
/// holder's token is greater, so once it has written, the stale holder's write is refused
/// (`Ok(false)`) and changes nothing. The same holder may write as often as it likes with its
/// token. Every writer of the value must write through this (with its token), or the check
/// protects nothing.
///
/// Keys: the value `<key>`, and its fence `{<key>}:redisson_lock_fence` (the greatest token
/// that wrote it, a STRING; it never expires). Both live in one hash slot.
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move {
/// let guard = client.get_fenced_lock("wallet").lock().await?;
/// let balance = client.get_fenced_value("wallet:balance");
/// if !balance.set(guard.token(), "100").await? {
///     // A later holder has written: this hold is stale, stop.
/// }
/// guard.unlock().await?;
/// # Ok(()) })
/// ```
#[derive(Clone, Debug)]
pub struct FencedValue {
    client: Client,
    key: String,
    fence: String,
    /// Why this key cannot be used here, found when the handle is made.
    refused: Option<&'static str>,
}

impl FencedValue {
    pub(crate) fn new(client: Client, key: String) -> FencedValue {
        let fence = suffix_name(&key, FENCE_SUFFIX);
        let refused = if key.is_empty() {
            Some("a fenced value needs a non-empty key")
        } else if client.is_cluster() && slot_of(key.as_bytes()) != slot_of(fence.as_bytes()) {
            Some(
                "on a Redis Cluster the key must keep its fence in its hash slot: use a key \
                 without `{` `}` or with one non-empty hash tag",
            )
        } else {
            None
        };
        FencedValue {
            client,
            key,
            fence,
            refused,
        }
    }

    /// The value's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fence's key: `{<key>}:redisson_lock_fence` (`<key>:redisson_lock_fence` when the
    /// key already has a `{`).
    pub fn fence_key(&self) -> &str {
        &self.fence
    }

    /// Writes `value` if `token` is at least the greatest token that wrote this value before;
    /// `Ok(false)` (nothing changed) when a greater one has. Sent as it is (no `WAIT`), retried
    /// after connection errors (a repeat of the same write changes nothing more).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in the sense that the write is all or nothing: dropped after it was sent, it
    /// may or may not have happened; sending it again is harmless.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] for a token below 1 (tokens start at 1), an empty key, or
    /// on a cluster a key whose fence falls in another slot: nothing is sent.
    /// [`LockError::WrongType`] when the fence key holds something else; connection errors
    /// after the client's retries.
    pub async fn set(&self, token: i64, value: impl AsRef<[u8]>) -> Result<bool> {
        if let Some(why) = self.refused {
            return Err(LockError::InvalidArgument(why));
        }
        if token < 1 {
            return Err(LockError::InvalidArgument(
                "a fencing token is at least 1 (FencedLock tokens start at 1)",
            ));
        }
        self.client.check_open()?;
        let call = scripts::fenced_set(&self.key, &self.fence, token, value.as_ref());
        let config = self.client.config();
        let mut retry = Retry::attempts(config).op("fencing").kind("fenced_value");
        loop {
            let mut conn = self.client.conn();
            match call.invoke_async::<i64>(&mut conn).await {
                Ok(n) => return Ok(n == 1),
                Err(e) => {
                    let e = from_script("fenced_value", &self.key, e);
                    if !retry.again(&e).await {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// The greatest token that wrote this value (`None`: never written through a fence).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] as for [`set`](Self::set); connection errors.
    pub async fn last_token(&self) -> Result<Option<i64>> {
        if let Some(why) = self.refused {
            return Err(LockError::InvalidArgument(why));
        }
        let mut conn = self.client.conn();
        Ok(redis::cmd("GET")
            .arg(&self.fence)
            .query_async(&mut conn)
            .await?)
    }

    /// The value (`None` when the key does not exist).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    ///
    /// # Errors
    ///
    /// [`LockError::InvalidArgument`] as for [`set`](Self::set); connection errors.
    pub async fn get(&self) -> Result<Option<Vec<u8>>> {
        if let Some(why) = self.refused {
            return Err(LockError::InvalidArgument(why));
        }
        let mut conn = self.client.conn();
        Ok(redis::cmd("GET")
            .arg(&self.key)
            .query_async(&mut conn)
            .await?)
    }
}
