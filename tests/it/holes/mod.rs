//! Issue 23's test holes: one module per area where a realistic bug used to pass the whole
//! suite. Each test names, in its doc comment, the kind of bug it is there to catch.

mod cluster;
mod multi_validity;
mod owners;
mod queries;
mod replica_sync;
mod sentinel;
mod spin_backoff;
mod subscriptions;
mod watchdog_scale;
