//! The user documentation's Rust blocks as doc tests: every page under `docs/` is included here
//! (the README already is, as the crate's front page), so each of its Rust blocks compiles, and
//! runs against a throwaway server (`__doctest`) unless it is marked `no_run`. Blocks in another
//! language are fenced with it (`text`, `sh`, `toml`, ...), which rustdoc skips.
//! `tests/docs.rs` checks that every page is listed.

/// The README's first example, run: the README shows it `no_run`, without the line that
/// points it at a throwaway server (rustdoc hides it, GitHub and crates.io would not);
/// `tests/docs.rs` keeps the two the same but for that line.
///
/// ```rust
/// use std::time::Duration;
/// use redisson_lock::Client;
///
/// #[tokio::main]
/// async fn main() -> Result<(), redisson_lock::LockError> {
///     # redisson_lock::__doctest::set_redis_url();
///     let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".to_owned());
///     let client = Client::connect(&url).await?;
///     let lock = client.get_lock("orders:42");
///
///     // Wait as long as it takes; the watchdog renews the 30 s lease every 10 s.
///     let guard = lock.lock().await?;
///     // ... critical section ...
///     guard.unlock().await?;
///
///     // Wait at most 2 s, then hold for at most 10 s (a fixed lease, no watchdog).
///     if let Some(guard) = lock.try_lock_with_lease(Duration::from_secs(2), Duration::from_secs(10)).await? {
///         guard.unlock().await?;
///     }
///
///     // On shutdown (SIGTERM): release every hold so that waiters elsewhere get the locks now.
///     let report = client.shutdown().await;
///     if !report.is_complete() {
///         eprintln!("not released: {report:?}");
///     }
///     Ok(())
/// }
/// ```
mod readme_first_example {}
#[doc = include_str!("../docs/benchmarks.md")]
mod benchmarks {}
#[doc = include_str!("../docs/cli.md")]
mod cli {}
#[doc = include_str!("../docs/guarantees.md")]
mod guarantees {}
#[doc = include_str!("../docs/java.md")]
mod java {}
#[doc = include_str!("../docs/locks.md")]
mod locks {}
#[doc = include_str!("../docs/migrating-from-rslock.md")]
mod migrating_from_rslock {}
#[doc = include_str!("../docs/observability.md")]
mod observability {}
#[doc = include_str!("../docs/production.md")]
mod production {}
#[doc = include_str!("../docs/protocol.md")]
mod protocol {}
#[doc = include_str!("../docs/redlock.md")]
mod redlock {}
#[doc = include_str!("../docs/reliability.md")]
mod reliability {}
#[doc = include_str!("../docs/troubleshooting.md")]
mod troubleshooting {}
