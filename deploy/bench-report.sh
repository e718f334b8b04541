#!/usr/bin/env bash
# Benchmarks the report: p50 and p95 of every page and its /api/v1 table
# (/, /hosts, /hosts/{id}, /compare, /modes, /fallback, /capacity,
# /campaigns/{id}, /scenarios) and /metrics with 100,000 and with 1,000,000
# stored results on 10,000 hosts (target: every p95 under 300 ms at
# 1,000,000), the time of the whole-fleet findings pass at each size, the
# first view of /compare and /fallback right after new results at the last
# size (and how long until their stored figures have them), and the query
# plans of every page at 1,000,000 (EXPLAIN ANALYZE via auto_explain; a
# sequential scan of results, result_points or jobs fails the run). Prints
# one table at the end.
# Simulated hosts and bulk-loaded results on a private PostgreSQL cluster in a
# temporary directory (needs PostgreSQL's server binaries, as `serve` does).
# How long it takes: docs/performance.md, "The benchmarks".
# Usage: deploy/bench-report.sh
# To look at a part only (the full run is what docs/performance.md quotes):
#   CIPHERFLEET_REPORT_DATASETS=1000000   the sizes to load and time (comma-separated)
#   CIPHERFLEET_REPORT_PAGES=compare,/modes   pages whose name or path contains a part
#   CIPHERFLEET_REPORT_FINDINGS=0   skip the findings pass;  CIPHERFLEET_REPORT_PLANS=0   skip the plan check
#   CIPHERFLEET_REPORT_CHANGES=0   skip the views right after new results
#   CIPHERFLEET_REPORT_HOLD_SECONDS=600   keep the cluster up that long after the last dataset (psql URL printed)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p cipherfleet-coordinator --bench report
