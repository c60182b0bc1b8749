//! Where the CLI is: the server it read (address, role, server name and version, from `ROLE`
//! and `INFO server`) and the topology, named in every command's output, with a plain note when
//! the URL is the built-in default. A refused `INFO` or `ROLE` (an ACL user without them) is
//! said, never an error.

use serde::Serialize;

/// The URL `--url` takes when neither the flag nor `$REDIS_URL` gives one.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The note that goes with the built-in default URL.
pub const DEFAULT_NOTE: &str = "built-in default URL, REDIS_URL not set";

/// One server the command read.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Node {
    /// `host:port` as the CLI reached it (a Unix socket's path).
    pub address: String,
    /// `master`, `replica` or `sentinel` (`ROLE`); `null` when `ROLE` was refused.
    pub role: Option<String>,
    /// `redis` or `valkey` (`INFO server`); `null` when `INFO` was refused.
    pub name: Option<String>,
    /// The server's version (`valkey_version` on Valkey, else `redis_version`).
    pub version: Option<String>,
    /// What the server refused to say (`INFO` or `ROLE` and its error); `null`: nothing.
    pub error: Option<String>,
}

/// The deployment: its topology, its (redacted) URL, and the servers read.
#[derive(Clone, Debug, Serialize)]
pub struct Server {
    /// `standalone`, `sentinel` or `cluster`.
    pub topology: &'static str,
    /// The URL (cluster: the seeds; sentinel: the sentinels), user and password as `***`.
    pub url: String,
    /// Whether the URL is the built-in default (no `--url`, no `$REDIS_URL`).
    pub default_url: bool,
    /// Through Sentinel: the master's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_name: Option<String>,
    /// The first of `nodes`, flattened: the server a standalone or Sentinel command read.
    #[serde(flatten)]
    pub node: Node,
    /// Every server read: one outside a cluster; each master of a cluster.
    pub nodes: Vec<Node>,
}

impl Server {
    pub fn new(
        topology: &'static str,
        url: String,
        default_url: bool,
        master_name: Option<String>,
        nodes: Vec<Node>,
    ) -> Server {
        Server {
            topology,
            url,
            default_url,
            master_name,
            node: nodes.first().cloned().unwrap_or_default(),
            nodes,
        }
    }

    /// `redis 7.0.15 master at 127.0.0.1:6379 (standalone)`, one node after another on a
    /// cluster, with the default-URL note when it applies.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(Node::describe).collect();
        let mut how = vec![self.topology.to_owned()];
        match (self.topology, &self.master_name) {
            ("sentinel", Some(master)) => how.push(format!("master `{master}` via {}", self.url)),
            ("cluster", _) => how.push(format!("{} master(s), seeds {}", nodes.len(), self.url)),
            _ => {}
        }
        if self.default_url {
            how.push(DEFAULT_NOTE.to_owned());
        }
        let nodes = if nodes.is_empty() {
            "no server read".to_owned()
        } else {
            nodes.join("; ")
        };
        format!("{nodes} ({})", how.join("; "))
    }

    /// The line every text output starts with.
    pub fn line(&self) -> String {
        format!("server: {}", self.describe())
    }
}

impl Node {
    /// `redis 7.0.15 master at 127.0.0.1:6379`, with what was refused.
    fn describe(&self) -> String {
        let mut words = Vec::new();
        match (&self.name, &self.version) {
            (Some(n), Some(v)) => words.push(format!("{n} {v}")),
            (Some(n), None) => words.push(n.clone()),
            _ => words.push("a server".to_owned()),
        }
        if let Some(role) = &self.role {
            words.push(role.clone());
        }
        words.push(format!("at {}", self.address));
        if let Some(e) = &self.error {
            words.push(format!("({e})"));
        }
        words.join(" ")
    }
}

/// Reads one server: `ROLE` and `INFO server` on `conn`. Never fails: a refusal is recorded.
pub async fn read<C: redis::aio::ConnectionLike>(conn: &mut C, address: String) -> Node {
    let mut node = Node {
        address,
        ..Node::default()
    };
    let mut refused = Vec::new();
    match redis::cmd("ROLE")
        .query_async::<Vec<redis::Value>>(conn)
        .await
    {
        Ok(reply) => node.role = role(reply.first()),
        Err(e) => refused.push(format!("ROLE refused: {e}")),
    }
    match redis::cmd("INFO")
        .arg("server")
        .query_async::<String>(conn)
        .await
    {
        Ok(text) => (node.name, node.version) = name_and_version(&text),
        Err(e) => refused.push(format!("INFO refused: {e}")),
    }
    if !refused.is_empty() {
        node.error = Some(refused.join("; "));
    }
    node
}

/// `master`, `replica` (Redis says `slave`) or `sentinel`, from `ROLE`'s first element.
fn role(first: Option<&redis::Value>) -> Option<String> {
    let text = match first? {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    Some(if text == "slave" {
        "replica".to_owned()
    } else {
        text
    })
}

/// The server's name and version from `INFO server`: Valkey says `server_name:valkey` and
/// `valkey_version`; Redis has `redis_version` only.
pub fn name_and_version(info: &str) -> (Option<String>, Option<String>) {
    let get = |key: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':'))
            .map(str::to_owned)
    };
    let valkey = get("valkey_version");
    let name = get("server_name").or_else(|| {
        if valkey.is_some() {
            Some("valkey".to_owned())
        } else {
            get("redis_version").map(|_| "redis".to_owned())
        }
    });
    (name, valkey.or_else(|| get("redis_version")))
}

/// A document with the server beside its own fields (`inspect`, `force-unlock`, ...).
#[derive(Serialize)]
pub struct WithServer<'a, T: Serialize> {
    pub server: &'a Server,
    #[serde(flatten)]
    pub doc: &'a T,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_and_valkey_name_themselves() {
        let redis = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
        assert_eq!(
            name_and_version(redis),
            (Some("redis".into()), Some("7.0.15".into()))
        );
        let valkey =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n";
        assert_eq!(
            name_and_version(valkey),
            (Some("valkey".into()), Some("8.0.1".into()))
        );
    }

    #[test]
    fn the_line_says_where_and_whether_it_is_the_default() {
        let node = Node {
            address: "127.0.0.1:6379".into(),
            role: Some("master".into()),
            name: Some("redis".into()),
            version: Some("7.0.15".into()),
            error: None,
        };
        let s = Server::new("standalone", DEFAULT_URL.into(), true, None, vec![node]);
        assert_eq!(
            s.line(),
            "server: redis 7.0.15 master at 127.0.0.1:6379 (standalone; built-in default URL, REDIS_URL not set)"
        );
        let refused = Node {
            address: "10.0.0.5:6379".into(),
            error: Some("INFO refused: NOPERM".into()),
            ..Node::default()
        };
        let s = Server::new(
            "standalone",
            "redis://10.0.0.5:6379".into(),
            false,
            None,
            vec![refused],
        );
        assert_eq!(
            s.line(),
            "server: a server at 10.0.0.5:6379 (INFO refused: NOPERM) (standalone)"
        );
    }
}
