#!/usr/bin/env bash
# Static musl builds of both agent flavours for x86-64 and ARM64, linked with rust-lld,
# copied to dist/<triple>/{cipherfleet-agent,cipherfleet-agent-soft}.
# Needs: rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl
#
# Usage: deploy/build-static.sh [TRIPLE…]   (default: both triples)
set -euo pipefail
cd "$(dirname "$0")/.."

triples=("$@")
[ ${#triples[@]} -gt 0 ] || triples=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)

installed=$(rustup target list --installed 2>/dev/null || true)
for t in "${triples[@]}"; do
  if ! grep -qx "$t" <<<"$installed"; then
    echo "adding Rust target $t"
    rustup target add "$t"
  fi
done

# rust-lld ships with the toolchain; static musl binaries need no C toolchain for this crate.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static"

for t in "${triples[@]}"; do
  deploy/build.sh --release --target "$t"
  mkdir -p "dist/$t"
  cp "target/$t/release/cipherfleet-agent" "target/$t/release/cipherfleet-agent-soft" "dist/$t/"
  echo "dist/$t: $(ls "dist/$t" | tr '\n' ' ')"
done
