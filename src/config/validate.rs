//! The rules a configuration must meet before anything connects, each with the message its
//! violation gives.

use std::time::Duration;

use super::{Config, Topology};
use crate::error::{LockError, Result};

/// The longest client name: the connection name adds `:` and the 36 characters of the client
/// id, and Redis shows names whole in `CLIENT LIST`.
pub(crate) const MAX_CLIENT_NAME: usize = 64;

/// A name `CLIENT SETNAME` accepts (no spaces, newlines or other characters outside `!`..=`~`),
/// not empty, at most [`MAX_CLIENT_NAME`] characters.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CLIENT_NAME
        && name.bytes().all(|b| (b'!'..=b'~').contains(&b))
}

impl Config {
    /// Every rule a configuration must meet, checked in order; the URLs are parsed (and the
    /// certificates read) next, by `endpoints`, still before anything connects.
    pub(crate) fn validate(&self) -> Result<()> {
        const MAX: Duration = crate::time::MAX_DURATION;
        let durations = [
            self.watchdog_timeout,
            self.response_timeout,
            self.connection_timeout,
            self.subscription_timeout,
            self.fair_lock_wait_timeout,
            self.retry_delay,
        ];
        let aof = self.aof_sync;
        // Each rule with the message its violation gives, checked in order; the URLs last.
        let rules: [(bool, &'static str); 16] = [
            (
                durations.iter().any(|d| *d > MAX) || self.replica_sync().is_some_and(|d| d > MAX),
                "durations in the configuration must be at most 100 years",
            ),
            (
                self.watchdog_timeout < Duration::from_millis(3),
                "watchdog timeout must be at least 3 ms (it is renewed every third of it)",
            ),
            (
                self.response_timeout.is_zero(),
                "response timeout must be non-zero",
            ),
            (
                self.connection_timeout.is_zero(),
                "connection timeout must be non-zero",
            ),
            (
                self.subscription_timeout.is_zero(),
                "subscription timeout must be non-zero",
            ),
            (
                self.fair_lock_wait_timeout.is_zero(),
                "fair lock wait timeout must be non-zero",
            ),
            (
                matches!(&self.topology, Topology::Cluster { nodes } if nodes.is_empty()),
                "a cluster needs at least one node",
            ),
            (
                matches!(&self.topology, Topology::Sentinel { sentinels, .. } if sentinels.is_empty()),
                "sentinel mode needs at least one sentinel",
            ),
            (
                matches!(&self.topology, Topology::Sentinel { master, .. } if master.is_empty()),
                "the sentinel master name must not be empty",
            ),
            (
                self.replica_sync == Some(Some(Duration::ZERO)),
                "replica sync timeout must be non-zero (use None to turn it off)",
            ),
            (
                aof.is_some_and(|a| a.timeout.is_zero() || a.timeout > MAX),
                "the WAITAOF timeout must be non-zero and at most 100 years",
            ),
            (
                aof.is_some_and(|a| !a.local && a.replicas == 0),
                "WAITAOF needs the master (local) or at least one replica to confirm",
            ),
            (
                self.latch_queue == 0,
                "the latch queue must hold at least 1 deletion",
            ),
            (
                self.retry_attempts == 0,
                "retry attempts must be at least 1",
            ),
            (
                self.watchdog_batch_size == 0,
                "the watchdog batch size must be at least 1",
            ),
            (
                self.client_name.as_deref().is_some_and(|n| !valid_name(n)),
                "the client name must be 1 to 64 printable ASCII characters without spaces \
                 (Redis' rule for connection names)",
            ),
        ];
        match rules.iter().find(|(broken, _)| *broken) {
            Some((_, message)) => Err(LockError::InvalidArgument(message)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_names_follow_redis_rule() {
        let check = |name: &str| Config::new("redis://h/").with_client_name(name).validate();
        assert!(check("billing-api").is_ok());
        assert!(check("pod_7:eu-west").is_ok());
        for bad in [
            "",
            "two words",
            "line\nbreak",
            "tab\there",
            "caf\u{e9}",
            &"x".repeat(65),
        ] {
            let e = check(bad).unwrap_err();
            assert!(e.is_invalid_argument(), "{bad:?}: {e:?}");
            assert!(e.to_string().contains("client name"), "{e}");
        }
    }
}
