//! Which server is the master, for the command connection through Sentinel
//! (`conn/sentinel.rs`): what a `+switch-master` announced, checked with `ROLE`, and otherwise
//! what the sentinels name, past any address an announcement said was replaced.
//!
//! Sentinels can disagree for seconds: one that missed the failover still names the old
//! master, which stays writable until the sentinels convert it (up to 10 s). redis-rs's
//! resolution takes the first sentinel that answers and checks the master it names with `ROLE`,
//! which the old master passes in that window; a client that asked it after the announcement
//! went back to the old master (a lock taken there 5.7 s after `+switch-master`, in a failover
//! round under load). So the announcement's own address is followed, as Java Redisson does,
//! and an address it replaced is refused until a later announcement names it again or `ROLE`
//! shows it converted (a replica) and then a master again, or shows its successor demoted, or
//! [`REFUSAL`] has passed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::sentinel::SentinelClient;
use redis::{ConnectionAddr, ConnectionInfo, RedisError, RedisResult, Role};

/// The longest an address a `+switch-master` replaced is refused when no `ROLE` lifts it:
/// sentinels agree within seconds, and convert a reachable old master within about 10 s. After
/// that, what the sentinels name is taken again: a successor that died before it was seen
/// demoted must not keep the only master refused for ever.
const REFUSAL: Duration = Duration::from_secs(60);

/// The addresses (`host:port`) that a `+switch-master` said were replaced, and by which.
#[derive(Debug, Default)]
pub(super) struct Switches {
    replaced: HashMap<String, Replaced>,
}

#[derive(Debug)]
struct Replaced {
    /// The address that took over.
    by: String,
    /// `ROLE` showed the old master converted (a replica) since.
    converted: bool,
    /// When the announcement came.
    at: Instant,
}

impl Switches {
    /// A sentinel announced that `new` replaced `old`.
    pub(super) fn announce(&mut self, old: &str, new: &str) {
        self.replaced.remove(new);
        if old != new {
            let by = new.to_owned();
            self.replaced.insert(
                old.to_owned(),
                Replaced {
                    by,
                    converted: false,
                    at: Instant::now(),
                },
            );
        }
    }

    /// Whether `addr` may not be taken for the master.
    pub(super) fn refuses(&self, addr: &str) -> bool {
        self.refuses_at(addr, Instant::now())
    }

    fn refuses_at(&self, addr: &str, now: Instant) -> bool {
        self.replaced
            .get(addr)
            .is_some_and(|r| now.saturating_duration_since(r.at) < REFUSAL)
    }

    /// What `ROLE` said of `addr`. A replaced master seen as a replica is converted: a master
    /// again after that, it is accepted. A successor seen as a replica no longer stands: the
    /// address it replaced is accepted again.
    pub(super) fn role(&mut self, addr: &str, master: bool) {
        if master {
            if self.replaced.get(addr).is_some_and(|r| r.converted) {
                self.replaced.remove(addr);
            }
            return;
        }
        if let Some(r) = self.replaced.get_mut(addr) {
            r.converted = true;
        }
        self.replaced.retain(|_, r| r.by != addr);
    }

    /// The addresses that replaced others, the last resort of a resolution.
    fn successors(&self) -> Vec<String> {
        self.replaced.values().map(|r| r.by.clone()).collect()
    }
}

/// `host:port` of a TCP address (TLS or not); `None` for a Unix socket.
pub(super) fn addr_of(addr: &ConnectionAddr) -> Option<String> {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            Some(format!("{host}:{port}"))
        }
        _ => None,
    }
}

/// Finds the master: redis-rs's sentinel client first, then each sentinel asked in turn.
pub(crate) struct Resolver {
    sentinel: SentinelClient,
    /// One client per sentinel, with the sentinels' own credentials and TLS.
    sentinels: Vec<redis::Client>,
    master: String,
    timeout: Duration,
    /// The connection settings of the master last resolved (credentials, database, TLS and
    /// certificates), for a master at another address.
    template: Option<ConnectionInfo>,
    pub(super) switches: Switches,
}

impl Resolver {
    /// `sentinels`: the sentinels' own clients; `timeout`: for each connection and reply.
    pub(crate) fn new(
        sentinel: SentinelClient,
        sentinels: Vec<redis::Client>,
        master: &str,
        timeout: Duration,
    ) -> Resolver {
        Resolver {
            sentinel,
            sentinels,
            master: master.to_owned(),
            timeout,
            template: None,
            switches: Switches::default(),
        }
    }

