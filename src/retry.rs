//! The one retry policy: which failures are worth another try ([`Transient`]) and how long to
//! wait before it ([`Retry`]). Every retry loop in the crate goes through here:
//!
//! * the acquire's first try and its wait loop (`lock/engine/`, `wait.rs`): a failed acquire is tried
//!   again only after the owner's gate knows its outcome may be unknown, so the next try first
//!   trims whatever it may have taken (never a blind retry that inflates the hold count);
//! * the release script: sent again only after a try that cannot have run (a redirection);
//!   after an unknown outcome, retried as the trim to the owner's known count, which cannot
//!   release twice (`lock/engine/release.rs`);
//! * the background settle of an unknown outcome, until the unknown hold's lease has passed;
//! * the subscriber's reconnects (`pubsub.rs`), for as long as the client lives.
//!
//! Every pause is drawn at random ("full jitter"): uniform in `[0, cap]`, where the cap doubles
//! from `Config::retry_delay` up to `MAX_RETRY_DELAY`. Clients that lost their server at the
//! same instant (a failover) therefore come back spread over the cap, not on the same ticks.
//! The command connections reconnect through redis-rs' `ConnectionManager`, whose own backoff
//! (backon's exponential builder) is jittered too; `conn` gives it the same first delay and cap.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{is_connection_error, is_redirect, LockError};

/// A failure that may not happen again: the connection broke or timed out (the command may or
/// may not have run), or the server said to send it again elsewhere or later (a redirection, a
/// failover in progress). Anything else (a wrong key type, a script error) is final.
pub(crate) trait Transient {
    fn is_transient(&self) -> bool;
}

impl Transient for redis::RedisError {
    fn is_transient(&self) -> bool {
        is_connection_error(self) || is_redirect(self)
    }
}

impl Transient for LockError {
    fn is_transient(&self) -> bool {
        self.is_connection_error() || self.is_redirect()
    }
}

#[derive(Clone, Copy, Debug)]
enum Limit {
    /// At most `Config::retry_attempts` tries in a row.
    Attempts,
    /// Until this instant.
    Until(Instant),
    /// For as long as the caller keeps asking.
    Forever,
}

/// Counts consecutive failures and says whether, and after what pause, to try again. The pause
/// is uniform in `[0, cap]`; the cap doubles from `Config::retry_delay` up to `MAX_RETRY_DELAY`.
#[derive(Debug)]
pub(crate) struct Retry<'c> {
    config: &'c Config,
    failures: u32,
    limit: Limit,
    /// The metrics' `op` label of its retries.
    op: &'static str,
    /// The metrics' `kind` label of its retries (`none`: not about one object).
    kind: &'static str,
}

impl<'c> Retry<'c> {
    /// At most `Config::retry_attempts` tries in a row.
    pub(crate) fn attempts(config: &'c Config) -> Self {
        Retry {
            config,
            failures: 0,
            limit: Limit::Attempts,
            op: "other",
            kind: "none",
        }
    }

    /// Tries again until `deadline`.
    pub(crate) fn until(config: &'c Config, deadline: Instant) -> Self {
        Retry {
            config,
            failures: 0,
            limit: Limit::Until(deadline),
            op: "other",
            kind: "none",
        }
    }

    /// Tries again for as long as asked (the caller decides when to stop).
    pub(crate) fn forever(config: &'c Config) -> Self {
        Retry {
            config,
            failures: 0,
            limit: Limit::Forever,
            op: "other",
            kind: "none",
        }
    }

    /// Counts a failure: the pause before the next try, or `None` when the failure is final
    /// or the limit is reached.
    pub(crate) fn pause_after<E: Transient>(&mut self, e: &E) -> Option<Duration> {
        if e.is_transient() {
            self.pause()
        } else {
            None
        }
    }

    /// Counts a failure of any kind (connecting, subscribing): the pause before the next try,
    /// or `None` once the limit is reached.
    pub(crate) fn pause(&mut self) -> Option<Duration> {
        let within = match self.limit {
            Limit::Attempts => self.failures.saturating_add(1) < self.config.retry_attempts(),
            Limit::Until(deadline) => Instant::now() < deadline,
            Limit::Forever => true,
        };
        within.then(|| {
            crate::observe::retry(self.kind, self.op);
            let pause = jittered(self.config.backoff(self.failures));
            self.failures = self.failures.saturating_add(1);
            pause
        })
    }

