#!/usr/bin/env bash
# Static musl builds of both agent flavours for x86-64 and ARM64, linked with rust-lld,
# copied to dist/<triple>/{cipherfleet-agent,cipherfleet-agent-soft}.
# Needs: rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl,
# and clang + llvm-ar for ring's C and assembly (deploy/install-deps.sh installs them).
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

# rust-lld ships with the toolchain and links without a musl C toolchain.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static"

# ring (the TLS crypto under rustls) compiles C and assembly through the cc crate, which
# would look for aarch64-linux-musl-gcc. Debian's clang targets both triples without a musl
# sysroot (ring passes -nostdlibinc for ARM64 musl); llvm-ar archives objects of either arch.
for tool in clang llvm-ar; do
  command -v "$tool" >/dev/null || { echo "build-static: $tool is missing: run deploy/install-deps.sh" >&2; exit 1; }
done
for arch in x86_64 aarch64; do
  export "CC_${arch}_unknown_linux_musl=clang" "AR_${arch}_unknown_linux_musl=llvm-ar" \
    "CFLAGS_${arch}_unknown_linux_musl=--target=$arch-linux-musl"
done

for t in "${triples[@]}"; do
  deploy/build.sh --release --target "$t"
  mkdir -p "dist/$t"
  cp "target/$t/release/cipherfleet-agent" "target/$t/release/cipherfleet-agent-soft" "dist/$t/"
  echo "dist/$t: $(ls "dist/$t" | tr '\n' ' ')"
done