    /// The master now. redis-rs's resolution, checked with `ROLE`, unless it names an address
    /// a `+switch-master` replaced; then each sentinel's answer in turn, and the addresses that
    /// replaced others, the first whose `ROLE` says master and that is not refused.
    pub(super) async fn resolve(&mut self) -> RedisResult<redis::Client> {
        let first = self.sentinel.async_get_client().await;
        let refused = match &first {
            Ok(client) => {
                let info = client.get_connection_info().clone();
                let Some(addr) = addr_of(info.addr()) else {
                    return first;
                };
                if self.template.is_none() {
                    self.template = Some(info);
                }
                self.switches.role(&addr, true);
                if !self.switches.refuses(&addr) {
                    return first;
                }
                tracing::info!(master = %addr, "sentinel: a sentinel names a replaced master");
                Some(addr)
            }
            Err(_) => None,
        };
        let mut candidates = self.named().await;
        candidates.extend(self.switches.successors());
        for addr in candidates {
            if refused.as_ref() == Some(&addr) {
                continue;
            }
            let Some(client) = self.at(&addr) else {
                continue;
            };
            let master = self.is_master(&client).await;
            if let Some(master) = master {
                self.switches.role(&addr, master);
            }
            if master == Some(true) && !self.switches.refuses(&addr) {
                return Ok(client);
            }
        }
        // ROLE on the successor may have lifted the refusal of redis-rs's answer.
        if refused.is_some_and(|addr| !self.switches.refuses(&addr)) {
            return first;
        }
        first.and_then(|_| {
            Err(RedisError::from((
                redis::ErrorKind::MasterNameNotFoundBySentinel,
                "no sentinel names a master that was not replaced",
            )))
        })
    }

    /// The announced master `addr` of a `+switch-master`, if `ROLE` there says master.
    pub(super) async fn announced(&mut self, addr: &str) -> Option<redis::Client> {
        let client = self.at(addr)?;
        let master = self.is_master(&client).await?;
        self.switches.role(addr, master);
        master.then_some(client)
    }

    /// The master's client at `addr` (`host:port`): the template's settings, its address moved.
    fn at(&self, addr: &str) -> Option<redis::Client> {
        let template = self.template.as_ref()?;
        let (host, port) = addr.rsplit_once(':')?;
        let (host, port) = (host.to_owned(), port.parse().ok()?);
        let moved = match template.addr().clone() {
            ConnectionAddr::Tcp(..) => ConnectionAddr::Tcp(host, port),
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            },
            _ => return None,
        };
        redis::Client::open(template.clone().set_addr(moved)).ok()
    }

    /// The masters the sentinels name, in the configured order, each once.
    async fn named(&self) -> Vec<String> {
        let mut named: Vec<String> = Vec::new();
        for sentinel in &self.sentinels {
            let ask = async {
                let mut conn = sentinel.get_multiplexed_async_connection().await?;
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&self.master)
                    .query_async::<(String, u16)>(&mut conn)
                    .await
            };
            if let Ok(Ok((host, port))) = tokio::time::timeout(self.timeout, ask).await {
                let addr = format!("{host}:{port}");
                if !named.contains(&addr) {
                    named.push(addr);
                }
            }
        }
        named
    }

    /// Whether `ROLE` on `client` says master (`INFO replication` where `ROLE` is refused);
    /// `None` when neither answers.
    async fn is_master(&self, client: &redis::Client) -> Option<bool> {
        let ask = async {
            let mut conn = client.get_multiplexed_async_connection().await.ok()?;
            match redis::cmd("ROLE").query_async::<Role>(&mut conn).await {
                Ok(role) => Some(matches!(role, Role::Primary { .. })),
                Err(_) => {
                    let info: String = redis::cmd("INFO")
                        .arg("replication")
                        .query_async(&mut conn)
                        .await
                        .ok()?;
                    let role = info.lines().find_map(|l| l.strip_prefix("role:"))?;
                    Some(role.trim() == "master")
                }
            }
        };
        tokio::time::timeout(self.timeout, ask).await.ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_master_is_refused_until_seen_converted_and_master_again() {
        let mut s = Switches::default();
        s.announce("a:1", "b:2");
        assert!(s.refuses("a:1"));
        assert!(!s.refuses("b:2"));
        // Still a master in the window before the conversion: still refused.
        s.role("a:1", true);
        assert!(s.refuses("a:1"));
        // Converted, then a master again (a later failover back): accepted.
        s.role("a:1", false);
        assert!(s.refuses("a:1"));
        s.role("a:1", true);
        assert!(!s.refuses("a:1"));
    }

    #[test]
    fn a_later_announcement_or_a_demoted_successor_lifts_the_refusal() {
        let mut s = Switches::default();
        s.announce("a:1", "b:2");
        s.announce("b:2", "a:1");
        assert!(!s.refuses("a:1"));
        assert!(s.refuses("b:2"));
        let mut s = Switches::default();
        s.announce("a:1", "b:2");
        assert_eq!(s.successors(), vec!["b:2".to_owned()]);
        s.role("b:2", false);
        assert!(!s.refuses("a:1"));
    }

    #[test]
    fn a_refusal_nothing_lifts_ends_after_the_refusal_window() {
        let mut s = Switches::default();
        s.announce("a:1", "b:2");
        let at = s.replaced["a:1"].at;
        let second = Duration::from_secs(1);
        assert!(s.refuses_at("a:1", at + REFUSAL - second));
        assert!(!s.refuses_at("a:1", at + REFUSAL));
        assert!(!s.refuses_at("a:1", at + REFUSAL + second));
        assert!(!s.refuses_at("b:2", at));
    }

    #[test]
    fn addresses_read_alike_with_and_without_tls() {
        let plain = ConnectionAddr::Tcp("10.0.0.1".into(), 6379);
        let tls = ConnectionAddr::TcpTls {
            host: "10.0.0.1".into(),
            port: 6379,
            insecure: false,
            tls_params: None,
        };
        assert_eq!(addr_of(&plain).as_deref(), Some("10.0.0.1:6379"));
        assert_eq!(addr_of(&plain), addr_of(&tls));
    }
}