    /// Names the operation whose retries these are (`redisson_lock_retries_total`'s `op`).
    pub(crate) fn op(mut self, op: &'static str) -> Self {
        self.op = op;
        self
    }

    /// Names the kind of object whose retries these are (`redisson_lock_retries_total`'s
    /// `kind`).
    pub(crate) fn kind(mut self, kind: &'static str) -> Self {
        self.kind = kind;
        self
    }

    /// Counts a failure and, when another try is allowed, sleeps the pause: `true` means try
    /// again.
    pub(crate) async fn again<E: Transient>(&mut self, e: &E) -> bool {
        match self.pause_after(e) {
            Some(p) => {
                tokio::time::sleep(p).await;
                true
            }
            None => false,
        }
    }

    /// A success: the next failure starts from the first pause again.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

/// A pause drawn uniformly from `[0, cap]` (full jitter), to the microsecond.
fn jittered(cap: Duration) -> Duration {
    let cap_us = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX);
    Duration::from_micros(rand::random_range(0..=cap_us))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{is_connection_error, is_redirect};

    fn io_error() -> redis::RedisError {
        std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset").into()
    }

    #[test]
    fn attempts_allow_retry_attempts_tries_in_a_row() {
        let config = Config::new("redis://127.0.0.1/").with_retry_attempts(3);
        let mut r = Retry::attempts(&config);
        assert!(r.pause_after(&io_error()).is_some());
        assert!(r.pause_after(&io_error()).is_some());
        assert_eq!(
            r.pause_after(&io_error()),
            None,
            "third failure is the last try"
        );
        r.reset();
        assert!(r.pause_after(&io_error()).is_some());
    }

    /// A server error reply as the driver hands it over (`-<CODE> <detail>`).
    fn server_error(reply: &str) -> redis::RedisError {
        match redis::parse_redis_value(format!("-{reply}\r\n").as_bytes()) {
            Ok(redis::Value::ServerError(e)) => e.into(),
            other => panic!("not a server error: {other:?}"),
        }
    }

    /// Each reply that means "not run here, send it again": a cluster redirection, a slot in
    /// migration, a failover in progress, a server loading its data, a demoted master, a
    /// replica that lost its master. Each is retried on its own, as the error and as the
    /// crate's error around it (issue 23: only the slot-migration scenario covered them).
    #[test]
    fn each_redirect_and_failover_reply_is_transient() {
        for reply in [
            "MOVED 3999 127.0.0.1:6381",
            "ASK 3999 127.0.0.1:6381",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "CLUSTERDOWN The cluster is down",
            "LOADING Redis is loading the dataset in memory",
            "READONLY You can't write against a read only replica.",
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        ] {
            let e = server_error(reply);
            assert!(e.is_transient(), "{reply}: {e:?} not transient");
            assert!(is_redirect(&e), "{reply}: not a redirect");
            assert!(!is_connection_error(&e), "{reply}: the command did not run");
            let lock = LockError::Redis(e);
            assert!(lock.is_transient() && lock.is_redirect(), "{reply}");
            let config = Config::new("redis://127.0.0.1/").with_retry_attempts(3);
            assert!(
                Retry::attempts(&config).pause_after(&lock).is_some(),
                "{reply}"
            );
        }
    }

    /// Mid-failover the sentinels still name the demoted master, which answers `ROLE` as a
    /// replica: redis-rs says it found no master by that name. Seen in the failover rounds: not
    /// retried, a release of a Sentinel client failed at once and its guard's hold was left to
    /// the background, the next acquire failed the same way, for seconds.
    #[test]
    fn sentinels_naming_no_master_yet_is_transient() {
        for kind in [
            redis::ErrorKind::MasterNameNotFoundBySentinel,
            redis::ErrorKind::NoValidReplicasFoundBySentinel,
        ] {
            let e = redis::RedisError::from((kind, "not found in sentinel"));
            assert!(e.is_transient() && is_redirect(&e), "{kind:?}");
            assert!(!is_connection_error(&e), "{kind:?}: nothing was sent");
            let lock = LockError::Redis(e);
            assert!(lock.is_transient(), "{kind:?}");
        }
    }

