#!/usr/bin/env bash
# Benchmarks the benchmark engine: engine vs minimal loop, repeatability, and the
# accelerated/software ratio (needs both release binaries, built here first).
# Takes about a minute. Usage: deploy/bench-engine.sh
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/build.sh --release
cargo bench -p cipherfleet-agent --bench engine
