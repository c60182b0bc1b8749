#!/usr/bin/env bash
# The bench on a many-core host, each server on cores of its own: the main table (ours, the peer
# crates, the server's ceiling and Java Redisson, on Redis and on Valkey, pinned), then W2 over
# 1-, 3- and 6-master clusters, then the watchdog and tasks curves. Writes one TSV per part to
# $BENCH_OUT (default benches/target/many-core); `--replay` re-renders each.
#
#   bash benches/many-core.sh                     # from the repository root, 16+ cores
#
# Environment (all optional):
#   LOCKS             the bench binary (default: build it, benches/target/release/locks)
#   JAVA_HOME         the JVM for Java Redisson (default: the newest under /usr/lib/jvm)
#   REDISSON_JAVA_JAR the Java peer's jar or its unpacked classes (default: scripts/ensure-java)
#   LIBS              the Rust libraries of the main table (default ours,ours-batch,rslock,redisson,raw)
#   NO_JAVA=1         leave Java Redisson out (a host without a JDK)
#   PARTS="main wc curves"  the parts to run
# Needs 16 CPUs: the servers get 0-5, the bench (and the JVM, a child of it) 6-15.
set -euo pipefail
cd "$(dirname "$0")/.."
cpus=$(nproc)
if [ "$cpus" -lt 16 ]; then
  echo "benches/many-core.sh: this host has $cpus CPUs; it needs 16 (servers on 0-5, clients on 6-15)" >&2
  exit 2
fi
out=${BENCH_OUT:-benches/target/many-core}
mkdir -p "$out"
locks=${LOCKS:-}
if [ -z "$locks" ]; then
  cargo build --release --locked --manifest-path benches/Cargo.toml
  locks=benches/target/release/locks
fi
libs=${LIBS:-ours,ours-batch,rslock,redisson,raw}
if [ "${NO_JAVA:-0}" != 1 ]; then
  libs=$libs,redisson-java,redisson-java-tuned
fi
parts=${PARTS:-main wc curves}
for part in $parts; do
  case $part in
    main)
      # One server core, as a production server has; Redis and Valkey in one run.
      "$locks" --quick --server redis,valkey --server-cpus 0 --client-cpus 6-15 \
        --only w1,w2,w3,w3f,w3w --libs "$libs" --no-svg --save "$out/main.tsv" ;;
    wc)
      "$locks" --quick --only wc --server-cpus 0-5 --client-cpus 6-15 --no-svg --save "$out/wc.tsv" ;;
    curves)
      "$locks" --quick --only sw,st --libs ours --server-cpus 0 --client-cpus 6-15 --no-svg \
        --save "$out/curves.tsv" ;;
    *) echo "unknown part $part (main, wc, curves)" >&2; exit 2 ;;
  esac
done
echo "benches/many-core.sh: figures in $out"
