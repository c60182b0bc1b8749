//! Preemption points for schedule exploration.
//!
//! The crate's unit tests explore the interleavings of its in-process concurrency with `shuttle`
//! (`holds/schedules.rs`, `pubsub/schedules.rs`): shuttle runs the tasks one at a time and
//! switches between them at every `.await` that waits and at every [`point`]. The points sit
//! where a task reads or writes state that another task races with (a hold's epoch, the holds
//! map, the channel registry), so a schedule can switch tasks between the read and its use, as
//! another thread could. Outside a shuttle execution (and in every non-test build) a point does
//! nothing.

/// A place where another task may run first (in a shuttle execution only).
#[inline(always)]
pub(crate) fn point() {
    #[cfg(test)]
    if shuttle::current::try_get_current_task().is_some() {
        shuttle::thread::yield_now();
    }
}

/// Runs `f` under shuttle's schedulers: PCT (depth 3) with a fixed seed, then random schedules
/// with a fixed seed; deterministic, and a failure names the schedule that broke.
#[cfg(test)]
pub(crate) fn explore<F>(f: F)
where
    F: Fn() + Send + Sync + 'static,
{
    let f = std::sync::Arc::new(f);
    let g = f.clone();
    let pct = shuttle::scheduler::PctScheduler::new_from_seed(0x5eed, 3, 1_000);
    shuttle::Runner::new(pct, shuttle::Config::default()).run(move || g());
    shuttle::check_random_with_seed(move || f(), 0x5eed, 2_000);
}
