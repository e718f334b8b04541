#!/usr/bin/env bash
# The test command (README; CI runs exactly this): installs what the tests need,
# checks formatting and lints, builds both agent flavours natively and statically
# for x86-64 and ARM64 (and the x86-64 coordinator) and the previous release's
# coordinator and agent (for the rolling-upgrade test), checks the deployment files
# (deploy/check-deploy.sh), the static builds on emulated hosts and every way of stopping the
# quickstart (deploy/check-stop.sh), then runs every test (the fleet test with its VM hosts, whose
# packages and kernel deploy/install-deps.sh installs).
# From a clean clone the five static release builds (thin LTO, one codegen unit) are much of
# the run, and quick when nothing needs rebuilding; how long it takes: docs/performance.md,
# "Scripts: time and disk".
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "disk space"
# A clean clone's builds and the tests' PostgreSQL clusters and scratch directories (in TMPDIR)
# need the room asked for below, as measured here (docs/performance.md, "Scripts: time and
# disk"); a disk that fills half way through fails tests far from the cause (PostgreSQL refusing
# writes), so say so here instead.
# enough DIR KB: fails unless DIR's filesystem has KB free.
enough() {
  local free_kb
  free_kb=$(df -Pk "$1" | awk 'NR == 2 { print $4 }')
  if [ "$free_kb" -lt "$2" ]; then
    printf 'test.sh: %s has %d MB free; the builds and tests need about %d MB there (free some space, e.g. old target/ directories)\n' \
      "$(cd "$1" && pwd)" $(( free_kb / 1024 )) $(( $2 / 1024 )) >&2
    exit 1
  fi
  echo "$(cd "$1" && pwd): $(( free_kb / 1024 )) MB free, about $(( $2 / 1024 )) MB needed"
}
# (du fails for a directory not built yet: a clean clone has neither.)
built_kb=$({ du -sk target target-soft 2>/dev/null || true; } | awk '{ s += $1 } END { print s + 0 }')
build_kb=$(( 14 * 1024 * 1024 - built_kb ))
tmp_kb=$(( 2 * 1024 * 1024 ))
if [ "$(df -P . | awk 'NR == 2 { print $1 }')" = "$(df -P "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $1 }')" ]; then
  enough . $(( (build_kb > 0 ? build_kb : 0) + tmp_kb ))
else
  enough . $(( build_kb > 0 ? build_kb : 0 ))
  enough "${TMPDIR:-/tmp}" $tmp_kb
fi

step "dependencies"
deploy/install-deps.sh

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

step "both flavours (debug), software sibling next to the test binaries"
deploy/build.sh

step "the previous release's coordinator and agent, for the rolling-upgrade test (cached)"
deploy/build-previous.sh

step "static builds for x86-64 and ARM64"
deploy/build-static.sh
# …and the static x86-64 coordinator, for its FROM-scratch image (the ARM64 one only on request:
# one more release build each).
deploy/build-static.sh --coordinator x86_64-unknown-linux-musl

step "deployment files: systemd units, install-agent.sh, Kubernetes, alerting, images of dist/"
deploy/check-deploy.sh

step "emulated hosts: ARM64, x86-64 without AES-NI, old kernel"
deploy/qemu-check.sh

step "stopping the quickstart: Ctrl-C, SIGINT to its group, SIGTERM, SIGHUP, --stop after --keep"
deploy/check-stop.sh

step "unit tests of the software flavour (KATs on the soft backends)"
RUSTFLAGS="$(deploy/build.sh --soft-rustflags)" CARGO_TARGET_DIR=target-soft cargo test -p cipherfleet-agent --lib

step "every test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# Tests whose prerequisite is missing skip under a plain `cargo test`; here the
# prerequisites were installed or built above, so a missing one fails instead:
#   CIPHERFLEET_REQUIRE_SOFT      the software sibling target/debug/cipherfleet-agent-soft (deploy/build.sh)
#   CIPHERFLEET_REQUIRE_CHROMIUM  chromium for the report's browser and XSS tests (deploy/install-deps.sh)
#   CIPHERFLEET_REQUIRE_STATIC    the static agents in dist/ for the emulated 10 MiB 3DES point and the
#                                 fleet of deploy/fleet.sh (deploy/build-static.sh), qemu-user
#   CIPHERFLEET_REQUIRE_NETNS     root and network namespaces for the fleet (e2e fleet/)
#   CIPHERFLEET_REQUIRE_VM        the fleet's VM hosts: qemu-system-x86_64, busybox-static, kmod, xz and
#                                 Debian's kernel in the VM cache (deploy/install-deps.sh)
#   CIPHERFLEET_REQUIRE_PREVIOUS  the previous release's binaries in target/previous/ (deploy/build-previous.sh)
CIPHERFLEET_REQUIRE_SOFT=1 CIPHERFLEET_REQUIRE_CHROMIUM=1 CIPHERFLEET_REQUIRE_STATIC=1 CIPHERFLEET_REQUIRE_NETNS=1 \
  CIPHERFLEET_REQUIRE_VM=1 CIPHERFLEET_REQUIRE_PREVIOUS=1 \
  cargo test --workspace --lib --bins --tests 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line over every test binary (cargo prints one `test result:` per binary).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
