//! Which server the suite runs against: Debian's `redis-server` (the default) or Valkey.
//!
//! One switch: `REDISSON_LOCK_SERVER=valkey` maps to the pinned Valkey 9.1.2 that
//! `scripts/ensure-valkey` puts in `target/valkey-9.1.2/` (`valkey-server` only: the cluster
//! harness's `--cluster create` uses `redis-cli` from `PATH`), `REDISSON_LOCK_SERVER=valkey-8.1`
//! to Valkey 8.1.8 in `target/valkey-8.1.8/` (`scripts/ensure-valkey 8.1`: `valkey-server`,
//! `valkey-cli`), and `REDISSON_LOCK_SERVER=redis` (or unset) to `redis-server` / `redis-cli`
//! on `PATH`. `REDIS_SERVER_BIN` and `REDIS_CLI_BIN` override either binary. The family a test
//! sees is read from the server binary itself (`--version`), so a `REDIS_SERVER_BIN` that
//! points at a valkey-server counts as Valkey. The first server started prints which one this
//! run uses.

use std::io::Write;
use std::process::Command;
use std::sync::OnceLock;

/// The server families the suite is verified against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Redis (Debian's 7.0 in CI).
    Redis,
    /// Valkey (9.1 in CI, 8.1 on request: both report `redis_version:7.2.4` beside
    /// `valkey_version`).
    Valkey,
}

/// Where `scripts/ensure-valkey [VERSION]` puts the pinned Valkey binaries.
const VALKEY_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target");

/// The Valkey version the switch names (`valkey`: 9.1.2, `valkey-8.1`: 8.1.8), or `None` for
/// Redis (`redis` or unset).
fn wanted_valkey() -> Option<&'static str> {
    match std::env::var("REDISSON_LOCK_SERVER").as_deref() {
        Ok("valkey") | Ok("valkey-9.1") => Some("9.1.2"),
        Ok("valkey-8.1") => Some("8.1.8"),
        Ok("redis") | Ok("") | Err(_) => None,
        Ok(other) => {
            panic!("REDISSON_LOCK_SERVER={other:?}: expected `redis`, `valkey` or `valkey-8.1`")
        }
    }
}

/// The pinned Valkey 9.1.2 server, for the tests that need a Valkey 9 feature whatever the
/// switch says (`scripts/test` fetches it before any test runs).
pub fn valkey9_server_bin() -> String {
    valkey_bin("9.1.2", "valkey-server")
}

fn valkey_bin(version: &str, name: &str) -> String {
    let path = format!("{VALKEY_ROOT}/valkey-{version}/{name}");
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is missing: run scripts/ensure-valkey {}",
        &version[..3]
    );
    path
}

/// With `RUST_LOG` set (`scripts/repeat-suite` sets it), the crate's tracing events go to the
/// test's captured output: printed with a failing test, dropped with a passing one. Installed
/// once, by the first test that starts a server.
fn test_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_test_writer()
                .with_ansi(false)
                .try_init();
        }
    });
}

/// The server binary the harness starts (data nodes and sentinels).
pub fn redis_server_bin() -> String {
    test_logs();
    match std::env::var("REDIS_SERVER_BIN") {
        Ok(bin) if !bin.is_empty() => bin,
        _ => match wanted_valkey() {
            Some(version) => valkey_bin(version, "valkey-server"),
            None => "redis-server".to_owned(),
        },
    }
}

/// The CLI the cluster harness runs (`--cluster create`).
pub fn redis_cli_bin() -> String {
    match std::env::var("REDIS_CLI_BIN") {
        Ok(bin) if !bin.is_empty() => bin,
        // Valkey 9.1's wheel has no CLI: redis-cli speaks the same `--cluster create`.
        _ => match wanted_valkey() {
            Some(version @ "8.1.8") => valkey_bin(version, "valkey-cli"),
            _ => "redis-cli".to_owned(),
        },
    }
}

/// The family of [`redis_server_bin`], from its `--version` line ("Valkey server v=8.1.8 ..."
/// or "Redis server v=7.0.15 ..."); printed once per run, outside the test output capture.
pub fn family() -> Family {
    server().0
}

/// The server under test as "Redis 7.0.15" or "Valkey 8.1.8" (the campaign's reports).
pub fn server_version() -> String {
    server().1.clone()
}

fn server() -> &'static (Family, String) {
    static SERVER: OnceLock<(Family, String)> = OnceLock::new();
    SERVER.get_or_init(|| {
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
        let name = version.split(' ').next().unwrap_or_default();
        let v = version
            .split(' ')
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or("?");
        (family, format!("{name} {v}"))
    })
}

/// Whether the suite runs against Valkey.
pub fn is_valkey() -> bool {
    family() == Family::Valkey
}
