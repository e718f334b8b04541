#!/usr/bin/env bash
# Regenerates the report's screenshots in docs/screenshots/, one PNG per page, from the fleet
# of deploy/fleet.sh: the e2e fleet test (coordinator/tests/e2e/fleet/) with CIPHERFLEET_SCREENSHOTS
# set, which after its campaign runs the quickstart's `tour` on every host, then saves what a new
# user meets first: overview, hosts, host-<name>, compare, modes, fallback, capacity, campaigns,
# campaign, scenarios and scenario-<name>.
# The agents are the release static builds of dist/ (deploy/build-static.sh), so the real hosts'
# figures are real speeds of this machine; the emulated hosts' are marked as not performance.
# Needs root (network namespaces), qemu-user, chromium and PostgreSQL (deploy/install-deps.sh).
# How long it takes after the builds: docs/performance.md, "Scripts: time and disk".
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "screenshots.sh: run as root (the fleet needs network namespaces)" >&2; exit 2; }
deploy/build-static.sh
mkdir -p docs/screenshots
CIPHERFLEET_REQUIRE_NETNS=1 CIPHERFLEET_REQUIRE_STATIC=1 CIPHERFLEET_REQUIRE_CHROMIUM=1 CIPHERFLEET_REQUIRE_VM=1 \
  CIPHERFLEET_SCREENSHOTS=docs/screenshots \
  cargo test -p cipherfleet-coordinator --test e2e every_host_of_the_fleet -- --nocapture
ls -l docs/screenshots
