//! Who holds it: a holder's field is `<client uuid>:<thread or owner id>`, and clients name
//! their connections with a name that contains that uuid (this crate's `redisson-lock:<uuid>`,
//! `<name>:<uuid>`; a Java client whose name carries it). `CLIENT LIST` on every master gives
//! each such connection's address, age and idle time.

use serde::Serialize;

use crate::target::Target;
use crate::Result;

/// A server-side connection whose name contains a holder's client uuid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClientConn {
    /// `ip:port` of the client as the server sees it.
    pub addr: String,
    /// The connection's name (`CLIENT SETNAME`).
    pub name: String,
    /// Seconds since the connection was opened.
    pub age_s: i64,
    /// Seconds since its last command.
    pub idle_s: i64,
    /// The server (`host:port`) it is connected to, on a cluster; `None` otherwise.
    pub node: Option<String>,
    /// `CLIENT LIST`'s flags (`S`: a replica's link, `M`: the master's, `N`: none).
    #[serde(skip)]
    pub flags: String,
}

/// Every named connection of every master (the one server outside a cluster). `Err` when
/// `CLIENT LIST` is refused (an ACL user without it).
pub async fn named(target: &Target) -> Result<Vec<ClientConn>> {
    let mut all = every(target).await?;
    all.retain(|c| !c.name.is_empty());
    Ok(all)
}

/// Every connection of every master, named or not. `Err` when `CLIENT LIST` is refused.
pub async fn every(target: &Target) -> Result<Vec<ClientConn>> {
    let nodes = target.node_conns_with_addr(true).await?;
    let mut all = Vec::new();
    if nodes.is_empty() {
        let text: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut target.conn())
            .await?;
        all.extend(parse(&text, None));
    }
    for (addr, mut conn) in nodes {
        let text: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut conn)
            .await?;
        all.extend(parse(&text, Some(addr)));
    }
    Ok(all)
}

/// The connections whose name contains the client uuid of `owner` (`<uuid>:<id>`).
pub fn of_owner(all: &[ClientConn], owner: &str) -> Vec<ClientConn> {
    let uuid = owner.split(':').next().unwrap_or(owner);
    if uuid.len() < 8 {
        return Vec::new(); // too short to identify anyone
    }
    all.iter()
        .filter(|c| c.name.contains(uuid))
        .cloned()
        .collect()
}

/// Connections that could be a lock holder's client without carrying its client uuid in
/// their name: unnamed, or named without a uuid (a Java Redisson client, which names its
/// connections with its `clientName` setting or not at all; `redis-cli`). Replication links
/// (flags `S`, `M`) and the sentinels' own connections (`sentinel-<id>-cmd`, `-pubsub`) hold
/// no lock and are left out.
pub fn anonymous(all: &[ClientConn]) -> Vec<&ClientConn> {
    all.iter()
        .filter(|c| !c.flags.contains(['S', 'M']))
        .filter(|c| !c.name.starts_with("sentinel-"))
        .filter(|c| !has_uuid(&c.name))
        .collect()
}

/// Whether `name` contains a uuid (`8-4-4-4-12` hex digits), as this crate's `<name>:<uuid>`.
pub fn has_uuid(name: &str) -> bool {
    name.as_bytes().windows(36).any(|w| {
        w.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
    })
}

/// Every connection of a `CLIENT LIST` reply, named or not (an unnamed one's `name` is empty).
pub fn parse(text: &str, node: Option<String>) -> Vec<ClientConn> {
    text.lines()
        .filter_map(|line| {
            let get = |key: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            };
            Some(ClientConn {
                addr: get("addr")?.to_owned(),
                name: get("name").unwrap_or_default().to_owned(),
                age_s: get("age").and_then(|v| v.parse().ok()).unwrap_or(0),
                idle_s: get("idle").and_then(|v| v.parse().ok()).unwrap_or(0),
                node: node.clone(),
                flags: get("flags").unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_list_lines_parse_and_match_by_uuid() {
        let text = "id=3 addr=10.0.0.7:51234 laddr=10.0.0.1:6379 fd=8 name=orders:0badc0de-0000-4000-8000-000000000001 age=120 idle=2 flags=N db=0\n\
                    id=4 addr=10.0.0.8:40000 laddr=10.0.0.1:6379 fd=9 name= age=5 idle=5 flags=N db=0\n";
        let mut all = parse(text, None);
        all.retain(|c| !c.name.is_empty());
        assert_eq!(all.len(), 1, "unnamed connections are left out");
        assert_eq!(all[0].addr, "10.0.0.7:51234");
        assert_eq!((all[0].age_s, all[0].idle_s), (120, 2));
        let found = of_owner(&all, "0badc0de-0000-4000-8000-000000000001:17");
        assert_eq!(found.len(), 1);
        assert!(of_owner(&all, "0badc0de-0000-4000-8000-000000000002:17").is_empty());
    }

    #[test]
    fn connections_without_a_client_uuid_are_anonymous_but_replication_and_sentinels_are_not() {
        let text =
            "id=3 addr=10.0.0.7:1 name=orders:0badc0de-0000-4000-8000-000000000001 flags=N\n\
                    id=4 addr=10.0.0.8:2 name= flags=N\n\
                    id=5 addr=10.0.0.8:3 name=billing flags=P\n\
                    id=6 addr=10.0.0.9:4 name= flags=S\n\
                    id=7 addr=10.0.0.9:5 name=sentinel-2f1c3a7e-cmd flags=N\n";
        let all = parse(text, None);
        let anonymous: Vec<&str> = anonymous(&all).iter().map(|c| c.addr.as_str()).collect();
        assert_eq!(anonymous, ["10.0.0.8:2", "10.0.0.8:3"]);
        assert!(!has_uuid("0badc0de-0000-4000-8000-00000000000"));
    }
}
