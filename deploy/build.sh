#!/usr/bin/env bash
# Builds both agent flavours and puts the software sibling next to the accelerated one:
#   target/<profile>/cipherfleet-agent       run-time detection (AES-NI, ARMv8 AES, CLMUL, AVX2…)
#   target/<profile>/cipherfleet-agent-soft  every crypto crate forced to its portable software backend
# and, for the tests, the simulator target/debug/cipherfleet-sim (debug builds without --target
# only: it ships to no host, and deploy/bench-scale.sh builds its own release one); all three
# under $CARGO_TARGET_DIR instead of target/ when it is set.
# The RustCrypto crates can only be forced to software at build time, hence two builds.
# The software build has its own target dir (target-soft/) so the two never invalidate each other.
# --release is the profile that measures (thin LTO, one codegen unit; root Cargo.toml); it builds
# slowest (times: docs/performance.md, "Scripts: time and disk").
#
# Usage: deploy/build.sh [--release] [--target TRIPLE]
#        deploy/build.sh --soft-rustflags   prints the software build's flags, for RUSTFLAGS
set -euo pipefail
cd "$(dirname "$0")/.."

# The one list of flags that force every crypto crate to its portable software
# backend, plus the agent's own marker. deploy/test.sh reads it through
# --soft-rustflags; Cargo.toml's check-cfg list must declare each flag, and a
# build with cipherfleet_soft but a crate flag missing does not compile
# (agent/src/backend.rs); an agent test checks both against this list.
SOFT_CFG=(
  'aes_backend="soft"'
  'polyval_backend="soft"'
  'chacha20_backend="soft"'
  'poly1305_backend="soft"'
  'sha2_backend="soft"'
  'cipherfleet_soft'
)
soft_rustflags() { printf -- '--cfg %s ' "${SOFT_CFG[@]}" | sed 's/ $//'; }

profile=debug
cargo_args=()
target=""
while [ $# -gt 0 ]; do
  case "$1" in
    --release) profile=release; cargo_args+=(--release) ;;
    --target) target="$2"; cargo_args+=(--target "$2"); shift ;;
    --soft-rustflags) soft_rustflags; echo; exit 0 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# Cargo's outputs, where CARGO_TARGET_DIR puts them (the tests look beside their own binary).
out=${CARGO_TARGET_DIR:-target}/${target:+$target/}$profile
soft_out=target-soft/${target:+$target/}$profile

cargo build "${cargo_args[@]}" -p cipherfleet-agent --bin cipherfleet-agent
# RUSTFLAGS replaces any configured flags; keep the target's static-linking flags for musl.
RUSTFLAGS="${RUSTFLAGS:-} $(soft_rustflags)" CARGO_TARGET_DIR=target-soft \
  cargo build "${cargo_args[@]}" -p cipherfleet-agent --bin cipherfleet-agent
cp "$soft_out/cipherfleet-agent" "$out/cipherfleet-agent-soft"
if [ "$profile" = debug ] && [ -z "$target" ]; then
  cargo build -p cipherfleet-sim --bin cipherfleet-sim
  echo "built $out/cipherfleet-agent, $out/cipherfleet-agent-soft and $out/cipherfleet-sim"
else
  echo "built $out/cipherfleet-agent and $out/cipherfleet-agent-soft"
fi
