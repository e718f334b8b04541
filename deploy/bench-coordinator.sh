#!/usr/bin/env bash
# Benchmarks the coordinator: results ingested per second from simulated hosts, and
# the end-to-end time of a `quick` campaign on one local agent against
# `cipherfleet-agent bench --suite quick` run directly (the coordinator's overhead,
# target under 10 %), and the CPU a session spends on each result's document
# (parsed and checked, then stored once) for the real agent's measurement. The coordinator runs inside the bench, on a private PostgreSQL
# cluster in a temporary directory (needs PostgreSQL's server binaries, as `serve` does).
# First it checks that an oversized matrix (10^7 points, or ~10^6 with every list
# within its cap) is refused in milliseconds and leaves the coordinator's RSS where
# it was. Builds the release binaries first; how long the bench itself takes:
# docs/performance.md, "The benchmarks".
# Usage: deploy/bench-coordinator.sh
# Only the refusal figures, on the debug build and without an agent:
#   cargo bench -p cipherfleet-coordinator --bench coordinator --profile dev -- refusal
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/build.sh --release
cargo build --release -p cipherfleet-coordinator
cargo bench -p cipherfleet-coordinator --bench coordinator
