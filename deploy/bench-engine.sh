#!/usr/bin/env bash
# Benchmarks the benchmark engine: the release agent against a reference loop built as a
# crate of its own (deploy/reference-loop, thin LTO as a user's service would ship it), per
# cell engine MB/s, reference MB/s, their ratio, the CV over rounds and the target checked;
# then the other algorithm families and the accelerated/software ratio.
# Builds both agent flavours and the reference loop first (LTO: slow from cold), then
# measures; how long each takes: docs/performance.md, "The benchmarks". Exits 1 when a cell
# misses its target. Usage: deploy/bench-engine.sh
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/build.sh --release
cargo build --release --locked --manifest-path deploy/reference-loop/Cargo.toml --target-dir target/reference-loop

# The comparison means something only if the reference loop runs crate versions the agent
# runs too (the root lock may hold more than one version of a crate, e.g. sha2).
versions() { # lock file → "name version" of the crypto crates
  awk '/^name = /{n=$3} /^version = /{print n, $3}' "$1" | tr -d '"' |
    grep -E '^(aes|aes-gcm|chacha20|chacha20poly1305|poly1305|ghash|polyval|cbc|ctr|ccm|ocb3|des|hmac|sha2|cipher|aead) ' | sort -u
}
differ=$(comm -13 <(versions Cargo.lock) <(versions deploy/reference-loop/Cargo.lock))
if [ -n "$differ" ]; then
  echo "bench-engine: the reference loop builds crypto crates the agent does not:" >&2
  echo "$differ" >&2
  echo "copy Cargo.lock to deploy/reference-loop/ and build it once to re-pin them" >&2
  exit 1
fi

cargo bench -p cipherfleet-agent --bench engine
