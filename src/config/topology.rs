//! Where the deployment is ([`Topology`]); its `Debug` hides passwords.

use super::redact::redact;

/// Where the Redis deployment is. Its `Debug` replaces passwords in URLs by `***`.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Topology {
    /// One server (it may have replicas).
    Single {
        /// `redis://host:port[/db]`.
        url: String,
    },
    /// A Redis Cluster, reached through any of these nodes.
    Cluster {
        /// Seed node URLs.
        nodes: Vec<String>,
    },
    /// A master found through Sentinel.
    Sentinel {
        /// Sentinel URLs.
        sentinels: Vec<String>,
        /// The monitored master's name.
        master: String,
    },
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls = |urls: &[String]| urls.iter().map(|u| redact(u)).collect::<Vec<_>>();
        match self {
            Topology::Single { url } => {
                f.debug_struct("Single").field("url", &redact(url)).finish()
            }
            Topology::Cluster { nodes } => f
                .debug_struct("Cluster")
                .field("nodes", &urls(nodes))
                .finish(),
            Topology::Sentinel { sentinels, master } => f
                .debug_struct("Sentinel")
                .field("sentinels", &urls(sentinels))
                .field("master", master)
                .finish(),
        }
    }
}
