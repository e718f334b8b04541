#!/usr/bin/env bash
# The quickstart's first build, timed from nothing (fresh CARGO_TARGET_DIRs under TMPDIR, removed
# afterwards), each build as deploy/build-static.sh runs it for the quickstart, and beside them
# the two the quickstart does not run:
#   - the ARM64 software sibling (before 2026-12-05 the quickstart built it; its ARM64 host
#     runs the accelerated agent alone);
#   - the coordinator in a profile of its own (16 codegen units, no LTO, defined here through
#     CARGO_PROFILE_FAST_* variables), the alternative to sharing the agent's release profile
#     and with it the agent's compiled dependencies.
# Prints each build's time, the load average when it ended, and the totals. Crates are fetched
# first and not counted. Needs what deploy/build-static.sh needs; takes about as long as a first
# build and a half (docs/performance.md, "Building and the quickstart").
#
# Usage: deploy/bench-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  "") ;;
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  *) echo "bench-build: no arguments (see --help)" >&2; exit 2 ;;
esac

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
for arch in x86_64 aarch64; do
  export "CC_${arch}_unknown_linux_musl=clang" "AR_${arch}_unknown_linux_musl=llvm-ar" \
    "CFLAGS_${arch}_unknown_linux_musl=--target=$arch-linux-musl"
done
static="-C target-feature=+crt-static"
soft="$(deploy/build.sh --soft-rustflags)"
x86=x86_64-unknown-linux-musl arm=aarch64-unknown-linux-musl
cargo fetch --quiet

scratch=$(mktemp -d "${TMPDIR:-/tmp}/cipherfleet-bench-build.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

rows=()
# build KIND WHAT DIR FLAGS CARGO-ARGS…: one cargo build in $scratch/DIR; its time joins the table
# (KIND: quickstart, before or alternative).
build() {
  local ways=$1 what=$2 dir="$scratch/$3" flags=$4 t0 secs
  shift 4
  echo "bench-build: $what…"
  t0=$(date +%s)
  RUSTFLAGS="$static $flags" CARGO_TARGET_DIR="$dir" cargo build --quiet "$@"
  secs=$(($(date +%s) - t0))
  echo "bench-build: $what: ${secs} s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  rows+=("$ways|$what|$secs")
}

agent=(-p cipherfleet-agent --bin cipherfleet-agent --release)
coordinator=(-p cipherfleet-coordinator --bin cipherfleet-coordinator --target "$x86")
export CARGO_PROFILE_FAST_INHERITS=release CARGO_PROFILE_FAST_LTO=false CARGO_PROFILE_FAST_CODEGEN_UNITS=16
build quickstart "agent $x86" main "" "${agent[@]}" --target "$x86"
build quickstart "coordinator $x86 (release profile, after the agent)" main "" "${coordinator[@]}" --release
build alternative "coordinator $x86 (its own profile)" main "" "${coordinator[@]}" --profile fast
build quickstart "agent-soft $x86" soft "$soft" "${agent[@]}" --target "$x86"
build quickstart "agent $arm" main "" "${agent[@]}" --target "$arm"
build before "agent-soft $arm" soft "$soft" "${agent[@]}" --target "$arm"

echo
echo "| build | seconds | the quickstart builds it |"
echo "|---|---:|---|"
now=0 before=0
for r in "${rows[@]}"; do
  IFS='|' read -r ways what secs <<<"$r"
  case "$ways" in
    quickstart) now=$((now + secs)); before=$((before + secs)); built=yes ;;
    before) before=$((before + secs)); built="no (it did before)" ;;
    *) built=no ;;
  esac
  echo "| $what | $secs | $built |"
done
echo "| all the quickstart builds | $now | |"
echo "| all it built before | $before | |"
