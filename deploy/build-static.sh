#!/usr/bin/env bash
# Static musl builds of both agent flavours for x86-64 and ARM64, linked with rust-lld, in the
# release profile that measures (thin LTO, one codegen unit: see the root Cargo.toml), copied
# stripped to dist/<triple>/{cipherfleet-agent,cipherfleet-agent-soft} (far smaller: docs/performance.md,
# "Scripts: time and disk"; the target dir's <triple>/release/ keeps the unstripped ones, with symbols for perf).
# --coordinator also builds the coordinator statically into dist/<triple>/cipherfleet-coordinator,
# for the FROM-scratch container image (deploy/build-images.sh) and the quickstart; it needs an
# external PostgreSQL (--database-url) in the image, which holds no PostgreSQL binaries for a
# private cluster. It shares the agent's profile, and so the agent's compiled dependencies: a
# profile of its own (16 codegen units, no LTO) built slower from nothing (deploy/bench-build.sh).
# --no-soft leaves the software flavour out (the quickstart's ARM64 host runs the accelerated one).
# Each build prints a line when it starts and its time when done.
# Needs: rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl, clang +
# llvm-ar for ring's C and assembly, llvm-strip (deploy/install-deps.sh installs them).
#
# Usage: deploy/build-static.sh [--coordinator] [--no-soft] [TRIPLE…]   (default: both triples)
set -euo pipefail
cd "$(dirname "$0")/.."

coordinator=false soft=true
triples=()
for arg in "$@"; do
  case "$arg" in
    --coordinator) coordinator=true ;;
    --no-soft) soft=false ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "build-static.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    *) triples+=("$arg") ;;
  esac
done
[ ${#triples[@]} -gt 0 ] || triples=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)

installed=$(rustup target list --installed 2>/dev/null || true)
for t in "${triples[@]}"; do
  if ! grep -qx "$t" <<<"$installed"; then
    echo "adding Rust target $t"
    rustup target add "$t"
  fi
done

# rust-lld ships with the toolchain and links without a musl C toolchain.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static"

# ring (the TLS crypto under rustls) compiles C and assembly through the cc crate, which
# would look for aarch64-linux-musl-gcc. Debian's clang targets both triples without a musl
# sysroot (ring passes -nostdlibinc for ARM64 musl); llvm-ar archives objects of either arch.
for tool in clang llvm-ar llvm-strip; do
  command -v "$tool" >/dev/null || { echo "build-static: $tool is missing: run deploy/install-deps.sh" >&2; exit 1; }
done
for arch in x86_64 aarch64; do
  export "CC_${arch}_unknown_linux_musl=clang" "AR_${arch}_unknown_linux_musl=llvm-ar" \
    "CFLAGS_${arch}_unknown_linux_musl=--target=$arch-linux-musl"
done

# timed WHAT CMD…: runs CMD, with a line before and its time after (a first build takes minutes).
timed() {
  local what=$1 t0
  shift
  t0=$(date +%s)
  echo "build-static: building $what…"
  "$@"
  echo "build-static: $what built in $(($(date +%s) - t0)) s"
}

# Cargo's outputs, where CARGO_TARGET_DIR puts them.
out=${CARGO_TARGET_DIR:-target}
for t in "${triples[@]}"; do
  mkdir -p "dist/$t"
  if $soft; then
    timed "both agent flavours for $t" deploy/build.sh --release --target "$t"
    bins=(cipherfleet-agent cipherfleet-agent-soft)
  else
    timed "the agent for $t" cargo build --release --target "$t" -p cipherfleet-agent --bin cipherfleet-agent
    bins=(cipherfleet-agent)
  fi
  for bin in "${bins[@]}"; do
    # llvm-strip reads both architectures; the shipped binaries need no symbols or line tables.
    llvm-strip -o "dist/$t/$bin" "$out/$t/release/$bin"
  done
  if $coordinator; then
    timed "the coordinator for $t" \
      cargo build --release --target "$t" -p cipherfleet-coordinator --bin cipherfleet-coordinator
    llvm-strip -o "dist/$t/cipherfleet-coordinator" "$out/$t/release/cipherfleet-coordinator"
  fi
  echo "dist/$t: $(cd "dist/$t" && ls -s --block-size=M | tail -n +2 | tr '\n' ' ')"
done
