//! Whether the server may evict keys (`maxmemory` set and a `maxmemory-policy` other than
//! `noeviction`): a lock key evicted under memory pressure is lost for every client, Java's
//! included, and nothing tells anyone. Asked once at connect (a warning) and by
//! `Client::eviction_risk`; on a cluster, of one node (nodes are configured alike).

use redis::aio::ConnectionLike;

/// `Ok(Some(policy))` when the server may evict keys, `Ok(None)` when it may not; the server's
/// error when `CONFIG GET` is refused (an ACL, a managed offering).
pub(crate) async fn eviction_policy<C: ConnectionLike>(
    conn: &mut C,
) -> redis::RedisResult<Option<String>> {
    let config: std::collections::HashMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory*")
        .query_async(conn)
        .await?;
    let limited = config
        .get("maxmemory")
        .is_some_and(|m| m.parse::<u64>().map_or(true, |m| m > 0));
    Ok(match config.get("maxmemory-policy") {
        Some(policy) if limited && policy != "noeviction" => Some(policy.clone()),
        _ => None,
    })
}

/// The connect-time warning: once per client, when the server may evict lock keys.
pub(crate) async fn warn_if_evicting<C: ConnectionLike>(conn: &mut C) {
    match eviction_policy(conn).await {
        Ok(Some(policy)) => tracing::warn!(
            %policy,
            "the server may evict keys (maxmemory is set, maxmemory-policy is not noeviction): \
             a lock key evicted is lost for every client without anyone being told; \
             see docs/production.md, \"Eviction\""
        ),
        Ok(None) => {}
        Err(e) => {
            tracing::debug!(error = %e, "CONFIG GET refused: cannot tell whether the server may evict lock keys")
        }
    }
}
