#!/usr/bin/env bash
# Benchmarks a year of history under retention (issue 34): simulated hosts
# with a year of hourly `quick` results (every point, a measurement document
# of the agent's shape each), then the database's size, a retention pass at
# the default windows (raw 90 days, daily 730 days) with its time and what it
# folded, the size again (after a plain VACUUM, which does not shrink the
# files, and after a VACUUM FULL of results and jobs, which does), p50 and p95 of every
# report page before and after the pass (target: every p95 under 300 ms
# after), and a second pass that must fold nothing. Prints figures per host
# and year, and their extrapolation to 1,000 hosts.
# The report bench in its history mode (coordinator/benches/report/history.rs),
# on a private PostgreSQL cluster in a temporary directory (needs PostgreSQL's
# server binaries, as `serve` does).
# Figures and how long it takes: docs/performance.md, "A year of history under retention".
# Usage: deploy/bench-history.sh
#   CIPHERFLEET_HISTORY_HOSTS=8     hosts: about 0.45 GB of database and half a minute of generation each
#                                   (the default needs about 10 GB of free disk in TMPDIR at its peak)
#   CIPHERFLEET_HISTORY_DAYS=365    days of hourly results, ending at the last whole hour
# Issue 34's full fleet (about 440 GiB before retention) needs a machine with ~1 TB of disk:
#   CIPHERFLEET_HISTORY_HOSTS=1000 deploy/bench-history.sh
# As the report bench: CIPHERFLEET_REPORT_PAGES=history,/hosts/ times only those pages,
# CIPHERFLEET_REPORT_PLANS=0 skips the fold's plan, CIPHERFLEET_HISTORY_VACUUM_FULL=0 the
# VACUUM FULL, CIPHERFLEET_REPORT_HOLD_SECONDS=600 keeps the cluster up after the second pass.
set -euo pipefail
cd "$(dirname "$0")/.."
CIPHERFLEET_REPORT_HISTORY=1 cargo bench -p cipherfleet-coordinator --bench report
