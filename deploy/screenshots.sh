#!/usr/bin/env bash
# Regenerates the report's screenshots in docs/screenshots/ (the README shows
# compare.png and fallback.png): the browser test (coordinator/tests/e2e/browser.rs)
# with a wider matrix, measured by release-built agents so the figures are real
# speeds, one PNG per page. The data is whatever this machine measures: two agents
# (the accelerated build and the software build) on one host, measuring at once.
# Needs chromium and PostgreSQL (deploy/install-deps.sh). About five minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

# The e2e harness wants the debug agents beside the test binary; the release ones measure.
deploy/build.sh
deploy/build.sh --release
mkdir -p docs/screenshots
CIPHERFLEET_AGENT_DIR=target/release CIPHERFLEET_SCREENSHOTS=docs/screenshots \
  cargo test -p cipherfleet-coordinator --test e2e every_page_shows_real_campaign_results -- --nocapture
ls -l docs/screenshots
