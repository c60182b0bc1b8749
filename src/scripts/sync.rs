//! Typed builders for the synchronizers' scripts (RSemaphore, RCountDownLatch,
//! RPermitExpirableSemaphore); the scripts themselves are declared with the locks' in
//! [`super`].

use super::*;

// === RSemaphore ===

/// The names every semaphore script may touch.
#[derive(Debug)]
pub(crate) struct SemKeys<'k> {
    /// The permit count `<name>`.
    pub(crate) name: &'k str,
    /// `redisson_sc:{<name>}`.
    pub(crate) channel: &'k str,
    /// `PUBLISH` or `SPUBLISH`.
    pub(crate) publish: &'k str,
}

pub(crate) fn semaphore_acquire(name: &str, receipt: &str, permits: u32, receipt_ms: u64) -> Call {
    call!(SEMAPHORE_ACQUIRE; name, receipt; permits, receipt_ms)
}

pub(crate) fn semaphore_undo(k: &SemKeys<'_>, receipt: &str) -> Call {
    call!(SEMAPHORE_UNDO; k.name, k.channel, receipt; k.publish)
}

pub(crate) fn semaphore_release(
    k: &SemKeys<'_>,
    receipt: &str,
    permits: u32,
    receipt_ms: u64,
) -> Call {
    call!(SEMAPHORE_RELEASE; k.name, k.channel, receipt; permits, k.publish, receipt_ms)
}

/// `ttl_ms`: the key's time to live, 0 for none.
pub(crate) fn semaphore_try_set(k: &SemKeys<'_>, permits: i32, ttl_ms: u64) -> Call {
    call!(SEMAPHORE_TRY_SET; k.name, k.channel; permits, k.publish, ttl_ms)
}

pub(crate) fn semaphore_release_if_exists(
    k: &SemKeys<'_>,
    receipt: &str,
    permits: u32,
    receipt_ms: u64,
) -> Call {
    call!(SEMAPHORE_RELEASE_IF_EXISTS; k.name, k.channel, receipt; permits, k.publish, receipt_ms)
}

// === TTLs of every synchronizer ===

/// `ttl_ms`: `None` removes the keys' TTL (`PERSIST`).
pub(crate) fn sync_expire(keys: &[&str], ttl_ms: Option<u64>) -> Call {
    let mut call = Call::new(&SYNC_EXPIRE, keys.len());
    keys.iter().for_each(|k| _ = call.key(k));
    match ttl_ms {
        Some(ms) => call.arg(ms),
        None => call.arg("persist"),
    };
    call
}

pub(crate) fn semaphore_add(k: &SemKeys<'_>, permits: i32) -> Call {
    call!(SEMAPHORE_ADD; k.name, k.channel; permits, k.publish)
}

pub(crate) fn semaphore_drain(name: &str) -> Call {
    call!(SEMAPHORE_DRAIN; name;)
}

// === RCountDownLatch ===

/// `CountDownLatchPubSub.ZERO_COUNT_MESSAGE`: the count reached zero (opens the latch).
pub(crate) const ZERO_COUNT_MESSAGE: &str = "0";
/// `CountDownLatchPubSub.NEW_COUNT_MESSAGE`: a count was set or the latch deleted.
pub(crate) const NEW_COUNT_MESSAGE: &str = "1";

/// KEYS of every latch script: the count and the channel; and the publish command.
pub(crate) fn latch_try_set(name: &str, channel: &str, count: i64, publish: &str) -> Call {
    call!(LATCH_TRY_SET; name, channel; NEW_COUNT_MESSAGE, count, publish)
}

pub(crate) fn latch_count_down(name: &str, channel: &str, publish: &str) -> Call {
    call!(LATCH_COUNT_DOWN; name, channel; ZERO_COUNT_MESSAGE, publish)
}

pub(crate) fn latch_delete(name: &str, channel: &str, publish: &str) -> Call {
    call!(LATCH_DELETE; name, channel; NEW_COUNT_MESSAGE, publish)
}

// === RPermitExpirableSemaphore ===

/// The score of a permit that never expires (Redisson's `nonExpirableTimeout`).
pub(crate) const NON_EXPIRABLE: u64 = 922_337_203_685_477;

/// The names every permit-expirable-semaphore script touches.
#[derive(Debug)]
pub(crate) struct PesKeys<'k> {
    /// The available count `<name>`.
    pub(crate) name: &'k str,
    /// `{<name>}:timeout`.
    pub(crate) timeouts: &'k str,
    /// `redisson_sc:{<name>}`.
    pub(crate) channel: &'k str,
    /// `PUBLISH` or `SPUBLISH`.
    pub(crate) publish: &'k str,
}

/// Takes one permit per id in `ids`, all or none.
pub(crate) fn pes_acquire<'i>(
    k: &PesKeys<'_>,
    ids: impl ExactSizeIterator<Item = &'i [u8]>,
    expiry_ms: u64,
    now_ms: u64,
) -> Call {
    let mut call = Call::new(&PES_ACQUIRE, 3);
    call.key(k.name).key(k.timeouts).key(k.channel);
    call.arg(ids.len())
        .arg(expiry_ms)
        .arg(now_ms)
        .arg(NON_EXPIRABLE)
        .arg(k.publish);
    ids.for_each(|id| _ = call.arg(id));
    call
}

