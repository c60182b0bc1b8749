//! The crate's one error type.

use std::time::Duration;

/// Everything that can go wrong with a lock.
///
/// Match on the variant, or use the `is_*` predicates, which keep working as variants are added.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The caller does not hold the lock it tried to release (Java's
    /// `IllegalMonitorStateException: attempt to unlock lock, not locked by current thread`).
    #[error("attempt to unlock lock `{name}`, not held by owner `{field}`")]
    NotOwner {
        /// The lock name.
        name: String,
        /// The hash field (`<client uuid>:<owner id>`) that was checked.
        field: String,
    },
    /// A non-reentrant lock ([`Client::get_non_reentrant_lock`](crate::Client::get_non_reentrant_lock),
    /// [`Client::get_non_reentrant_fair_lock`](crate::Client::get_non_reentrant_fair_lock))
    /// was acquired again by the owner that holds it (Java's `IllegalMonitorStateException:
    /// Lock '...' is non-reentrant and is already held by thread ...`). Nothing was changed:
    /// the owner still holds it once.
    #[error("lock `{name}` is non-reentrant and is already held by owner `{field}`")]
    AlreadyHeld {
        /// The lock name.
        name: String,
        /// The holder's hash field (`<client uuid>:<owner id>`).
        field: String,
    },
    /// The owner is the default one (the current tokio task, or the thread outside a task) and
    /// it already holds this lock, or is acquiring it right now, in this client: futures that
    /// run concurrently in one task (`join!`, `select!`, `FuturesUnordered`,
    /// `buffer_unordered`) share that owner, so taking the lock a second time would re-enter
    /// it instead of waiting, and both would be inside at once. Refused locally, before
    /// anything is sent; nothing was changed.
    ///
    /// To exclude each other, run the acquisitions in separate tasks (`tokio::spawn`): each
    /// task is its own owner. To re-enter on purpose, as Redisson's re-entrant locks allow,
    /// use the hold you have ([`LockGuard::reenter`](crate::LockGuard::reenter)) or bind an
    /// explicit owner ([`Lock::with_owner`](crate::Lock::with_owner)): then the hold count goes
    /// up, exactly as in Redisson.
    ///
    /// On a read-write lock, readers share: the default owner may read while it reads, but it
    /// may not write while it reads or writes, nor read while it writes (Redisson's downgrade
    /// takes the read lock through the write guard's owner: `read_lock().with_owner(w.owner())`).
    #[error(
        "lock `{name}` is already held or being acquired by owner {owner}, the default owner of \
         this task (or thread): a second acquire would re-enter it, not wait. Futures in one task \
         share its owner; acquire in separate tasks to exclude each other, or re-enter on purpose \
         with `guard.reenter()` or an explicit owner (`lock.with_owner(LockOwner::unique())`)"
    )]
    Reentry {
        /// The lock name.
        name: String,
        /// The default owner that holds it or is acquiring it.
        owner: crate::owner::LockOwner,
    },
    /// A hold this guard had is gone: its lease expired, the key was deleted or force-unlocked,
    /// or the server lost it (restart without persistence, failover).
    #[error("the lease on lock `{name}` was lost before it was released")]
    LeaseLost {
        /// The lock name.
        name: String,
    },
    /// A permit id that the permit-expirable semaphore does not hold: never acquired, already
    /// released, or expired and returned to the pool (Java's `IllegalArgumentException: Permit
    /// with id ... has already been released or doesn't exist`). Nothing was changed, except
    /// that an expired permit not yet reclaimed was returned to the pool, as Redisson does.
    /// `is_invalid_argument()` is `true`.
    #[error("permit `{permit}` of semaphore `{name}` has already been released, has expired, or does not exist")]
    UnknownPermit {
        /// The semaphore name.
        name: String,
        /// The permit id (32 hex characters).
        permit: String,
    },
    /// An operation did not finish within its time budget.
    #[error("{what} did not complete within {waited:?}")]
    Timeout {
        /// What timed out (e.g. "subscribing to the unlock channel").
        what: &'static str,
        /// How long was waited.
        waited: Duration,
    },
    /// An argument was rejected before anything was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// A URL in the configuration cannot be parsed (`is_invalid_argument()` is `true`).
    #[error("invalid Redis URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server refused this client's credentials: no password given to a server that
    /// requires one (`NOAUTH`), or a wrong user or password (`WRONGPASS`). Reported by
    /// [`Client::connect`](crate::Client::connect), never by a later lock call.
    #[error("authentication to Redis failed: {detail}")]
    Auth {
        /// The server's or the driver's words.
        detail: String,
    },
    /// A TLS connection could not be set up: the server's certificate is not trusted (unknown
    /// CA, wrong host name, expired), the server does not speak TLS on a `rediss://` URL (or
    /// speaks only TLS on a `redis://` one), or a certificate or key could not be read.
    /// Reported by [`Client::connect`](crate::Client::connect), never retried.
    #[error("TLS connection to `{url}` failed: {reason}")]
    Tls {
        /// The URL, with any password replaced by `***` (empty when no URL is involved).
        url: String,
        /// What went wrong, with the driver's words.
        reason: String,
    },
    /// The server's ACL refused this user the channel a waiting call subscribes to (`NOPERM` on
    /// `SUBSCRIBE` or `SSUBSCRIBE`). No release could wake the call, so it ends with this error
    /// instead of waiting; it holds nothing (a fair-lock waiter leaves the queue). The user needs
    /// the channel patterns of docs/locks.md, "Least privilege". `is_permission_denied()` is
    /// `true`.
    #[error("the server refused this user the channel `{channel}` (grant it with a `&` channel pattern): {detail}")]
    ChannelDenied {
        /// The channel that was refused.
        channel: String,
        /// The server's words.
        detail: String,
    },
    /// The key exists but is not a lock (it holds another Redis type).
    #[error("key `{key}` holds a value that is not a lock (WRONGTYPE)")]
    WrongType {
        /// The offending key.
        key: String,
    },
    /// Redis answered something our scripts never return.
    #[error("unexpected reply from Redis for `{key}`: {reply}")]
    UnexpectedReply {
        /// The lock key involved.
        key: String,
        /// A debug rendering of the reply.
        reply: String,
    },
    /// A [`RateLimiter`](crate::RateLimiter) refused the request, as Redisson's scripts do:
    /// `reason` is Redisson's message (`RateLimiter is not initialized`, or `Requested permits
    /// amount cannot exceed defined rate`). Nothing was written.
    #[error("rate limiter `{name}`: {reason}")]
    RateLimiter {
        /// The rate limiter's name.
        name: String,
        /// Redisson's message.
        reason: &'static str,
    },
    /// A connection, protocol or server error from Redis.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// No replica confirmed a lock write within the replica sync timeout
    /// ([`Config::with_replica_sync`](crate::Config::with_replica_sync)): a failover could lose
    /// it, so an acquire is undone (as Redisson releases and fails).
    #[error("none of the {replicas} replicas confirmed the write on lock `{key}` within {timeout:?}; an acquire is undone")]
    ReplicaSync {
        /// The lock key.
        key: String,
        /// Replicas connected to its master.
        replicas: i64,
        /// How long `WAIT` waited.
        timeout: Duration,
    },
    /// The server refused `WAIT` or `WAITAOF` (a proxy or serverless offering that does not
    /// forward it, an ACL that denies it), so lock writes cannot be confirmed on replicas (or
    /// fsyncs), and the [`ReplicaSync::Required`](crate::ReplicaSync::Required) policy (the
    /// default) does not allow going on without: reported by
    /// [`Client::connect`](crate::Client::connect) when its `WAIT` probe is refused (a refused
    /// `WAITAOF` probe is an [`InvalidArgument`](LockError::InvalidArgument), or a
    /// [`Redis`](LockError::Redis) error with `is_permission_denied()` when an ACL denies it), or by the lock
    /// write whose command was refused (an acquire is undone). Turn replica sync off, or allow
    /// [`ReplicaSync::BestEffort`](crate::ReplicaSync::BestEffort).
    #[error("the server refused `{command}` ({detail}): lock writes cannot be confirmed; turn replica sync off or allow ReplicaSync::BestEffort")]
    SyncRefused {
        /// `WAIT` or `WAITAOF`.
        command: &'static str,
        /// The server's words.
        detail: String,
    },
    /// The server runs no Lua scripts: every lock operation is a Lua script, in Redisson as
    /// here. Reported by [`Client::connect`](crate::Client::connect) when its `SCRIPT LOAD`
    /// probe finds no scripting engine (Valkey 9 made Lua a module: a server started without
    /// it, or with it unloaded, answers `Could not find scripting engine 'lua'`) or no
    /// `SCRIPT` command at all (some proxies).
    #[error("the server runs no Lua scripts ({detail}): every lock operation is a Lua script; on Valkey 9 or later load the Lua engine module (it is built in and loaded unless the server's configuration removes it)")]
    NoScripting {
        /// The server's words.
        detail: String,
    },
    /// A [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock) operation failed on too
    /// many nodes; the error carries each failed node's error.
    #[error(transparent)]
    Quorum(QuorumError),
    /// The client was shut down ([`Client::shutdown`](crate::Client::shutdown)): it takes no
    /// new locks or permits, and waits in progress end with this error. Nothing was sent.
    #[error("the client was shut down: it takes no new locks or permits")]
    ShutDown,
}

