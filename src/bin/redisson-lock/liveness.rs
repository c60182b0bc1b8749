//! `list --wide` and `list --orphans`: each listed lock's holders joined with `CLIENT LIST` of
//! every master, to tell a holder whose client is connected from a dead one whose lock waits
//! out its lease.
//!
//! A holder's field is `<client uuid>:<id>`, and this crate names every connection
//! `<name>:<client uuid>` (`Config::with_client_name`). A holder is:
//! - `live`: a connection on some master carries its uuid (its address is shown);
//! - `orphan`: none does, and every connection of the masters carries a client uuid (or is a
//!   replication link or a sentinel's): no client there can be its, so its client is gone;
//! - `unknown`: none does, but some connections carry no uuid (unnamed, or named without one:
//!   Java Redisson names its connections with its `clientName` setting or not at all): its
//!   client may be one of them, alive.
//!
//! A lock is `live` when one of its holders is, an `orphan` when each of them is, else
//! `unknown`. `CLIENT LIST` refused: `--wide` shows no connection and says so, `--orphans`
//! cannot tell and fails.

use serde::Serialize;

use crate::clients::{self, ClientConn};
use crate::list::{self, Entry, Options};
use crate::output;
use crate::target::Target;
use crate::{Failure, Result};

/// Whether a holder's client is connected (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    Live,
    Orphan,
    Unknown,
}

impl Liveness {
    fn as_str(self) -> &'static str {
        match self {
            Liveness::Live => "live",
            Liveness::Orphan => "orphan",
            Liveness::Unknown => "unknown",
        }
    }
}

/// One holder of a listed lock, and its client's connections.
#[derive(Debug, Serialize)]
struct Holding {
    /// `<client uuid>:<id>` (a writer's without `:write`).
    owner: String,
    /// The connections whose name carries the owner's uuid (as `inspect` shows them).
    connections: Vec<ClientConn>,
    /// `null` when `CLIENT LIST` was refused.
    liveness: Option<Liveness>,
}

/// A `list` entry with what `--wide` adds.
#[derive(Debug, Serialize)]
struct Wide<'a> {
    #[serde(flatten)]
    entry: &'a Entry,
    owners: Vec<Holding>,
    /// The lock's: `live` when one holder is, `orphan` when each is, else `unknown`; `null`
    /// for a key that is no lock, or when `CLIENT LIST` was refused.
    liveness: Option<Liveness>,
}

/// `list --wide` (`orphans_only`: `list --orphans`, the orphan locks only).
pub async fn run(target: &Target, options: &Options, orphans_only: bool, json: bool) -> Result<()> {
    let entries = list::collect(target, options).await?;
    let all = match clients::every(target).await {
        Ok(all) => Some(all),
        Err(e) if orphans_only => {
            return Err(Failure(format!(
                "cannot tell orphan locks: CLIENT LIST refused ({}); without it nothing says \
                 whether a holder's client is connected",
                e.0
            )))
        }
        Err(e) => {
            crate::output::errln!(
                "note: CLIENT LIST refused ({}): holders shown without their connections",
                e.0
            );
            None
        }
    };
    let anonymous = all.as_deref().map(|all| clients::anonymous(all).len());
    let judged: Vec<Wide<'_>> = entries
        .iter()
        .map(|e| judge(e, all.as_deref(), anonymous.unwrap_or(0)))
        .collect();
    let unknown = judged
        .iter()
        .filter(|w| w.liveness == Some(Liveness::Unknown))
        .count();
    let shown: Vec<&Wide<'_>> = judged
        .iter()
        .filter(|w| !orphans_only || w.liveness == Some(Liveness::Orphan))
        .collect();
    if json {
        let liveness = serde_json::json!({
            "clients_read": all.is_some(),
            "anonymous_connections": anonymous,
            "unknown_locks": unknown,
        });
        let mut doc = vec![list::lead(target, Some(liveness))?];
        for w in &shown {
            doc.push(serde_json::to_string(w)?);
        }
        output::line(&format!("[{}]", doc.join(",")))?;
    } else {
        output::out(&output::table(&rows(&shown)))?;
    }
    let what = if orphans_only {
        "orphan lock(s)"
    } else {
        "lock(s)"
    };
    crate::output::errln!("{} {what}", shown.len());
    if unknown > 0 {
        crate::output::errln!(
            "{unknown} lock(s) {}of unknown liveness: no connection carries their holders' client \
             uuid, but {} connection(s) on the masters carry no uuid at all, and a Java Redisson \
             client (which does not name its connections with its uuid) may be among them",
            if orphans_only { "not listed, " } else { "" },
            anonymous.unwrap_or(0)
        );
    }
    Ok(())
}

/// An entry's holders, each with its connections and liveness, and the lock's.
fn judge<'a>(entry: &'a Entry, all: Option<&[ClientConn]>, anonymous: usize) -> Wide<'a> {
    let owners: Vec<Holding> = entry
        .owners
        .iter()
        .map(|owner| {
            let connections = all.map(|all| clients::of_owner(all, owner));
            let liveness = connections
                .as_ref()
                .map(|c| match (c.is_empty(), anonymous) {
                    (false, _) => Liveness::Live,
                    (true, 0) => Liveness::Orphan,
                    (true, _) => Liveness::Unknown,
                });
            Holding {
                owner: owner.clone(),
                connections: connections.unwrap_or_default(),
                liveness,
            }
        })
        .collect();
    let each = |l: Liveness| owners.iter().all(|h| h.liveness == Some(l));
    let liveness = if !entry.kind.is_lock() || owners.is_empty() || all.is_none() {
        None
    } else if owners.iter().any(|h| h.liveness == Some(Liveness::Live)) {
        Some(Liveness::Live)
    } else if each(Liveness::Orphan) {
        Some(Liveness::Orphan)
    } else {
        Some(Liveness::Unknown)
    };
    Wide {
        entry,
        owners,
        liveness,
    }
}

/// The text table: one row per holder (a key without holders: one row), the lock's columns
/// repeated on each.
fn rows(shown: &[&Wide<'_>]) -> Vec<Vec<String>> {
    let mut rows = vec![
        ["KIND", "HOLDERS", "TTL", "STATE", "CONN", "HOLDER", "NAME"]
            .map(String::from)
            .to_vec(),
    ];
    for w in shown {
        let e = w.entry;
        let lock = |state: String, conn: String, holder: String| {
            vec![
                e.kind.as_str().to_owned(),
                e.holders.to_string(),
                output::opt_ttl(e.ttl_ms),
                state,
                conn,
                holder,
                e.name.clone(),
            ]
        };
        if w.owners.is_empty() {
            rows.push(lock("-".into(), "-".into(), "-".into()));
        }
        for h in &w.owners {
            let state = h.liveness.map_or("?", Liveness::as_str).to_owned();
            let conn = match h.connections.as_slice() {
                [] => "-".to_owned(),
                [one] => one.addr.clone(),
                [first, more @ ..] => format!("{}(+{})", first.addr, more.len()),
            };
            rows.push(lock(state, conn, h.owner.clone()));
        }
    }
    rows
}
