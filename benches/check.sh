#!/usr/bin/env bash
# bench-check: the benchmark crate must at least compile (issue 7), so it cannot rot.
# Builds the separate bench crate (peers included) in release mode; runs nothing.
# Usage: bash benches/check.sh        (from the repository root or anywhere)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cargo build --release --locked --manifest-path "$here/Cargo.toml"
