#!/usr/bin/env bash
# Benchmarks the report: time to render /compare (hosts and classes) and
# /fallback with 100,000 and with 1,000,000 stored results (target: p95 under
# 300 ms at 1,000,000), plus the query plans of every page at 1,000,000
# (EXPLAIN ANALYZE via auto_explain; a sequential scan of results or
# result_points fails the run). Simulated hosts and bulk-loaded results on a
# private PostgreSQL cluster in a temporary directory (needs PostgreSQL's
# server binaries, as `serve` does). About five minutes on 2 cores.
# Usage: deploy/bench-report.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p cipherfleet-coordinator --bench report
