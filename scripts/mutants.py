#!/usr/bin/env python3
"""Mutant table: injects realistic bugs one at a time and checks that a named test catches each.

Each mutant replaces one exact snippet of the library (it must occur exactly once, so a refactor
that moves the code makes the mutant fail loudly instead of silently testing nothing), builds,
and runs the tests that should kill it. A mutant is KILLED when those tests fail, SURVIVED when
they pass (a hole in the suite). The work happens in a throwaway git worktree of HEAD, so the
checkout is never touched.

    scripts/mutants              # every mutant (about 15-25 min on 2 cores)
    scripts/mutants reentry      # the mutants whose id contains "reentry"
    scripts/mutants --list       # the table only

Exit status: 0 when every selected mutant was killed, 1 otherwise.
Results are documented in docs/reliability.md ("Mutant table").
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

# (id, file, snippet, replacement, cargo test arguments, the bug in words)
MUTANTS = [
    (
        "reentry-lease",
        "src/lock/engine.rs",
        """        let lease_ms = self.key_expiry(&gate, sent, Some(own_ms));""",
        """        let lease_ms = own_ms;""",
        ["--test", "leases", "a_shorter_reentry_never_shortens"],
        "re-entry applies its own lease (Redisson's rule): a shorter inner lease ends the outer hold",
    ),
    (
        "release-lease",
        "src/lock/release.rs",
        """        let lease_ms = self.key_expiry(&gate, Instant::now(), None);""",
        """        let lease_ms = self.watchdog_ms();""",
        ["--test", "leases", "releasing_a_watchdog_hold"],
        "a release re-applies the watchdog lease whatever the remaining holds need",
    ),
    (
        "owner-unlock-lease",
        "src/lock/release.rs",
        """        let lease_ms = self.key_expiry(&gate, Instant::now(), None);""",
        """        let lease_ms = grant
            .and_then(|g| match g.lease {
                crate::holds::Lease::Fixed { deadline, .. } => Some(crate::config::millis(deadline.saturating_duration_since(Instant::now()))),
                crate::holds::Lease::Watchdog => None,
            })
            .unwrap_or_else(|| self.watchdog_ms());""",
        ["--test", "leases", "owner_style_unlock_keeps"],
        "a release re-applies the released hold's lease instead of the remaining holds'",
    ),
    (
        "renew-shortens",
        "lua/renew.lua",
        """        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then""",
        """        if true then""",
        ["--test", "leases", "a_watchdog_renewal_never_shortens"],
        "the watchdog renewal sets the lease outright, cutting a longer fixed hold short",
    ),
    (
        "phantom-adopted",
        "src/lock/engine.rs",
        """        if count > gate.count() {""",
        """        if false {""",
        ["--test", "leases", "holds_of_a_late_unknown_acquire"],
        "an acquire adopts holds of a late unknown acquire (key held after the last unlock)",
    ),
    (
        "stale-guard-release",
        "src/lock/release.rs",
        """gate.take_grant(id).map(Some).ok_or(Release::NotHeld)""",
        """Ok(gate.take_grant(id).or_else(|| gate.take_latest()))""",
        ["--test", "leases", "a_guard_whose_hold_was_released"],
        "a guard whose hold was released owner-style releases another hold",
    ),
    (
        "unknown-outcome-forgotten",
        "src/lock/cleanup.rs",
        """        if self.armed {
            self.gate.unknown();""",
        """        if false {
            self.gate.unknown();""",
        ["--test", "cancellation"],
        "a cancelled acquire or release whose script may have run is not trimmed back",
    ),
    (
        "trim-synced",
        "src/lock/settle.rs",
        """        let mut conn = self.client().conn();""",
        """        let mut conn = self.client().conn_synced();""",
        ["--test", "fault_server", "stalled_replica_is_reported"],
        "the undo of an acquire no replica confirmed waits for replicas too, and fails with them",
    ),
    (
        "acquire-unsynced",
        "src/lock/engine.rs",
        """        let mut conn = client.conn_synced();
        let flight = InFlight::new""",
        """        let mut conn = client.conn();
        let flight = InFlight::new""",
        ["--test", "fault_server", "stalled_replica_is_reported"],
        "an acquire is not followed by WAIT: a write no replica has can be lost in a failover",
    ),
    (
        "connect-no-ping",
        "src/client.rs",
        """        redis::cmd("PING")
            .query_async::<redis::Value>(&mut conn)
            .await
            .map_err(|e| auth_error(e.into()))?;""",
        "",
        ["--test", "connect", "a_protected_server_fails_at_connect"],
        "connect does not check credentials: NOAUTH surfaces at the first lock call",
    ),
    (
        "urls-unchecked",
        "src/config.rs",
        """            None => check_urls(&self.topology),""",
        """            None => Ok(()),""",
        ["--test", "connect", "malformed_urls_are_invalid_arguments"],
        "malformed URLs are not reported as invalid arguments",
    ),
    (
        "cluster-names-unchecked",
        "src/lock/mod.rs",
        """    if !client.is_cluster() {""",
        """    if true {""",
        ["--test", "cluster"],
        "a name whose channel/latch fall in another cluster slot is locked (and can never be released)",
    ),
    (
        "latch-queue-unbounded",
        "src/latches.rs",
        """        let (tx, rx) = mpsc::channel(capacity.max(1));""",
        """        let (tx, rx) = mpsc::channel(1 << 20);""",
        ["--test", "latches"],
        "the latch (receipt) queue grows without bound when releases outpace the deleter",
    ),
    (
        "release-retry-blind",
        "src/lock/release.rs",
        """                Err(e) if retry.again(&e).await => unknown |= is_connection_error(&e),""",
        """                Err(e) if retry.again(&e).await => {}""",
        ["--test", "fault_proxy", "unlock_whose_reply_is_dropped"],
        "a release whose reply was lost is sent again as a release: a re-entrant hold is released twice",
    ),
    (
        "release-retry-trusts-expired-lease",
        "src/lock/release.rs",
        """        std::cmp::Ordering::Equal if valid.is_some_and(|v| replied < v) => Release::Released,""",
        """        std::cmp::Ordering::Equal => Release::Released,""",
        ["--test", "fault_proxy", "release_retried_after_the_lease_ran_out"],
        "a release retried after its lease ran out reports success: the caller never learns it overlapped another holder",
    ),
    (
        "redlock-minority",
        "src/multi/policy.rs",
        """        n - (n / 2 + 1).min(n)""",
        """        n.saturating_sub(1)""",
        ["--test", "redlock", "contenders_take_turns_one_at_a_time"],
        "RedLock counts one node as a quorum: two contenders hold it at once",
    ),
    (
        "wait-ignores-ttl",
        "src/lock/engine.rs",
        """                    (ttl_ms >= 0).then(|| Duration::from_millis(ttl_ms as u64))""",
        """                    None""",
        ["--test", "rlock", "expired_lease_hands_over_to_a_waiter"],
        "a waiter waits for a message only, not for the holder's TTL (expiry publishes nothing)",
    ),
    (
        "release-error-swallowed",
        "src/lock/release.rs",
        """                Err(e) if unknown || is_connection_error(&e) => {
                    return Err(self.write_error(&mut conn, e))
                }""",
        """                Err(e) if unknown || is_connection_error(&e) => return Ok(Release::Released),""",
        ["--test", "fault_server", "release_during_a_server_stall"],
        "an unlock that never reached the server reports success",
    ),
    (
        "wakeup-after-attempt",
        "src/lock/engine.rs",
        """            let notified = channel.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let pause = match Box::pin(self.attempt(try_)).await {""",
        """            let attempt = Box::pin(self.attempt(try_)).await;
            let notified = channel.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let pause = match attempt {""",
        ["--test", "wakeups", "rw_wake_all_between_attempt_and_wait_is_not_missed"],
        "a waiter registers for the release message after its attempt: a wake-all in between is lost",
    ),
    (
        "watchdog-half-lease",
        "src/watchdog.rs",
        """            let period = c.config.watchdog_timeout() / 3;""",
        """            let period = c.config.watchdog_timeout() / 2;""",
        ["--test", "watchdog", "renewals_keep_the_ttl_above_two_thirds"],
        "the watchdog renews every lease/2 instead of lease/3",
    ),
    (
        "validity-from-reply",
        "src/watchdog.rs",
        """                        slot.renewed(started);""",
        """                        slot.renewed(Instant::now());""",
        ["--test", "watchdog", "validity_counts_from_the_send_not_the_reply"],
        "a renewal's validity counts from its reply instead of its send",
    ),
    (
        "no-drift-allowance",
        "src/lock/guard.rs",
        """                self.hold.renewed_at() + lease.saturating_sub(crate::time::drift(lease))""",
        """                self.hold.renewed_at() + lease""",
        ["--test", "watchdog", "validity_ends_a_drift_allowance"],
        "a watchdog hold counts as valid for the whole lease, with no clock-drift allowance",
    ),
    (
        "watchdog-off",
        "src/watchdog.rs",
        """    let slots = client.holds.watched();""",
        """    let slots: Vec<Arc<Hold>> = Vec::new();""",
        ["--test", "fault_soak", "--test", "fault_holders"],
        "the watchdog never renews: holds longer than the lease expire under their holders",
    ),
    (
        "hold-not-forgotten",
        "src/lock/cleanup.rs",
        """        self.lock.client().holds().forget(self.hold);""",
        """        let _ = self.hold;""",
        ["--test", "cancellation", "five_thousand"],
        "an acquisition that ends without the lock leaves its bookkeeping behind (until the idle sweep)",
    ),
    (
        "unlock-message",
        "src/scripts/mod.rs",
        """pub(crate) const UNLOCK_MESSAGE: &str = "0";""",
        """pub(crate) const UNLOCK_MESSAGE: &str = "unlocked";""",
        ["--test", "redisson_conformance"],
        "the release publishes another message than Redisson's `0` (Java's decoder fails)",
    ),
    (
        "no-drift-fixed-lease",
        "src/lock/guard.rs",
        """            Some((lease, deadline)) => deadline
                .checked_sub(crate::time::drift(lease))
                .unwrap_or(deadline),""",
        """            Some((_lease, deadline)) => deadline,""",
        ["--test", "leases", "a_fixed_lease_is_trusted"],
        "a fixed lease is trusted for its whole length, with no clock-drift allowance",
    ),
    (
        "lost-not-reported",
        "src/watchdog.rs",
        """                    } else if slot.lose(epoch) {""",
        """                    } else if false && slot.lose(epoch) {""",
        ["--test", "rlock", "--test", "faults"],
        "a renewal that finds the hold gone is not reported to the guard",
    ),
    (
        "sem-wake-one",
        "src/pubsub/mod.rs",
        """            for _ in 0..permits.min(waiters).max(0) {""",
        """            for _ in 0..permits.min(waiters).min(1).max(0) {""",
        ["--test", "semaphore", "a_release_wakes_as_many_waiters"],
        "a semaphore's count message wakes one local waiter, not as many as it freed permits",
    ),
    (
        "latch-wake-one",
        "src/sync/count_down_latch.rs",
        """Wake::All""",
        """Wake::Lock""",
        ["--test", "count_down_latch", "the_zero_message_wakes_every_waiter"],
        "a latch's zero message wakes one local waiter, not all of them",
    ),
    (
        "sync-wakeup-after-try",
        "src/sync/mod.rs",
        """        let notified = channel.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let pause = match attempt().await {""",
        """        let step = attempt().await;
        let notified = channel.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let pause = match step {""",
        ["--test", "semaphore", "a_release_between", "--test", "count_down_latch", "a_zero_between"],
        "a synchronizer waiter registers for messages after its try: a release in between is lost",
    ),
    (
        "sem-no-give-back",
        "src/sync/semaphore.rs",
        """            rt.spawn(async move { inner.give_back(&receipt).await });""",
        """            let _ = (rt, inner, receipt);""",
        ["--test", "semaphore", "permits_taken_for_a_dropped_acquire"],
        "permits taken by an acquire whose caller is gone are never given back",
    ),
    (
        "pes-no-give-back",
        "src/sync/permit_semaphore.rs",
        """            rt.spawn(async move { inner.give_back(&id).await });""",
        """            let _ = (rt, inner, id);""",
        ["--test", "permit_semaphore", "a_permit_taken_for_a_dropped_acquire"],
        "a permit taken by an acquire whose caller is gone is never released",
    ),
    (
        "pes-no-expiry-hint",
        "src/sync/permit_semaphore.rs",
        """Ok(Step::Wait(u64::try_from(t).ok().map(""",
        """Ok(Step::Wait(u64::try_from(t).ok().filter(|_| false).map(""",
        ["--test", "permit_semaphore", "expired_permits_return_to_the_pool"],
        "a permit waiter ignores the earliest lease end (expiry publishes nothing)",
    ),
    (
        "pes-renew-skips",
        "lua/pes_renew.lua",
        """            redis.call('zadd', KEYS[2], ARGV[1], ARGV[i])""",
        """            local _ = ARGV[i]""",
        ["--test", "permit_guard", "a_guarded_permit_s_lease_keeps_moving"],
        "the watchdog's permit renewal answers 'held' but never moves the lease end",
    ),
    (
        "permit-guard-drop-keeps",
        "src/sync/permit_guard.rs",
        """                rt.spawn(async move { sem.give_back(&id).await });""",
        """                let _ = (rt, sem, id);""",
        ["--test", "permit_guard", "dropping_the_guard_gives_the_permit_back"],
        "a dropped permit guard never gives its permit back (waiters wait a whole lease)",
    ),
    (
        "sync-names-unchecked",
        "src/sync/mod.rs",
        """    if !client.is_cluster() {""",
        """    if !client.is_cluster() || true {""",
        ["--test", "semaphore", "synchronizers_on_a_cluster"],
        "a synchronizer name whose channel falls in another cluster slot is used (CROSSSLOT)",
    ),
    (
        "latch-negative-count",
        "src/sync/count_down_latch.rs",
        """        if count < 0 {""",
        """        if count < i64::MIN {""",
        ["--test", "count_down_latch", "bad_input_changes_nothing"],
        "a negative latch count is stored instead of refused",
    ),
    (
        "pes-unknown-release-ok",
        "src/sync/permit_semaphore.rs",
        """        Ok(detached("release", async move { inner.release(&id).await }).await? == 1)""",
        """        Ok(detached("release", async move { inner.release(&id).await }).await? <= 1)""",
        ["--test", "permit_semaphore", "unknown_ids_and_bad_leases"],
        "releasing an unknown permit id reports success",
    ),
    # Issue 22: the Redisson 4.x API (non-reentrant locks, getToken, MultiLock queries, the
    # watchdog batch size, the synchronizers' extras).
    (
        "nr-lock-reenters",
        "lua/nr_lock.lua",
        """if redis.call('exists', KEYS[1]) == 0 then""",
        """if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then""",
        ["--test", "non_reentrant", "the_holder_cannot_take_a_non_reentrant_lock_twice"],
        "the non-reentrant lock lets its holder in again (count 2), as an RLock",
    ),
    (
        "nr-fair-reenters",
        "src/scripts/mod.rs",
        """    let non_reentrant = if reentrant { "0" } else { "1" };""",
        """    let non_reentrant = if reentrant { "0" } else { "0" };""",
        ["--test", "non_reentrant", "the_holder_cannot_take_a_non_reentrant_fair_lock_twice"],
        "the non-reentrant fair lock lets its holder in again, as a fair lock",
    ),
    (
        "nr-refusal-unmapped",
        "src/lock/engine.rs",
        """            Err(e) if crate::scripts::is_reentry_refusal(&e) => {""",
        """            Err(e) if crate::scripts::is_reentry_refusal(&e) && false => {""",
        ["--test", "non_reentrant", "the_holder_cannot_take_a_non_reentrant_lock_twice"],
        "the holder's refused second acquire surfaces as a raw Redis error, not AlreadyHeld",
    ),
    (
        "token-reads-lock-key",
        "src/lock/query.rs",
        """        let key = crate::keys::prefix_name(crate::keys::TOKEN_PREFIX, self.name());""",
        """        let key = self.name().to_owned();""",
        ["--test", "fenced_lock", "current_token_reads_the_counter"],
        "current_token reads the lock key instead of the token counter",
    ),
    (
        "multi-held-by-one",
        "src/multi/query.rs",
        """        if held >= required {""",
        """        if held >= 1 {""",
        ["--test", "multi_query"],
        "a MultiLock/RedLock counts as held when any one member is",
    ),
    (
        "watchdog-batch-fixed",
        "src/watchdog.rs",
        """    let batch = client.config.watchdog_batch_size().max(1);""",
        """    let batch = 100;""",
        ["--test", "watchdog", "renewals_go_in_batches"],
        "the watchdog ignores the configured batch size (Redisson's lockWatchdogBatchSize)",
    ),
    (
        "watchdog-batch-zero",
        "src/config.rs",
        """                self.watchdog_batch_size == 0,""",
        """                false,""",
        ["--test", "watchdog", "renewals_go_in_batches"],
        "a watchdog batch size of 0 is accepted",
    ),
    (
        "sem-ttl-ignored",
        "lua/semaphore_try_set.lua",
        """if tonumber(ARGV[3]) > 0 then""",
        """if false then""",
        ["--test", "sync_extras", "try_set_permits_with_a_ttl"],
        "trySetPermits(n, ttl) sets the permits without the TTL",
    ),
    (
        "sem-release-if-exists-creates",
        "lua/semaphore_release_if_exists.lua",
        """if redis.call('exists', KEYS[1]) == 0 then""",
        """if false then""",
        ["--test", "sync_extras", "release_if_exists_never_creates"],
        "releaseIfExists on a missing semaphore creates it, as a plain release does",
    ),
    (
        "pes-expire-count-only",
        "src/sync/ttl.rs",
        """    |s| s.all_keys()""",
        """    |s| [s.name()]""",
        ["--test", "sync_extras", "expire_clear_expire"],
        "the permit-expirable semaphore's expire leaves its leases' set without the TTL",
    ),
    (
        "sync-ttl-zero",
        "src/sync/mod.rs",
        """    if ttl.is_zero() {
        return Err(LockError::InvalidArgument(
            "a time to live must be non-zero""",
        """    if false {
        return Err(LockError::InvalidArgument(
            "a time to live must be non-zero""",
        ["--test", "sync_extras"],
        "a zero TTL is sent (PEXPIRE 0 deletes the synchronizer) instead of refused",
    ),
    (
        "pes-total-without-held",
        "lua/pes_counts.lua",
        """return tonumber(available) + acquired""",
        """return tonumber(available)""",
        ["--test", "permit_extras", "totals_count_held"],
        "getPermits leaves out the permits held",
    ),
    (
        "pes-set-ignores-held",
        "lua/pes_set_permits.lua",
        """local maximum = acquired + tonumber(available)""",
        """local maximum = tonumber(available)""",
        ["--test", "permit_extras", "set_permits_sets_the_total"],
        "setPermits sets the available count, as if no permit were held",
    ),
    (
        "pes-lease-time-absolute",
        "lua/pes_lease_time.lua",
        """local left = tonumber(expiry) - tonumber(ARGV[2])""",
        """local left = tonumber(expiry)""",
        ["--test", "permit_extras", "lease_time_of_a_permit"],
        "getLeaseTime answers the lease's end (epoch ms) instead of what is left",
    ),
    (
        "pes-release-many-all-ok",
        "src/sync/permit_extras.rs",
        """        if usize::try_from(released).is_ok_and(|n| n >= distinct(ids)) {""",
        """        if true {""",
        ["--test", "permit_extras", "releasing_several_permits"],
        "release(List) reports success when some of the ids were not held",
    ),
    (
        "pes-acquire-first-id-only",
        "lua/pes_acquire.lua",
        """    for i = 6, #ARGV do""",
        """    for i = 6, 6 do""",
        ["--test", "permit_extras", "several_permits_are_taken_together"],
        "acquire(n) takes n permits from the count but records only the first id",
    ),
    # The operator CLI (src/bin/redisson-lock/, feature `cli`; every run builds with all features).
    (
        "cli-force-unlock-no-publish",
        "src/bin/redisson-lock/unlock.rs",
        """        Kind::Reentrant => client.get_lock(name).force_unlock().await?,""",
        """        Kind::Reentrant => {
            let n: i64 = redis::cmd("DEL").arg(name).query_async(&mut target.conn()).await?;
            n == 1
        }""",
        ["--test", "cli", "force_unlock_frees_the_lock_and_wakes"],
        "CLI force-unlock deletes the key without the unlock message: waiters sleep until the lease ends",
    ),
    (
        "cli-fair-as-rlock",
        "src/bin/redisson-lock/unlock.rs",
        """        Kind::Fair => client.get_fair_lock(name).force_unlock().await?,""",
        """        Kind::Fair => client.get_lock(name).force_unlock().await?,""",
        ["--test", "cli", "inspect_shows_a_fair_lock_queue"],
        "CLI force-unlock of a fair lock publishes on the lock channel, not the queue head's",
    ),
    (
        "cli-confirm-ignored",
        "src/bin/redisson-lock/unlock.rs",
        """    Ok(answer == "y" || answer == "yes")""",
        """    Ok(!answer.is_empty() || true)""",
        ["--test", "cli", "force_unlock_without_yes"],
        "CLI force-unlock goes ahead whatever the answer to y/N",
    ),
    (
        "cli-scan-first-page",
        "src/bin/redisson-lock/list.rs",
        """        if next == 0 {""",
        """        if next == 0 || !keys.is_empty() {""",
        ["--test", "cli", "list_scans_past_the_first_page"],
        "CLI list stops after the first SCAN page",
    ),
    (
        "cli-no-shard-numsub",
        "src/bin/redisson-lock/inspect.rs",
        """        total += numsub(&mut node, "SHARDNUMSUB", channels)""",
        """        total += 0 * numsub(&mut node, "SHARDNUMSUB", channels)""",
        ["--test", "cli", "works_on_a_cluster"],
        "CLI waiters miss sharded subscribers (SSUBSCRIBE) on a cluster",
    ),
    (
        "cli-url-not-redacted",
        "src/bin/redisson-lock/target.rs",
        """                redact(config.url())""",
        """                config.url()""",
        ["--test", "cli", "a_dead_server"],
        "CLI connection errors print the password in the URL",
    ),
    (
        "cli-watch-unsharded",
        "src/bin/redisson-lock/target.rs",
        """            PushConn::Cluster(c) if sharded => c.ssubscribe(channel).await?,""",
        """            PushConn::Cluster(c) if sharded => c.subscribe(channel).await?,""",
        ["--test", "cli", "works_on_a_cluster"],
        "CLI watch on a cluster with sharded pub/sub subscribes with SUBSCRIBE and misses SPUBLISH",
    ),
    (
        "sync-wait-leaks-subscription",
        "src/sync/mod.rs",
        """        Err(e) => return Err(e),
    };
    let mut retry = Retry::attempts(config);""",
        """        Err(e) => return Err(e),
    };
    let channel = Box::leak(Box::new(channel));
    let mut retry = Retry::attempts(config);""",
        ["--test", "semaphore", "a_cancelled_wait", "--test", "count_down_latch", "a_cancelled_wait",
         "--test", "permit_semaphore", "a_cancelled_wait"],
        "a cancelled synchronizer wait never drops its subscription: the channel stays subscribed",
    ),
    (
        "batch-overtakes",
        "src/conn/batch.rs",
        """    state.flights < MAX_IN_FLIGHT && state.queue.is_empty() && !state.out.contains_key(key)""",
        """    state.flights < MAX_IN_FLIGHT && state.queue.is_empty()""",
        ["--lib", "conn::batch::tests::an_operation_on_a_key_whose_batch_is_out_waits_for_it"],
        "group commit: an operation on a key whose batch is out takes a free flight and overtakes it (the trim before the cancelled acquire)",
    ),
    (
        "batch-queue-overtakes",
        "src/conn/batch.rs",
        """        if state.out.contains_key(&key) || blocked.contains(&key) {""",
        """        if blocked.contains(&key) {""",
        ["--lib", "conn::batch::tests::a_batch_leaves_out"],
        "group commit: a queued operation leaves in a new batch while an earlier batch on its key is still out",
    ),
]

def command(test):
    """`--test FILE [FILTER] ...` in the table -> the arguments for the one integration-test
    binary `tests/it` (each file is a module there): `--test it -- FILE::FILTER ...`.
    `--lib FILTER ...`: the library's own unit tests (no Redis)."""
    if test[0] == "--lib":
        return ["--lib", "--"] + test[1:]
    filters, i = [], 0
    while i < len(test):
        if test[i] == "--test":
            name = test[i + 1]
            i += 2
            if i < len(test) and not test[i].startswith("--"):
                filters.append(f"{name}::{test[i]}")
                i += 1
            else:
                filters.append(f"{name}::")
        else:
            i += 1
    return ["--test", "it", "--"] + filters


def targets(test):
    """What must be built for a test command: the `it` binary, or the library's unit tests."""
    return ["--lib"] if test[0] == "--lib" else ["--test", "it"]


def run(cmd, cwd, env=None, quiet=True):
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=out).returncode


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--list" in sys.argv:
        for m in MUTANTS:
            print(f"{m[0]:28} {m[1]:24} {' '.join(command(m[4])):60} {m[5]}")
        return 0
    selected = [m for m in MUTANTS if not args or any(a in m[0] for a in args)]
    root = subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip()
    work = tempfile.mkdtemp(prefix="mutants-")
    tree = os.path.join(work, "tree")
    subprocess.check_call(["git", "worktree", "add", "--detach", "-q", tree, "HEAD"], cwd=root)
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(root, "target", "mutants"))
    results = []
    try:
        print("building the unmutated tree once...", flush=True)
        if run(["cargo", "test", "--no-run", "--all-targets", "--all-features", "-q"], tree, env) != 0:
            print("the unmutated tree does not build", file=sys.stderr)
            return 2
        for mid, path, old, new, test, what in selected:
            subprocess.check_call(["git", "checkout", "-q", "--", "."], cwd=tree)
            target = os.path.join(tree, path)
            text = open(target).read()
            if text.count(old) != 1:
                results.append((mid, "STALE (snippet not found once)", test, what))
                print(f"{mid}: snippet not found exactly once in {path}", flush=True)
                continue
            open(target, "w").write(text.replace(old, new))
            started = time.time()
            # A mutant that does not compile proves nothing: build first, then run.
            if run(["cargo", "test", "-q", "--all-features", "--no-run"] + targets(test), tree, env) != 0:
                results.append((mid, "BROKEN (does not compile)", test, what))
                print(f"{mid}: does not compile", flush=True)
                continue
            code = run(["cargo", "test", "-q", "--all-features"] + command(test), tree, env)
            verdict = "killed" if code != 0 else "SURVIVED"
            results.append((mid, verdict, test, what))
            print(f"{mid}: {verdict} ({time.time() - started:.0f} s)", flush=True)
    finally:
        subprocess.call(["git", "worktree", "remove", "--force", tree], cwd=root)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| mutant | bug injected | caught by | verdict |")
    print("|---|---|---|---|")
    for mid, verdict, test, what in results:
        print(f"| `{mid}` | {what} | `cargo test --all-features {' '.join(command(test))}` | {verdict} |")
    return 0 if all(r[1] == "killed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
