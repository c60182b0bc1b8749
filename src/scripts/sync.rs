//! Typed builders for the synchronizers' scripts (RSemaphore, RCountDownLatch,
//! RPermitExpirableSemaphore); the scripts themselves are declared with the locks' in
//! [`super`].

use redis::ScriptInvocation;

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

pub(crate) fn semaphore_acquire<'a>(
    name: &str,
    receipt: &str,
    permits: u32,
    receipt_ms: u64,
) -> ScriptInvocation<'a> {
    let mut inv = SEMAPHORE_ACQUIRE.prepare_invoke();
    inv.key(name).key(receipt).arg(permits).arg(receipt_ms);
    inv
}

pub(crate) fn semaphore_undo<'a>(k: &SemKeys<'_>, receipt: &str) -> ScriptInvocation<'a> {
    let mut inv = SEMAPHORE_UNDO.prepare_invoke();
    inv.key(k.name).key(k.channel).key(receipt).arg(k.publish);
    inv
}

pub(crate) fn semaphore_release<'a>(
    k: &SemKeys<'_>,
    receipt: &str,
    permits: u32,
    receipt_ms: u64,
) -> ScriptInvocation<'a> {
    let mut inv = SEMAPHORE_RELEASE.prepare_invoke();
    inv.key(k.name)
        .key(k.channel)
        .key(receipt)
        .arg(permits)
        .arg(k.publish)
        .arg(receipt_ms);
    inv
}

pub(crate) fn semaphore_try_set<'a>(k: &SemKeys<'_>, permits: i32) -> ScriptInvocation<'a> {
    let mut inv = SEMAPHORE_TRY_SET.prepare_invoke();
    inv.key(k.name).key(k.channel).arg(permits).arg(k.publish);
    inv
}

pub(crate) fn semaphore_add<'a>(k: &SemKeys<'_>, permits: i32) -> ScriptInvocation<'a> {
    let mut inv = SEMAPHORE_ADD.prepare_invoke();
    inv.key(k.name).key(k.channel).arg(permits).arg(k.publish);
    inv
}

pub(crate) fn semaphore_drain<'a>(name: &str) -> ScriptInvocation<'a> {
    let mut inv = SEMAPHORE_DRAIN.prepare_invoke();
    inv.key(name);
    inv
}

// === RCountDownLatch ===

/// `CountDownLatchPubSub.ZERO_COUNT_MESSAGE`: the count reached zero (opens the latch).
pub(crate) const ZERO_COUNT_MESSAGE: &str = "0";
/// `CountDownLatchPubSub.NEW_COUNT_MESSAGE`: a count was set or the latch deleted.
pub(crate) const NEW_COUNT_MESSAGE: &str = "1";

/// KEYS of every latch script: the count and the channel; and the publish command.
pub(crate) fn latch_try_set<'a>(
    name: &str,
    channel: &str,
    count: i64,
    publish: &str,
) -> ScriptInvocation<'a> {
    let mut inv = LATCH_TRY_SET.prepare_invoke();
    inv.key(name)
        .key(channel)
        .arg(NEW_COUNT_MESSAGE)
        .arg(count)
        .arg(publish);
    inv
}

pub(crate) fn latch_count_down<'a>(
    name: &str,
    channel: &str,
    publish: &str,
) -> ScriptInvocation<'a> {
    let mut inv = LATCH_COUNT_DOWN.prepare_invoke();
    inv.key(name)
        .key(channel)
        .arg(ZERO_COUNT_MESSAGE)
        .arg(publish);
    inv
}

pub(crate) fn latch_delete<'a>(name: &str, channel: &str, publish: &str) -> ScriptInvocation<'a> {
    let mut inv = LATCH_DELETE.prepare_invoke();
    inv.key(name)
        .key(channel)
        .arg(NEW_COUNT_MESSAGE)
        .arg(publish);
    inv
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

pub(crate) fn pes_acquire<'a>(
    k: &PesKeys<'_>,
    id: &[u8],
    expiry_ms: u64,
    now_ms: u64,
) -> ScriptInvocation<'a> {
    let mut inv = PES_ACQUIRE.prepare_invoke();
    inv.key(k.name)
        .key(k.timeouts)
        .key(k.channel)
        .arg(1)
        .arg(expiry_ms)
        .arg(now_ms)
        .arg(NON_EXPIRABLE)
        .arg(k.publish)
        .arg(id);
    inv
}

pub(crate) fn pes_release<'a>(k: &PesKeys<'_>, id: &[u8], now_ms: u64) -> ScriptInvocation<'a> {
    let mut inv = PES_RELEASE.prepare_invoke();
    inv.key(k.name)
        .key(k.channel)
        .key(k.timeouts)
        .arg(id)
        .arg(1)
        .arg(now_ms)
        .arg(k.publish);
    inv
}

pub(crate) fn pes_available<'a>(k: &PesKeys<'_>, now_ms: u64) -> ScriptInvocation<'a> {
    let mut inv = PES_AVAILABLE.prepare_invoke();
    inv.key(k.name)
        .key(k.timeouts)
        .key(k.channel)
        .arg(now_ms)
        .arg(k.publish);
    inv
}

pub(crate) fn pes_update_lease<'a>(
    k: &PesKeys<'_>,
    id: &[u8],
    expiry_ms: u64,
    now_ms: u64,
) -> ScriptInvocation<'a> {
    let mut inv = PES_UPDATE_LEASE.prepare_invoke();
    inv.key(k.name)
        .key(k.timeouts)
        .key(k.channel)
        .arg(id)
        .arg(expiry_ms)
        .arg(now_ms)
        .arg(k.publish);
    inv
}

pub(crate) fn pes_add<'a>(k: &PesKeys<'_>, permits: i32) -> ScriptInvocation<'a> {
    let mut inv = PES_ADD.prepare_invoke();
    inv.key(k.name).key(k.channel).arg(permits).arg(k.publish);
    inv
}
