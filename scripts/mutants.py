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
Results are documented in docs/maintainers/mutants.md ("The curated mutants").
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
        "src/lock/engine/mod.rs",
        """        let lease_ms = self.key_expiry(&gate, sent, Some(own_ms));""",
        """        let lease_ms = own_ms;""",
        ["--test", "leases", "a_shorter_reentry_never_shortens"],
        "re-entry applies its own lease (Redisson's rule): a shorter inner lease ends the outer hold",
    ),
    (
        "release-lease",
        "src/lock/engine/release.rs",
        """        let lease_ms = self.key_expiry(&gate, Instant::now(), None);""",
        """        let lease_ms = self.watchdog_ms();""",
        ["--test", "leases", "releasing_a_watchdog_hold"],
        "a release re-applies the watchdog lease whatever the remaining holds need",
    ),
    (
        "owner-unlock-lease",
        "src/lock/engine/release.rs",
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
        "src/lock/engine/mod.rs",
        """        if count > gate.count() {""",
        """        if false {""",
        ["--test", "leases", "holds_of_a_late_unknown_acquire"],
        "an acquire adopts holds of a late unknown acquire (key held after the last unlock)",
    ),
    (
        "stale-guard-release",
        "src/lock/engine/release.rs",
        """gate.take_grant(id).map(Some).ok_or(Release::NotHeld)""",
        """Ok(gate.take_grant(id).or_else(|| gate.take_latest()))""",
        ["--test", "leases", "a_guard_whose_hold_was_released"],
        "a guard whose hold was released owner-style releases another hold",
    ),
    (
        "unknown-outcome-forgotten",
        "src/lock/engine/cleanup.rs",
        """        if self.armed {
            self.gate.unknown();""",
        """        if false {
            self.gate.unknown();""",
        ["--test", "cancellation"],
        "a cancelled acquire or release whose script may have run is not trimmed back",
    ),
    (
        "trim-synced",
        "src/lock/engine/settle.rs",
        """        let mut conn = self.client().conn();""",
        """        let mut conn = self.client().conn_synced();""",
        ["--test", "fault_server", "stalled_replica_is_reported"],
        "the undo of an acquire no replica confirmed waits for replicas too, and fails with them",
    ),
    (
        "acquire-unsynced",
        "src/lock/engine/mod.rs",
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
        """        if let Err(e) = redis::cmd("PING")
            .query_async::<redis::Value>(&mut conn)
            .await
        {
            return Err(endpoints.connect_error(auth_error(e.into())).await);
        }""",
        "",
        ["--test", "connect", "a_protected_server_fails_at_connect"],
        "connect does not check credentials: NOAUTH surfaces at the first lock call",
    ),
    (
        "urls-unchecked",
        "src/endpoints/mod.rs",
        """    let info = url
        .into_connection_info()
        .map_err(|e| LockError::InvalidUrl {
            url: redact(url),
            reason: e.to_string(),
        })?;""",
        """    let info = url.into_connection_info().map_err(LockError::from)?;""",
        ["--test", "connect", "malformed_urls_are_invalid_arguments"],
        "malformed URLs are not reported as invalid arguments",
    ),
    (
        "cluster-names-unchecked",
        "src/lock/engine/mod.rs",
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
        "src/lock/engine/release.rs",
        """                Err(e) if retry.again(&e).await => unknown |= is_connection_error(&e),""",
        """                Err(e) if retry.again(&e).await => {}""",
        ["--test", "fault_proxy", "unlock_whose_reply_is_dropped"],
        "a release whose reply was lost is sent again as a release: a re-entrant hold is released twice",
    ),
    (
        "release-retry-trusts-expired-lease",
        "src/lock/engine/release.rs",
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
        "src/lock/engine/wait.rs",
        """Step::Wait((ttl_ms >= 0).then(|| Duration::from_millis(ttl_ms as u64)))""",
        """Step::Wait(None)""",
        ["--test", "rlock", "expired_lease_hands_over_to_a_waiter"],
        "a waiter waits for a message only, not for the holder's TTL (expiry publishes nothing)",
    ),
    (
        "release-error-swallowed",
        "src/lock/engine/release.rs",
        """                Err(e) if unknown || is_connection_error(&e) => {
                    return Err(self.write_error(&mut conn, e))
                }""",
        """                Err(e) if unknown || is_connection_error(&e) => return Ok(Release::Released),""",
        ["--test", "fault_server", "release_during_a_server_stall"],
        "an unlock that never reached the server reports success",
    ),
    (
        "wakeup-after-attempt",
        "src/wait.rs",
        """        let notified = channel.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        open()?;
        // Refused on a resubscription: no message can come (checked after registering, as
        // the refusal wakes the registered waiters).
        if let Some(e) = channel.refusal() {
            return Err(e);
        }
        let pause = match attempt().await {""",
        """        open()?;
        if let Some(e) = channel.refusal() {
            return Err(e);
        }
        let tried = attempt().await;
        let notified = channel.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let pause = match tried {""",
        ["--test", "wakeups", "rw_wake_all_between_attempt_and_wait_is_not_missed", "--test", "semaphore", "a_release_between", "--test", "count_down_latch", "a_zero_between"],
        "a waiter (lock or synchronizer: one shared loop) registers for messages after its try: a release or wake-all in between is lost",
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
        "src/lock/engine/cleanup.rs",
        """        self.engine.client().registry().forget(self.hold);""",
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
        """        self.sem
            .client
            .spawn(async move { sem.give_back(&id).await });""",
        """        let _ = (sem, id);""",
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
        "src/lock/engine/mod.rs",
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
        "src/config/validate.rs",
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
        """    |s| s.all_keys()
);
expirable!(
    RateLimiter,""",
        """    |s| [s.name()]
);
expirable!(
    RateLimiter,""",
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
    # The blocking API (src/blocking/, feature `blocking`).
    (
        "blocking-drop-leaks",
        "src/blocking/mod.rs",
        """        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside a runtime: the async guard's own drop releases in the background there.""",
        """        if true {
            // Inside a runtime: the async guard's own drop releases in the background there.""",
        ["--test", "blocking_sync", "a_multi_lock_is_held_by_the_calling_thread"],
        "a blocking guard dropped on a plain thread drops the async guard, which cannot release outside a runtime: the lock stays held for its lease",
    ),
    (
        "blocking-semaphore-ttl-dropped",
        "src/blocking/sync.rs",
        """impl Semaphore {
    forward! { "crate::Semaphore":
        /// Sets the number of permits if the semaphore does not exist.
        fn try_set_permits(&self, permits: i32) -> bool;
        /// Sets the number of permits and a time to live if the semaphore does not exist.
        fn try_set_permits_with_ttl(&self, permits: i32, ttl: Duration) -> bool;""",
        """impl Semaphore {
    /// Mutant: a hand-written wrapper that forgets the TTL.
    ///
    /// # Errors
    ///
    /// None more.
    pub fn try_set_permits_with_ttl(&self, permits: i32, _ttl: Duration) -> Result<bool> {
        self.call(move |x| async move { x.try_set_permits(permits).await })
    }
    forward! { "crate::Semaphore":
        /// Sets the number of permits if the semaphore does not exist.
        fn try_set_permits(&self, permits: i32) -> bool;""",
        ["--test", "blocking_sync", "semaphore_waiters_wake_and_the_extras_reach_redis"],
        "the blocking try_set_permits_with_ttl sets the permits without the TTL: the semaphore never expires",
    ),
    (
        "blocking-rate-wrong-key",
        "src/blocking/mod.rs",
        """        RateLimiter::new(self.inner.get_rate_limiter(name), self.rt.clone())""",
        """        RateLimiter::new(
            self.inner.get_rate_limiter(format!("{}:rate", name.into())),
            self.rt.clone(),
        )""",
        ["--test", "blocking_sync", "a_blocking_rate_limiter_shares_redissons_data_and_waits_for_the_window"],
        "the blocking client's rate limiter works on another key than Redisson's (its configuration hash is not `<name>`)",
    ),
    # The operator CLI (src/bin/redisson-lock/, feature `cli`; every run builds with all features).
    (
        "cli-rate-limiter-unseen",
        "src/bin/redisson-lock/inspect.rs",
        """        if read_rate_limiter(target, &mut found, &fields).await? {""",
        """        if false && read_rate_limiter(target, &mut found, &fields).await? {""",
        ["--test", "cli::kinds", "a_rate_limiter_shows_its_rate_and_window_and_force_unlock_leaves_it_alone"],
        "inspect does not recognise a rate limiter's hash: it shows as an unknown key, without its rate or window",
    ),
    (
        "cli-force-unlock-no-publish",
        "src/bin/redisson-lock/unlock.rs",
        """        Kind::Reentrant => client.get_lock(name).force_unlock_held_by(fields).await?,""",
        """        Kind::Reentrant => {
            let n: i64 = redis::cmd("DEL").arg(name).query_async(&mut target.conn()).await?;
            if n == 1 {
                ForceUnlock::Deleted
            } else {
                ForceUnlock::NotLocked
            }
        }""",
        ["--test", "cli::force_unlock", "force_unlock_frees_the_lock_and_wakes"],
        "CLI force-unlock deletes the key without the unlock message: waiters sleep until the lease ends",
    ),
    (
        "cli-fair-as-rlock",
        "src/bin/redisson-lock/unlock.rs",
        """        Kind::Fair => {
            client
                .get_fair_lock(name)""",
        """        Kind::Fair => {
            client
                .get_lock(name)""",
        ["--test", "cli::inspect", "inspect_shows_a_fair_lock_queue"],
        "CLI force-unlock of a fair lock publishes on the lock channel, not the queue head's",
    ),
    (
        "cli-confirm-ignored",
        "src/bin/redisson-lock/change.rs",
        """    Ok(answer == "y" || answer == "yes")""",
        """    Ok(!answer.is_empty() || true)""",
        ["--test", "cli::force_unlock", "force_unlock_without_yes"],
        "CLI force-unlock goes ahead whatever the answer to y/N",
    ),
    (
        "cli-watch-exits-on-loss",
        "src/bin/redisson-lock/watch.rs",
        """        emit(
            json,
            Event {
                event: "lost",""",
        """        if !lost.is_empty() {
            return Err(Failure(lost));
        }
        emit(
            json,
            Event {
                event: "lost",""",
        ["--test", "cli::watch_restart", "watch_survives_a_server_restart"],
        "CLI watch ends with an error when the server restarts instead of reconnecting",
    ),
    (
        "cli-watch-no-resubscribe",
        "src/bin/redisson-lock/watch.rs",
        """                Ok((c, r, _)) => break (c, r),""",
        """                Ok((c, r, _)) => {
                    let _ = (c, r);
                    let (tx, rx) = mpsc::unbounded_channel();
                    break (target.push_conn(tx).await?, rx);
                }""",
        ["--test", "cli::watch_restart", "watch_survives_a_server_restart"],
        "CLI watch reconnects after a restart without subscribing again: release messages are no longer seen",
    ),
    (
        "cli-sync-ttl-hidden",
        "src/bin/redisson-lock/inspect.rs",
        """    found.ttl_ms = Some(conn.pttl(name).await?);""",
        """    found.ttl_ms = Some(if redis_type == "string" { -1 } else { conn.pttl(name).await? });""",
        ["--test", "cli::kinds", "synchronizer_ttls_and_batches_show_in_inspect"],
        "CLI inspect shows a synchronizer (trySetPermits with a TTL, expire) as never expiring",
    ),
    (
        "cli-scan-first-page",
        "src/bin/redisson-lock/list.rs",
        """        if next == 0 || entries.len() >= limit {""",
        """        if next == 0 || entries.len() >= limit || !keys.is_empty() {""",
        ["--test", "cli::list", "list_scans_past_the_first_page"],
        "CLI list stops after the first SCAN page",
    ),
    (
        "cli-list-reads-big-hashes",
        "src/bin/redisson-lock/list.rs",
        """const FIELDS_READ_WHOLE: i64 = inspect::FIELDS_READ_WHOLE;""",
        """const FIELDS_READ_WHOLE: i64 = i64::MAX;""",
        ["--test", "cli::list", "list_never_reads_a_big_hash_whole"],
        "CLI list reads an application hash of any size whole (HGETALL)",
    ),
    (
        "cli-run-status-dropped",
        "src/bin/redisson-lock/run.rs",
        """        return u8::try_from(code & 0xff).unwrap_or(1);""",
        """        return u8::from(code != 0);""",
        ["--test", "cli::run", "run_holds_the_lock_while_the_command_runs_and_passes_its_status"],
        "CLI run exits 1 for any failing command instead of passing its status through",
    ),
    (
        "cli-no-shard-numsub",
        "src/bin/redisson-lock/subscribers.rs",
        """        total += numsub(&mut node, "SHARDNUMSUB", channels)""",
        """        total += 0 * numsub(&mut node, "SHARDNUMSUB", channels)""",
        ["--test", "cli::topology", "works_on_a_cluster"],
        "CLI waiters miss sharded subscribers (SSUBSCRIBE) on a cluster",
    ),
    (
        "cli-url-not-redacted",
        "src/bin/redisson-lock/target.rs",
        """                redact(config.url())""",
        """                config.url()""",
        ["--test", "cli::topology", "a_dead_server"],
        "CLI connection errors print the password in the URL",
    ),
    (
        "cli-watch-unsharded",
        "src/bin/redisson-lock/target.rs",
        """            PushConn::Cluster(c) if sharded => c.ssubscribe(channel).await?,""",
        """            PushConn::Cluster(c) if sharded => c.subscribe(channel).await?,""",
        ["--test", "cli::topology", "works_on_a_cluster"],
        "CLI watch on a cluster with sharded pub/sub subscribes with SUBSCRIBE and misses SPUBLISH",
    ),
    (
        "sync-wait-leaks-subscription",
        "src/sync/mod.rs",
        """        let Some(sub) = subscribed.await? else {
            return Ok(None);
        };""",
        """        let Some(sub) = subscribed.await? else {
            return Ok(None);
        };
        let sub = &*Box::leak(Box::new(sub));""",
        ["--test", "semaphore", "a_cancelled_wait", "--test", "count_down_latch", "a_cancelled_wait", "--test", "permit_semaphore", "a_cancelled_wait"],
        "a cancelled synchronizer wait never drops its subscription: the channel stays subscribed",
    ),
    (
        "rate-limiter-overall-keys",
        "lua/rate_acquire.lua",
        """local value, permits = KEYS[2], KEYS[4]""",
        """local value, permits = KEYS[3], KEYS[5]""",
        ["--test", "rate_limiter", "layout_is_redissons",
         "--test", "java::rate_limiter", "the_limit_holds_across_both_sides"],
        "an OVERALL rate limiter takes from this client's window (the PER_CLIENT keys): Java and Rust no longer share the limit",
    ),
    (
        "rate-limiter-release-uncapped",
        "lua/rate_release.lua",
        """left = math.min(left + tonumber(ARGV[1]), rate)""",
        """left = left + tonumber(ARGV[1])""",
        ["--test", "rate_limiter", "layout_is_redissons"],
        "a rate limiter's release adds permits beyond the rate (Redisson caps the value at the rate)",
    ),
    (
        "rate-limiter-short-keep-alive",
        "src/sync/rate_limiter/config.rs",
        """    if keep_ms != 0 && keep_ms < interval_ms {""",
        """    if false {""",
        ["--test", "rate_limiter", "bad_input_is_refused"],
        "a keep-alive shorter than the interval is sent (Redisson refuses it: the keys would expire inside a window)",
    ),
    (
        "batch-overtakes",
        "src/conn/batch.rs",
        """    state.direct < MAX_DIRECT && state.queue.is_empty() && !state.out.contains_key(key)""",
        """    state.direct < MAX_DIRECT && state.queue.is_empty()""",
        ["--lib", "conn::batch::tests::an_operation_on_a_key_whose_batch_is_out_waits_for_it"],
        "group commit: an operation on a key whose batch is out takes a free flight and overtakes it (the trim before the cancelled acquire)",
    ),
    (
        "batch-small-queue",
        "src/conn/batch.rs",
        """pub(crate) const BATCH_MIN: usize = 8;""",
        """pub(crate) const BATCH_MIN: usize = 2;""",
        ["--test", "batching", "a_few_queued_operations_leave_as_their_own_scripts_not_a_batch"],
        "group commit (issue 24): a queue of two or three leaves as a batch script, which costs the server more than the scripts alone",
    ),
    (
        "batch-same-key-pipelined",
        "src/conn/batch.rs",
        """        if group.len() >= BATCH_MIN || !distinct_keys(&group) {""",
        """        if group.len() >= BATCH_MIN {""",
        ["--lib", "conn::batch::tests::only_groups_that_pay_become_batches"],
        "group commit (issue 24): two queued operations on one key go as separate calls, whose order only a batch script keeps on every topology",
    ),
    (
        "batch-queue-overtakes",
        "src/conn/batch.rs",
        """        if state.out.contains_key(&key) || blocked.contains(&key) {""",
        """        if blocked.contains(&key) {""",
        ["--lib", "conn::batch::tests::a_batch_leaves_out"],
        "group commit: a queued operation leaves in a new batch while an earlier batch on its key is still out",
    ),    # Issue 23: the holes a realistic bug slipped through (tests in tests/it/holes/).
    (
        "owner-task-truncated",
        "src/owner.rs",
        """            return LockOwner(task_number(id) & !THREAD_TAG);""",
        """            return LockOwner(task_number(id) & 0xffff);""",
        ["--test", "holes", "owners::tasks_two_to_the_sixteen_apart"],
        "a task's owner id keeps only the low 16 bits of its task id: tasks 2^16 apart share an owner",
    ),
    (
        "owner-field-u32",
        "src/owner.rs",
        """        let _ = write!(field, "{}", self.0);""",
        """        let _ = write!(field, "{}", self.0 as u32);""",
        ["--test", "holes", "owners::owners_with_equal_low_bits"],
        "the hash field writes the owner id truncated to 32 bits: owners with equal low bits (thread and task ids) share a field",
    ),
    (
        "ttl-whole-seconds",
        "src/lock/query.rs",
        """            t => LockTtl::Expires(Duration::from_millis(t as u64)),""",
        """            t => LockTtl::Expires(Duration::from_secs(t as u64 / 1000)),""",
        ["--test", "holes", "queries::"],
        "remain_time_to_live rounds PTTL down to whole seconds (a sub-second lease reads as 0)",
    ),
    (
        "pes-lease-seconds",
        "src/sync/permit_semaphore.rs",
        """        Some(l) => Ok(epoch_ms().saturating_add(millis(l))),""",
        """        Some(l) => Ok(epoch_ms().saturating_add(l.as_secs() * 1000)),""",
        ["--test", "holes", "queries::synchronizer_queries"],
        "a permit's lease end drops the lease's sub-second part",
    ),
    (
        "sync-count-i32",
        "src/sync/mod.rs",
        """        Ok(v.unwrap_or(0))""",
        """        Ok(v.map(|v| v as i32 as i64).unwrap_or(0))""",
        ["--test", "holes", "queries::synchronizer_queries"],
        "a synchronizer's count is read as a 32-bit integer (a latch count past 2^31 wraps)",
    ),
    (
        "watchdog-first-batch-only",
        "src/watchdog.rs",
        """.flat_map(|g| g.chunks(batch))""",
        """.flat_map(|g| g.chunks(batch).take(1))""",
        ["--test", "holes", "watchdog_scale::"],
        "the renewal pass sends only the first 100-key batch of each kind and slot: holds past it expire",
    ),
    (
        "read-renew-skips-first",
        "lua/read_renew.lua",
        """        for c = n, 1, -1 do""",
        """        for c = n, 2, -1 do""",
        ["--test", "holes", "watchdog_scale::"],
        "the read-lock renewal skips an owner's first rwlock_timeout key",
    ),
    (
        "spin-uncapped",
        "src/raw/spin.rs",
        """                    .saturating_add(jitter)
                    .min(max);""",
        """                    .saturating_add(jitter);""",
        ["--test", "holes", "spin_backoff::exponential"],
        "the spin lock's exponential backoff is never capped: a waiter polls seconds apart",
    ),
    (
        "spin-no-growth",
        "src/lock/engine/wait.rs",
        """                    retry.reset();
                    delays.next().unwrap_or_default()""",
        """                    retry.reset();
                    pause""",
        ["--test", "holes", "spin_backoff::exponential"],
        "a spin waiter keeps its first delay: it polls every initial delay while the lock is held",
    ),
    (
        "shard-unsubscribe-plain",
        "src/pubsub/subconn.rs",
        """                    for n in names {
                        conn.sunsubscribe(n).await?;
                    }
                    Ok(())""",
        """                    conn.unsubscribe(names).await""",
        ["--test", "holes", "cluster"],
        "sharded channels are unsubscribed with UNSUBSCRIBE: one shard channel leaks per name",
    ),
    (
        "unsubscribe-never",
        "src/pubsub/mod.rs",
        """            (false, true) => unsubscribe.push(name),""",
        """            (false, true) => {}""",
        ["--test", "holes", "subscriptions::standalone"],
        "a channel nobody waits on any more is never unsubscribed",
    ),
    (
        "subscriber-node-lost-ignored",
        "src/pubsub/mod.rs",
        """        Event::NodeLost | Event::Closed => return false,""",
        """        Event::Closed => return false,
        Event::NodeLost => wake_all(sh),""",
        ["--test", "holes", "cluster"],
        "a cut cluster subscriber connection is left to redis-rs's resubscription (CROSSSLOT across slots): waiters sleep until the TTL",
    ),
    (
        "multi-validity-from-reply",
        "src/multi/round.rs",
        """        .await;
        let mut kept = Vec::new();""",
        """        .await;
        let sent = Instant::now();
        let mut kept = Vec::new();""",
        ["--test", "holes", "multi_validity::"],
        "a RedLock/MultiLock validity counts from the re-apply's replies instead of its send (a slow member's latency is counted as validity)",
    ),
    (
        "multi-no-drift",
        "src/multi/round.rs",
        """valid_until.push(deadline.checked_sub(drift).unwrap_or(sent));""",
        """valid_until.push(deadline);""",
        ["--test", "holes", "multi_validity::"],
        "a RedLock/MultiLock validity has no clock-drift allowance",
    ),
    (
        "batch-shortfall-dropped",
        "src/conn/batch.rs",
        """                    (_, Err(e)) if q.synced => Err((e.clone(), shortfall.clone())),""",
        """                    (_, Err(e)) if q.synced => Err((e.clone(), None)),""",
        ["--test", "holes", "sentinel"],
        "group commit: a batched operation that no replica confirmed fails as a connection error, not is_no_synced_replicas",
    ),
    (
        "batch-verdict-ignored",
        "src/conn/batch.rs",
        """                    (_, Err(e)) if q.synced => Err((e.clone(), shortfall.clone())),""",
        """                    (_, Err(e)) if q.synced && false => Err((e.clone(), shortfall.clone())),""",
        ["--test", "holes", "sentinel"],
        "group commit: a batch's WAIT verdict is ignored: acquires no replica confirmed succeed",
    ),
    (
        "wait-shortfall-ignored",
        "src/conn/replicas.rs",
        """            if acked == 0 {""",
        """            if acked < 0 {""",
        ["--test", "holes", "sentinel"],
        "a lock write that no replica confirmed (WAIT 0) counts as confirmed",
    ),
    (
        "sentinel-values-unobserved",
        "src/conn/sentinel.rs",
        """                Value::ServerError(e) => demoted(Some(e.code())),""",
        """                Value::ServerError(_) => false,""",
        ["--test", "holes", "sentinel"],
        "READONLY/MASTERDOWN from a script or a pipeline entry do not make the client ask the sentinels again",
    ),
    (
        "sentinel-masterdown-ignored",
        "src/conn/sentinel.rs",
        """    matches!(code, Some("READONLY" | "MASTERDOWN"))""",
        """    matches!(code, Some("READONLY"))""",
        ["--test", "holes", "sentinel"],
        "MASTERDOWN from a replica that lost its master does not make the client ask the sentinels again",
    ),
    (
        "fair-hint-own-deadline",
        "lua/fair_lock.lua",
        """            local until_head = math.max(1, tonumber(deadline) - now)""",
        """            local until_head = math.max(1, tonumber(deadline) - now + tonumber(ARGV[3]))""",
        ["--test", "fair_lock", "dead_waiter_is_evicted"],
        "a fair waiter behind a dead head sleeps until its own queue deadline, not the head's",
    ),
    (
        "redirect-loading-dropped",
        "src/error.rs",
        """        Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" | "READONLY" | "LOADING" | "MASTERDOWN")""",
        """        Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" | "READONLY" | "MASTERDOWN")""",
        ["--lib", "retry::tests::each_redirect"],
        "LOADING (a server loading its data) is treated as final: calls fail instead of retrying",
    ),    # Code no mutant touched before issue 23 (the retry limit, the MultiLock quorum, the hold
    # expiry, the read holds' trim).
    (
        "retry-attempts-off-by-one",
        "src/retry.rs",
        """            Limit::Attempts => self.failures.saturating_add(1) < self.config.retry_attempts(),""",
        """            Limit::Attempts => self.failures < self.config.retry_attempts(),""",
        ["--lib", "retry::tests::attempts_allow"],
        "a call is tried once more than retry_attempts allows",
    ),
    (
        "multi-quorum-off-by-one",
        "src/multi/guard.rs",
        """        held < self.required || self.valid_until""",
        """        held + 1 < self.required || self.valid_until""",
        ["--test", "redlock", "lost_only_below_the_quorum"],
        "a RedLock guard still counts as held with one member fewer than its quorum",
    ),
    (
        "hold-expiry-min",
        "src/holds/mod.rs",
        """        grants.chain(extra_ms).max().map(|ms| ms.max(1))""",
        """        grants.chain(extra_ms).min().map(|ms| ms.max(1))""",
        ["--test", "leases", "a_shorter_reentry_never_shortens"],
        "the key's expiry covers the shortest outstanding hold instead of the longest",
    ),
    (
        "trim-read-key-left",
        "lua/trim.lua",
        """    for n = found, target + 1, -1 do""",
        """    for n = found, target + 2, -1 do""",
        ["--test", "rwlock", "reader_leaving_while_others_read_holds_nothing"],
        "the trim of a read hold leaves its last rwlock_timeout key behind",
    ),
    (
        "shutdown-silent",
        "src/shutdown.rs",
        """        publish: if kind.publishes { client.publish } else { "" },""",
        """        publish: "",""",
        ["--test", "shutdown", "a_waiter_elsewhere"],
        "Client::shutdown releases holds without publishing: waiters elsewhere sleep until the lease",
    ),
    (
        "shutdown-no-wake",
        "src/shutdown.rs",
        """    client.pubsub.wake_all();""",
        """""",
        ["--test", "shutdown", "this_clients_waits_end"],
        "Client::shutdown leaves this client's parked waiters asleep (their waits outlive the shutdown)",
    ),
    (
        "shutdown-keeps-permits",
        "src/shutdown.rs",
        """        join_all(permits.iter().map(|(id, p)| give_back(client, *id, p))),""",
        """        join_all(permits.iter().take(0).map(|(id, p)| give_back(client, *id, p))),""",
        ["--test", "shutdown", "this_clients_permits"],
        "Client::shutdown leaves this client's permit-expirable permits taken: waiters elsewhere wait for their leases",
    ),
    (
        "wait-refusal-as-zero",
        "src/conn/replicas.rs",
        """                Some(Value::ServerError(e)) => {
                    let detail = RedisError::from(e).to_string();
                    if !self.refusals.refuse("WAIT", &detail) {""",
        """                Some(Value::ServerError(e)) if false => {
                    let detail = RedisError::from(e).to_string();
                    if !self.refusals.refuse("WAIT", &detail) {""",
        ["--test", "wait_refused", "a_refusal_found_at_the_first_write"],
        "a refused WAIT is read as zero replicas (ReplicaSync on every write) instead of SyncRefused / BestEffort",
    ),
    (
        "wait-refused-resent",
        "src/conn/replicas.rs",
        """            .filter(|_| !self.refusals.is_refused("WAIT"))""",
        """            .filter(|_| true)""",
        ["--test", "wait_refused"],
        "under BestEffort a refused WAIT is sent again with every lock write",
    ),
    (
        "fence-ignored",
        "lua/fenced_set.lua",
        """if last and below(ARGV[1], last) then""",
        """if false then""",
        ["--test", "fencing", "a_paused_holders_stale_write_is_refused_by_the_redis_helper"],
        "FencedValue::set writes whatever the token: a paused holder's late write overwrites the current holder's",
    ),
    # --- The second round of holes (tests/it/holes2/, the model and the schedules).
    (
        "refusal-unheard",
        "src/wait.rs",
        """        if let Some(e) = channel.refusal() {""",
        """        if let Some(e) = channel.refusal().filter(|_| false) {""",
        ["--test", "holes2", "multi_channel_refusals::a_resubscription_refused", "--test", "holes2", "multi_channel_refusals::a_semaphore_waiter_refused"],
        "a waiter (lock or synchronizer: one shared loop) parked on a channel the server refused at a resubscription is never told: a lock waiter sleeps until the holder's lease ends, a synchronizer polls out its whole budget",
    ),
    (
        "refusal-spreads",
        "src/pubsub/mod.rs",
        """        let refusal = refused.iter().find(|(r, _)| *r == n).map(|(_, e)| e);""",
        """        let refusal = refused.first().map(|(_, e)| e);""",
        ["--test", "holes2", "multi_channel_refusals::waiters_parking_at_once"],
        "one refused channel in a SUBSCRIBE of several marks every channel of it refused",
    ),
    (
        "fair-leave-silent",
        "lua/fair_cancel.lua",
        """    redis.call(ARGV[3], KEYS[4] .. ':' .. queue[2], ARGV[4])""",
        """    local _ = queue[2]""",
        ["--test", "holes2", "fair_head_leaves::"],
        "a fair head leaving a free lock wakes nobody: the new head sleeps until its deadline",
    ),
    (
        "nr-fair-cancel-stays",
        "src/raw/non_reentrant.rs",
        """    fn cancel_script(&self, op: &Op<'_>) -> Option<Call> {
        Fair.cancel_script(op)
    }""",
        """    fn cancel_script(&self, _op: &Op<'_>) -> Option<Call> {
        None
    }""",
        ["--test", "holes2", "kind_matrix::"],
        "a non-reentrant fair waiter that times out or is cancelled stays in Redisson's queue",
    ),
    (
        "fence-rounded",
        "lua/fenced_set.lua",
        """if last and below(ARGV[1], last) then""",
        """if last and tonumber(ARGV[1]) < tonumber(last) then""",
        ["--test", "holes2", "fenced_edges::"],
        "FencedValue compares tokens as Lua numbers (doubles): a stale token next to 2^53 or i64::MAX is accepted",
    ),
    (
        "token-rounded",
        "lua/fenced_lock.lua",
        """    redis.call('incr', KEYS[2])
    local token = redis.call('get', KEYS[2])""",
        """    local token = redis.call('incr', KEYS[2])""",
        ["--test", "holes2", "fenced_edges::our_fenced_lock_mints"],
        "the fenced lock returns INCR's reply through a Lua number: one token above 2^53 handed to two holders",
    ),
    (
        "replica-count-forever",
        "src/conn/replicas.rs",
        """                Some((n, read)) if read.elapsed() < REPLICA_REFRESH => n,""",
        """                Some((n, _read)) => n,""",
        ["--test", "holes2", "replica_topology::standalone_replica_detached_then_attached_again"],
        "the replica count behind WAIT is read once: a replica added later is never waited for",
    ),
    (
        "batch-noscript",
        "src/conn/batch.rs",
        """        if matches!(&reply, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)) {""",
        """        if false {""",
        ["--test", "holes2", "batch_recovery::noscript_between_pile_up_and_release"],
        "a batch that met NOSCRIPT (SCRIPT FLUSH, an empty restart) fails all its operations instead of loading the batch script",
    ),
    (
        "model-retry-releases",
        "src/lock/engine/release.rs",
        """        Try::Trim { target: after }
    } else {""",
        """        Try::Release
    } else {""",
        ["--lib", "lock::model::"],
        "a release retried after an unknown outcome sends the release again instead of the trim: the model finds a double release",
    ),
    (
        "schedule-epoch-late",
        "src/holds/mod.rs",
        """            let notified = self.ended.notified();
            tokio::pin!(notified);
            // Registered before the check, so an end in between is not missed.
            notified.as_mut().enable();
            if self.epoch() != seen {
                return;
            }
            notified.await;""",
        """            if self.epoch() != seen {
                return;
            }
            let notified = self.ended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            notified.await;""",
        ["--lib", "holds::schedules::"],
        "a wait for a hold's loss registers after its check: a loss in between is never heard (shuttle finds the schedule)",
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
