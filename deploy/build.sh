#!/usr/bin/env bash
# Builds both agent flavours and puts the software sibling next to the accelerated one:
#   target/<profile>/cipherfleet-agent       run-time detection (AES-NI, ARMv8 AES, CLMUL, AVX2…)
#   target/<profile>/cipherfleet-agent-soft  every crypto crate forced to its portable software backend
# The RustCrypto crates can only be forced to software at build time, hence two builds.
# The software build has its own target dir (target-soft/) so the two never invalidate each other.
#
# Usage: deploy/build.sh [--release] [--target TRIPLE]
set -euo pipefail
cd "$(dirname "$0")/.."

profile=debug
cargo_args=()
target=""
while [ $# -gt 0 ]; do
  case "$1" in
    --release) profile=release; cargo_args+=(--release) ;;
    --target) target="$2"; cargo_args+=(--target "$2"); shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

SOFT_CFG='--cfg aes_backend="soft" --cfg polyval_backend="soft" --cfg chacha20_backend="soft" --cfg sha2_backend="soft" --cfg cipherfleet_soft'

out=target/${target:+$target/}$profile
soft_out=target-soft/${target:+$target/}$profile

cargo build "${cargo_args[@]}" -p cipherfleet-agent --bin cipherfleet-agent
# RUSTFLAGS replaces any configured flags; keep the target's static-linking flags for musl.
RUSTFLAGS="${RUSTFLAGS:-} $SOFT_CFG" CARGO_TARGET_DIR=target-soft \
  cargo build "${cargo_args[@]}" -p cipherfleet-agent --bin cipherfleet-agent
cp "$soft_out/cipherfleet-agent" "$out/cipherfleet-agent-soft"
echo "built $out/cipherfleet-agent and $out/cipherfleet-agent-soft"
