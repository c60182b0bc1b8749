//! The user documentation's Rust blocks as doc tests: every page under `docs/` is included here
//! (the README already is, as the crate's front page), so each of its Rust blocks compiles, and
//! runs against a throwaway server (`__doctest`) unless it is marked `no_run`. Blocks in another
//! language are fenced with it (`text`, `sh`, `toml`, ...), which rustdoc skips.
//! `tests/docs.rs` checks that every page is listed.

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
