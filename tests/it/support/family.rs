//! Which server the suite runs against: Debian's `redis-server` (the default) or Valkey.
//!
//! One switch: `REDISSON_LOCK_SERVER=valkey` maps to the pinned Valkey binaries that
//! `scripts/ensure-valkey` puts in `target/valkey-8.1.8/` (`valkey-server`, `valkey-cli`);
//! `REDISSON_LOCK_SERVER=redis` (or unset) to `redis-server` / `redis-cli` on `PATH`.
//! `REDIS_SERVER_BIN` and `REDIS_CLI_BIN` override either binary. The family a test sees is
//! read from the server binary itself (`--version`), so a `REDIS_SERVER_BIN` that points at a
//! valkey-server counts as Valkey. The first server started prints which one this run uses.

use std::io::Write;
use std::process::Command;
use std::sync::OnceLock;

/// The server families the suite is verified against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Redis (Debian's 7.0 in CI).
    Redis,
    /// Valkey (8.1 in CI: reports `redis_version:7.2.4` beside `valkey_version`).
    Valkey,
}

/// Where `scripts/ensure-valkey` puts the pinned Valkey binaries.
const VALKEY_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/valkey-8.1.8");

/// The switch's value: `valkey` or `redis` (the default).
fn wants_valkey() -> bool {
    match std::env::var("REDISSON_LOCK_SERVER").as_deref() {
        Ok("valkey") => true,
        Ok("redis") | Ok("") | Err(_) => false,
        Ok(other) => panic!("REDISSON_LOCK_SERVER={other:?}: expected `redis` or `valkey`"),
    }
}

fn valkey_bin(name: &str) -> String {
    let path = format!("{VALKEY_DIR}/{name}");
    assert!(
        std::path::Path::new(&path).exists(),
        "REDISSON_LOCK_SERVER=valkey but {path} is missing: run scripts/ensure-valkey"
    );
    path
}

/// The server binary the harness starts (data nodes and sentinels).
pub fn redis_server_bin() -> String {
    match std::env::var("REDIS_SERVER_BIN") {
        Ok(bin) if !bin.is_empty() => bin,
        _ if wants_valkey() => valkey_bin("valkey-server"),
        _ => "redis-server".to_owned(),
    }
}

/// The CLI the cluster harness runs (`--cluster create`).
pub fn redis_cli_bin() -> String {
    match std::env::var("REDIS_CLI_BIN") {
        Ok(bin) if !bin.is_empty() => bin,
        _ if wants_valkey() => valkey_bin("valkey-cli"),
        _ => "redis-cli".to_owned(),
    }
}

/// The family of [`redis_server_bin`], from its `--version` line ("Valkey server v=8.1.8 ..."
/// or "Redis server v=7.0.15 ..."); printed once per run, outside the test output capture.
pub fn family() -> Family {
    static FAMILY: OnceLock<Family> = OnceLock::new();
    *FAMILY.get_or_init(|| {
        let bin = redis_server_bin();
        let version = Command::new(&bin)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|e| panic!("cannot run {bin} --version: {e}"));
        let family = if version.starts_with("Valkey") {
            Family::Valkey
        } else {
            Family::Redis
        };
        // Not eprintln!: the harness captures that per test; this line is for the whole run.
        let _ = writeln!(std::io::stderr(), "server under test: {version} ({bin})");
        family
    })
}

/// Whether the suite runs against Valkey.
pub fn is_valkey() -> bool {
    family() == Family::Valkey
}
