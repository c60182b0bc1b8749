//! `cargo bench`: a quick run of the benchmark suite (one run of every workload, about 2 to 3
//! minutes; see `benches/README.md`). The suite is a crate of its own (`benches/Cargo.toml`, its
//! own workspace and lock file) so that the peer crates never enter this crate's build; this
//! target only delegates to it. Arguments after `--` are passed on, e.g.
//! `cargo bench -- --only w1,w2 --libs ours,rslock`.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    // Only `cargo bench` passes `--bench`; anything else running this target (a test run) is
    // not asking for a benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("benches/quick.rs: run it with `cargo bench`");
        return ExitCode::SUCCESS;
    }
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/Cargo.toml");
    // Cargo passes `--bench` to bench targets; the suite does not take it.
    let passed: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args([
            "run",
            "--release",
            "--locked",
            "--manifest-path",
            manifest,
            "--",
        ])
        .arg("--quick")
        .args(&passed)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("the benchmark suite failed: {s}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("could not run cargo for the benchmark suite: {e}");
            ExitCode::FAILURE
        }
    }
}