impl LockError {
    /// `true` for [`LockError::Timeout`] and for Redis response or connection timeouts.
    pub fn is_timeout(&self) -> bool {
        match self {
            LockError::Timeout { .. } => true,
            LockError::Redis(e) => e.is_timeout(),
            _ => false,
        }
    }

    /// `true` for [`LockError::NotOwner`].
    pub fn is_not_owner(&self) -> bool {
        matches!(self, LockError::NotOwner { .. })
    }

    /// `true` for [`LockError::AlreadyHeld`]: the holder of a non-reentrant lock tried to
    /// take it again.
    pub fn is_already_held(&self) -> bool {
        matches!(self, LockError::AlreadyHeld { .. })
    }

    /// `true` for [`LockError::Reentry`]: the default owner (the current task) asked again for
    /// a lock it holds or is acquiring.
    pub fn is_reentry(&self) -> bool {
        matches!(self, LockError::Reentry { .. })
    }

    /// `true` for [`LockError::LeaseLost`].
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, LockError::LeaseLost { .. })
    }

    /// `true` for [`LockError::WrongType`].
    pub fn is_wrong_type(&self) -> bool {
        matches!(self, LockError::WrongType { .. })
    }

    /// `true` for [`LockError::InvalidArgument`], [`LockError::InvalidUrl`] and
    /// [`LockError::UnknownPermit`].
    pub fn is_invalid_argument(&self) -> bool {
        matches!(
            self,
            LockError::InvalidArgument(_)
                | LockError::InvalidUrl { .. }
                | LockError::UnknownPermit { .. }
        )
    }

    /// `true` for [`LockError::Auth`]: missing or wrong credentials.
    pub fn is_auth(&self) -> bool {
        matches!(self, LockError::Auth { .. })
    }

    /// `true` for [`LockError::Tls`].
    pub fn is_tls(&self) -> bool {
        matches!(self, LockError::Tls { .. })
    }

    /// `true` when the server's ACL refused a command, key or channel to this user (`NOPERM`,
    /// or [`LockError::ChannelDenied`]); the message names what was refused (docs/locks.md,
    /// "Least privilege").
    pub fn is_permission_denied(&self) -> bool {
        match self {
            LockError::Redis(e) => e.code() == Some("NOPERM"),
            LockError::ChannelDenied { .. } => true,
            _ => false,
        }
    }

    /// `true` for [`LockError::RateLimiter`]: a rate limiter not initialized, or asked for
    /// more permits than its rate.
    pub fn is_rate_limiter_refused(&self) -> bool {
        matches!(self, LockError::RateLimiter { .. })
    }

    /// `true` for [`LockError::SyncRefused`]: the server refuses `WAIT` or `WAITAOF`.
    pub fn is_sync_refused(&self) -> bool {
        matches!(self, LockError::SyncRefused { .. })
    }

    /// `true` for [`LockError::ShutDown`]: the client was shut down.
    pub fn is_shut_down(&self) -> bool {
        matches!(self, LockError::ShutDown)
    }

    /// `true` for [`LockError::Quorum`].
    pub fn is_quorum(&self) -> bool {
        matches!(self, LockError::Quorum(_))
    }

    /// `true` when no replica confirmed a lock write within the replica sync timeout
    /// ([`Config::with_replica_sync`](crate::Config::with_replica_sync)); an acquire is undone.
    pub fn is_no_synced_replicas(&self) -> bool {
        matches!(self, LockError::ReplicaSync { .. })
    }

    /// `true` for a cluster redirection or a node that refused the write for now (`MOVED`,
    /// `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, `READONLY`, `LOADING`, `MASTERDOWN`), or sentinels that
    /// name no valid master yet (mid-failover): the command did not run and may be sent again.
    pub fn is_redirect(&self) -> bool {
        matches!(self, LockError::Redis(e) if is_redirect(e))
    }

    /// `true` when the server could not be reached or the connection broke: trying again later
    /// may succeed.
    pub fn is_connection_error(&self) -> bool {
        match self {
            LockError::Redis(e) => is_connection_error(e),
            LockError::Timeout { .. } => true,
            // The write's fate is as unknown as after a lost reply; trying again may succeed.
            LockError::ReplicaSync { .. } => true,
            _ => false,
        }
    }
}

