//! The integration tests, as one binary: every test file is a module here and shares
//! `support` (real redis-server processes, clusters, the fault proxy, holder processes), which
//! is compiled once instead of once per file. Run one file with `cargo test --test it rlock::`.

mod multi_support;
mod support;

mod acl;
mod aof;
mod at_risk;
mod batching;
#[cfg(feature = "blocking")]
mod blocking;
#[cfg(feature = "blocking")]
mod blocking_sync;
mod bounds;
// The fault campaign: seeded rounds of faults, checked and reported (scripts/campaign).
mod campaign;
mod cancellation;
#[cfg(feature = "cli")]
mod cli;
mod clock_steps;
mod clocks;
mod cluster;
mod cluster_route;
mod connect;
mod count_down_latch;
mod dropped_guards;
mod eviction;
mod failover_aware;
mod failovers;
mod fair_linger;
mod fair_lock;
mod fault_holders;
mod fault_proxy;
mod fault_redlock;
mod fault_server;
mod fault_soak;
mod fault_sync;
mod faults;
mod fenced_lock;
mod fencing;
// Issue 41 item 1: a waiter of another client gets a turn within a streak of local handoffs.
mod handoff_fairness;
// Issue 23: the holes a realistic bug slipped through, one module per area.
mod holes;
// The second round of test holes, one module per area.
mod holes2;
// The Java Redisson interop tier (needs the peer jars: scripts/ensure-java).
mod java;
mod latches;
mod layers;
mod leases;
mod multi_lock;
mod multi_query;
mod non_reentrant;
mod owner_tasks;
// Issue 37: the programs users write, one module per pattern family.
mod patterns;
// Real network partitions: namespaces, veth pairs and a bridge (support/netns.rs).
mod partitions;
mod permit_extras;
mod permit_guard;
mod permit_semaphore;
mod rate_limiter;
mod redisson_conformance;
mod redlock;
mod regressions;
mod rlock;
mod rwlock;
mod secrets;
mod semaphore;
mod sentinel;
mod sentinel_switch;
mod server_clock;
mod shutdown;
// Valkey 9's atomic slot migration of a slot with holds and parked waiters.
mod slot_migration;
mod spin_lock;
mod sync_extras;
mod tls;
mod wait_refused;
mod wakeups;
mod watchdog;