    /// A READONLY raised inside a script reaches the client with the script's location after
    /// the message; it is still the same signal.
    #[test]
    fn a_readonly_raised_in_a_script_is_transient() {
        let e = server_error(
            "READONLY You can't write against a read only replica. script: 0b13, on @user_script:13.",
        );
        assert!(e.is_transient() && is_redirect(&e));
    }

    /// Every way a connection is lost (the command may or may not have run) is transient.
    #[test]
    fn each_connection_loss_is_transient() {
        use std::io::ErrorKind::*;
        for kind in [
            ConnectionReset,
            ConnectionAborted,
            ConnectionRefused,
            BrokenPipe,
            UnexpectedEof,
            TimedOut,
            NotConnected,
        ] {
            let e: redis::RedisError = std::io::Error::new(kind, "lost").into();
            assert!(e.is_transient(), "{kind:?}");
            assert!(is_connection_error(&e), "{kind:?}");
            assert!(LockError::Redis(e).is_transient(), "{kind:?}");
        }
        let timeout = LockError::Timeout {
            what: "a reply",
            waited: Duration::from_secs(1),
        };
        assert!(timeout.is_transient());
    }

    /// Errors that will happen again are final: never retried.
    #[test]
    fn final_replies_are_not_transient() {
        for reply in [
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "ERR Error running script",
            "NOPERM this user has no permissions to run the 'evalsha' command",
            "CROSSSLOT Keys in request don't hash to the same slot",
            "NOSCRIPT No matching script. Please use EVAL.",
            "BUSY Redis is busy running a script.",
        ] {
            let e = server_error(reply);
            assert!(!e.is_transient(), "{reply}: retried");
            let config = Config::new("redis://127.0.0.1/").with_retry_attempts(3);
            let lock = LockError::Redis(e);
            assert_eq!(Retry::attempts(&config).pause_after(&lock), None, "{reply}");
        }
        let wrong = LockError::WrongType { key: "k".into() };
        assert!(!wrong.is_transient());
    }

    #[test]
    fn final_errors_are_not_retried_and_pauses_grow() {
        let config = Config::new("redis://127.0.0.1/").with_retry_attempts(10);
        let mut r = Retry::forever(&config);
        let wrong: redis::RedisError =
            (redis::ErrorKind::UnexpectedReturnType, "not a lock").into();
        assert_eq!(r.pause_after(&wrong), None);
        assert!(r.pause().unwrap() <= config.backoff(0));
        assert!(r.pause().unwrap() <= config.backoff(1));
        assert!(config.backoff(1) > config.backoff(0), "the cap grows");
        let mut r = Retry::until(&config, Instant::now());
        assert_eq!(r.pause(), None);
    }

    /// Clients that fail together must not retry together: schedules that start from the same
    /// state differ, every pause stays within `[0, cap]` for its try, and the pauses spread
    /// over the cap (not all near one end).
    #[test]
    fn pauses_are_jittered_within_the_cap() {
        let config = Config::new("redis://127.0.0.1/").with_retry_delay(Duration::from_millis(100));
        let schedule = || {
            let mut r = Retry::forever(&config);
            (0..8).map(|_| r.pause().unwrap()).collect::<Vec<_>>()
        };
        let schedules: Vec<Vec<Duration>> = (0..64).map(|_| schedule()).collect();
        for s in &schedules {
            for (i, p) in s.iter().enumerate() {
                let cap = config.backoff(u32::try_from(i).unwrap());
                assert!(*p <= cap, "pause {i} {p:?} over its cap {cap:?}");
                assert!(cap <= crate::config::MAX_RETRY_DELAY);
            }
        }
        let mut distinct = schedules.clone();
        distinct.sort();
        distinct.dedup();
        assert!(
            distinct.len() > 60,
            "{} distinct schedules of 64: the clients retry in step",
            distinct.len()
        );
        // The first pauses spread over [0, 100 ms]: some in each half.
        let firsts: Vec<Duration> = schedules.iter().map(|s| s[0]).collect();
        let low = firsts
            .iter()
            .filter(|p| **p < Duration::from_millis(50))
            .count();
        assert!(
            low > 0 && low < firsts.len(),
            "{low} of 64 in the lower half"
        );
    }
}