/// Missing or wrong credentials (`NOAUTH`, `WRONGPASS`, or the driver's authentication error).
pub(crate) fn is_auth_error(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// A Redis error whose outcome is unknown or whose connection is broken: the command may or may
/// not have run.
pub(crate) fn is_connection_error(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
}

/// A server reply saying the command was not executed here and may be sent again: a cluster
/// redirection or a node that cannot take writes right now.
pub(crate) fn is_redirect(e: &redis::RedisError) -> bool {
    matches!(
        e.code(),
        Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" | "READONLY" | "LOADING" | "MASTERDOWN")
    ) || matches!(
        // The sentinels name no master that says it is one: mid-failover, between the
        // promotion and the sentinels' switch (they still name the demoted master, which
        // answers `ROLE` as a replica). Nothing was sent to a master.
        e.kind(),
        redis::ErrorKind::MasterNameNotFoundBySentinel
            | redis::ErrorKind::NoValidReplicasFoundBySentinel
    )
}

/// Map a script error on `key` to our variants (WRONGTYPE becomes [`LockError::WrongType`]).
/// `kind`: the object's kind, for the script error counter.
pub(crate) fn from_script(kind: &'static str, key: &str, e: redis::RedisError) -> LockError {
    crate::observe::script_error(kind);
    let wrong_type = e.code() == Some("WRONGTYPE")
        || e.detail().is_some_and(|d| d.contains("WRONGTYPE"))
        || e.to_string().contains("WRONGTYPE");
    if wrong_type {
        LockError::WrongType {
            key: key.to_owned(),
        }
    } else {
        LockError::Redis(e)
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = LockError> = std::result::Result<T, E>;

// === MultiLock / RedLock: the per-node failure report ===

/// Which multi-lock operation a [`QuorumError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuorumOperation {
    /// Acquiring: too many members failed with an error for the quorum to be reachable.
    Acquire,
    /// Releasing: some members could not be released (the others were).
    Unlock,
    /// Asking whether the current owner holds it
    /// ([`MultiLock::is_held_by_current`](crate::MultiLock::is_held_by_current)): too many
    /// members failed to answer for the answer to be known.
    Query,
}

/// A [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock) operation that failed on
/// too many nodes, with the reason of each failed node: [`LockError::Quorum`].
///
/// Nodes are numbered by their position in the list given to
/// [`MultiLock::new`](crate::MultiLock::new).
///
/// # Examples
///
/// ```
/// # redisson_lock::__doctest::run(|client| async move { let redlock = redisson_lock::__doctest::redlock(&client, "doc:error:quorum");
/// match redlock.try_lock().await {
///     Ok(Some(guard)) => drop(guard),
///     Ok(None) => println!("held by someone else"),
///     Err(redisson_lock::LockError::Quorum(q)) => {
///         for (node, error) in &q.errors {
///             eprintln!("node {node}: {error}");
///         }
///     }
///     Err(e) => eprintln!("{e}"),
/// }
/// # Ok(()) })
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct QuorumError {
    /// What was being done.
    pub operation: QuorumOperation,
    /// Nodes on which it succeeded: member locks taken (acquire), released (unlock) or found
    /// held (query).
    pub acquired: usize,
    /// How many had to succeed: the quorum (acquire) or every held member (unlock).
    pub required: usize,
    /// The nodes that failed with an error, by position, with the error.
    pub errors: Vec<(usize, LockError)>,
}

impl QuorumError {
    pub(crate) fn new(
        operation: QuorumOperation,
        acquired: usize,
        required: usize,
        mut errors: Vec<(usize, LockError)>,
    ) -> Self {
        errors.sort_by_key(|(i, _)| *i);
        QuorumError {
            operation,
            acquired,
            required,
            errors,
        }
    }
}

impl std::fmt::Display for QuorumError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.operation {
            QuorumOperation::Acquire => write!(
                f,
                "lock quorum not reached: {} of {} required locks taken",
                self.acquired, self.required
            )?,
            QuorumOperation::Query => write!(
                f,
                "multi-lock state unknown: {} of {} required members held, the others failed",
                self.acquired, self.required
            )?,
            QuorumOperation::Unlock => write!(
                f,
                "unlock failed on {} of {} nodes",
                self.required.saturating_sub(self.acquired),
                self.required
            )?,
        }
        for (node, e) in &self.errors {
            write!(f, "; node {node}: {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for QuorumError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.errors
            .first()
            .map(|(_, e)| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal names the lock and the owner and says both ways out: separate tasks to
    /// exclude, the guard or an explicit owner to re-enter on purpose.
    #[test]
    fn a_reentry_refusal_says_how_to_reenter_on_purpose() {
        let e = LockError::Reentry {
            name: "orders".into(),
            owner: crate::owner::LockOwner::new(42),
        };
        assert!(e.is_reentry() && !e.is_already_held() && !e.is_connection_error());
        let text = e.to_string();
        for part in [
            "`orders`",
            "owner 42",
            "separate tasks",
            "guard.reenter()",
            "with_owner",
        ] {
            assert!(text.contains(part), "{part:?} missing from: {text}");
        }
    }

    #[test]
    fn display_lists_nodes_in_order() {
        let e = QuorumError::new(
            QuorumOperation::Acquire,
            1,
            2,
            vec![
                (2, LockError::InvalidArgument("b")),
                (0, LockError::InvalidArgument("a")),
            ],
        );
        assert_eq!(
            e.to_string(),
            "lock quorum not reached: 1 of 2 required locks taken; \
             node 0: invalid argument: a; node 2: invalid argument: b"
        );
        let u = QuorumError::new(QuorumOperation::Unlock, 2, 3, vec![]);
        assert_eq!(u.to_string(), "unlock failed on 1 of 3 nodes");
    }
}