pub(crate) fn pes_release(k: &PesKeys<'_>, id: &[u8], now_ms: u64) -> Call {
    call!(PES_RELEASE; k.name, k.channel, k.timeouts; id, 1, now_ms, k.publish)
}

pub(crate) fn pes_available(k: &PesKeys<'_>, now_ms: u64) -> Call {
    call!(PES_AVAILABLE; k.name, k.timeouts, k.channel; now_ms, k.publish)
}

pub(crate) fn pes_update_lease(k: &PesKeys<'_>, id: &[u8], expiry_ms: u64, now_ms: u64) -> Call {
    call!(PES_UPDATE_LEASE; k.name, k.timeouts, k.channel; id, expiry_ms, now_ms, k.publish)
}

pub(crate) fn pes_add(k: &PesKeys<'_>, permits: i32) -> Call {
    call!(PES_ADD; k.name, k.channel; permits, k.publish)
}

/// `acquired`: the permits held; else available + held.
pub(crate) fn pes_counts(k: &PesKeys<'_>, now_ms: u64, acquired: bool) -> Call {
    let which = if acquired { "acquired" } else { "total" };
    call!(PES_COUNTS; k.name, k.timeouts, k.channel; now_ms, k.publish, which)
}

pub(crate) fn pes_set_permits(k: &PesKeys<'_>, permits: i32) -> Call {
    call!(PES_SET_PERMITS; k.name, k.channel, k.timeouts; permits, k.publish)
}

pub(crate) fn pes_lease_time(k: &PesKeys<'_>, id: &[u8], now_ms: u64) -> Call {
    call!(PES_LEASE_TIME; k.timeouts; id, now_ms, NON_EXPIRABLE)
}

pub(crate) fn pes_release_many<'i>(
    k: &PesKeys<'_>,
    ids: impl Iterator<Item = &'i [u8]>,
    now_ms: u64,
) -> Call {
    let mut call = Call::new(&PES_RELEASE_MANY, 3);
    call.key(k.name).key(k.channel).key(k.timeouts);
    call.arg(now_ms).arg(k.publish);
    ids.for_each(|id| _ = call.arg(id));
    call
}

// === RRateLimiter ===

/// The five keys every rate-limiter script receives, in Redisson's order.
#[derive(Debug)]
pub(crate) struct RateKeys<'k> {
    /// The configuration hash `<name>`.
    pub(crate) name: &'k str,
    /// `{<name>}:value` (OVERALL).
    pub(crate) value: &'k str,
    /// `{<name>}:value:<client id>` (PER_CLIENT).
    pub(crate) client_value: &'k str,
    /// `{<name>}:permits` (OVERALL).
    pub(crate) permits: &'k str,
    /// `{<name>}:permits:<client id>` (PER_CLIENT).
    pub(crate) client_permits: &'k str,
}

pub(crate) fn rate_try_set(
    name: &str,
    rate: u64,
    interval_ms: u64,
    kind: u8,
    keep_ms: u64,
) -> Call {
    call!(RATE_TRY_SET; name; rate, interval_ms, kind, keep_ms)
}

pub(crate) fn rate_set(
    k: &RateKeys<'_>,
    rate: u64,
    interval_ms: u64,
    kind: u8,
    keep_ms: u64,
) -> Call {
    call!(RATE_SET; k.name, k.value, k.client_value, k.permits, k.client_permits;
        rate, interval_ms, kind, keep_ms)
}

pub(crate) fn rate_acquire(k: &RateKeys<'_>, permits: u64, now_ms: u64, id: &[u8]) -> Call {
    call!(RATE_ACQUIRE; k.name, k.value, k.client_value, k.permits, k.client_permits;
        permits, now_ms, id)
}

pub(crate) fn rate_available(k: &RateKeys<'_>, now_ms: u64) -> Call {
    call!(RATE_AVAILABLE; k.name, k.value, k.client_value, k.permits, k.client_permits; now_ms)
}

pub(crate) fn rate_release(k: &RateKeys<'_>, permits: u64) -> Call {
    call!(RATE_RELEASE; k.name, k.value, k.client_value, k.permits, k.client_permits; permits)
}

/// The watchdog's renewal of watched permits (`PermitGuard`): one entry per id in the reply.
pub(crate) fn pes_renew<'i>(
    k: &PesKeys<'_>,
    ids: impl Iterator<Item = &'i [u8]>,
    expiry_ms: u64,
    now_ms: u64,
) -> Call {
    let mut call = Call::new(&PES_RENEW, 3);
    call.key(k.name).key(k.timeouts).key(k.channel);
    call.arg(expiry_ms).arg(now_ms).arg(k.publish);
    ids.for_each(|id| _ = call.arg(id));
    call
}
