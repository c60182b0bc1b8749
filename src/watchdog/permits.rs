//! The watchdog's renewal of watched permits (`PermitGuard`): every permit's lease end in
//! `{<name>}:timeout` is moved to now + `watchdog_timeout`, one `lua/pes_renew.lua` per
//! semaphore and batch of `Config::watchdog_batch_size` ids. A permit found gone is lost; so is
//! one not renewed for a whole lease (server unreachable).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::Value;

use crate::config::millis;
use crate::holds::permits::WatchedPermit;
use crate::observe;
use crate::scripts::{self, PesKeys};
use crate::shared::ClientInner;
use crate::time::epoch_ms;

/// The metrics' `kind` label of a watched permit.
const KIND: &str = "permit_semaphore";

pub(super) async fn renew(client: &ClientInner) {
    let watched = client.holds.permits.watched();
    if watched.is_empty() {
        return;
    }
    let lease = client.config.watchdog_timeout();
    let started = Instant::now();
    let now = epoch_ms();
    let expiry = now.saturating_add(millis(lease));
    let mut groups: HashMap<Arc<str>, Vec<Arc<WatchedPermit>>> = HashMap::new();
    for p in watched {
        groups.entry(p.name.clone()).or_default().push(p);
    }
    let batch = client.config.watchdog_batch_size().max(1);
    let batches = groups.values().flat_map(|g| g.chunks(batch)).map(|chunk| {
        let first = &chunk[0];
        let keys = PesKeys {
            name: &first.name,
            timeouts: &first.timeouts,
            channel: &first.channel,
            publish: client.publish,
        };
        let inv = scripts::pes_renew(&keys, chunk.iter().map(|p| &p.id[..]), expiry, now);
        let mut conn = client.conn.synced();
        async move {
            let reply: redis::RedisResult<Value> = inv.invoke_async(&mut conn).await;
            (chunk, reply)
        }
    });
    for (chunk, reply) in join_all(batches).await {
        match reply {
            Ok(Value::Array(results)) if results.len() == chunk.len() => {
                let mut renewed = 0;
                for (p, r) in chunk.iter().zip(results) {
                    if matches!(r, Value::Int(1)) {
                        p.renewed(started);
                        renewed += 1;
                    } else if p.lose() {
                        observe::lease_lost(KIND, "watchdog");
                        tracing::warn!(
                            semaphore = %p.name,
                            "permit lost: the watchdog found it gone"
                        );
                    }
                }
                observe::renewed(KIND, renewed);
            }
            Ok(other) => {
                observe::script_error(KIND);
                tracing::warn!(reply = ?other, "unexpected reply to the permit renewal script");
                put_at_risk(chunk);
            }
            Err(e) => {
                observe::script_error(KIND);
                tracing::warn!(error = %e, permits = chunk.len(), "can't renew permits; will retry");
                put_at_risk(chunk);
                expire_unrenewed(chunk, lease);
            }
        }
    }
}

/// A renewal of these permits failed: each is at risk until a renewal is confirmed.
fn put_at_risk(chunk: &[Arc<WatchedPermit>]) {
    for p in chunk {
        if !p.is_lost() && p.risk() {
            observe::at_risk(KIND, "failed");
            tracing::info!(semaphore = %p.name, "permit at risk: its renewal failed");
        }
    }
}

/// Permits not renewed for a whole lease have run out (or are about to): report them.
fn expire_unrenewed(chunk: &[Arc<WatchedPermit>], lease: Duration) {
    let now = Instant::now();
    for p in chunk {
        if now.duration_since(p.renewed_at()) >= lease && p.lose() {
            observe::lease_lost(KIND, "watchdog");
            tracing::warn!(semaphore = %p.name, "permit lost: not renewed for a whole lease");
        }
    }
}
