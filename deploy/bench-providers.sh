#!/usr/bin/env bash
# The providers side by side on this machine, in one run: the agent's rustcrypto (the crates
# built in), ring (built in) and openssl (the host's `openssl speed`, driven by the agent), and
# `openssl speed` run directly, for AES-256-GCM and ChaCha20-Poly1305 at 16 B and 16 KiB.
# Printed as a Markdown table with the date, the machine and the command
# (docs/performance.md, "Providers side by side").
#
#   cipherfleet-agent bench --provider P -a ALG --size N --seconds S --format json
#   openssl speed -elapsed -mr -seconds 1 -bytes N [-aead] -evp ALG
#
# The agent's rustcrypto and ring measure the engine's shape (a fresh nonce per sealed
# message, one key); openssl speed's is its own (GCM re-keyed per message with -aead,
# ChaCha20-Poly1305 one stream: docs/measurement.md, "Against openssl speed"). The agent's
# openssl column is `openssl speed` too, run max(3, S) times by the agent: it should match the
# direct column, which is the check that the agent drives it faithfully.
# Builds the release agent first if needed.
# Usage: deploy/bench-providers.sh [ROUNDS (default 3)] [SECONDS (whole, default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
seconds=${2:-3}
algorithms=(aes-256-gcm chacha20-poly1305)
sizes=(16 16384)
agent=target/release/cipherfleet-agent

cargo build --release -p cipherfleet-agent --bin cipherfleet-agent >&2
command -v openssl >/dev/null || { echo "bench-providers: openssl is missing" >&2; exit 1; }

model=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
results=$(mktemp)
trap 'rm -f "$results"' EXIT

direct_mb_s() { # alg size → MB/s, median of $seconds one-second runs
  local aead=()
  case "$1" in *gcm|chacha20-poly1305) aead=(-aead) ;; esac
  for ((i = 0; i < seconds; i++)); do
    openssl speed -mr -elapsed -seconds 1 -bytes "$2" "${aead[@]}" -evp "$1" 2>/dev/null |
      awk -F: '/^\+F:/ { printf "%.3f\n", $NF / 1e6 }'
  done | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
agent_mb_s() { # provider alg size → MB/s
  "$agent" bench --provider "$1" -a "$2" --size "$3" --seconds "$seconds" --format json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["throughput_mb_s"])'
}

kinds=(rustcrypto ring openssl direct)
for ((r = 0; r < rounds; r++)); do
  for alg in "${algorithms[@]}"; do
    for size in "${sizes[@]}"; do
      # The four take turns going first, so drift does not favour one.
      order=("${kinds[@]}")
      for ((i = 0; i < r % 4; i++)); do order=("${order[@]:1}" "${order[0]}"); done
      for kind in "${order[@]}"; do
        case $kind in
          direct) v=$(direct_mb_s "$alg" "$size") ;;
          *) v=$(agent_mb_s "$kind" "$alg" "$size") ;;
        esac
        echo "$alg $size $kind $v" >>"$results"
        printf '\r\033[Kround %d/%d: %s %s %s %s' $((r + 1)) "$rounds" "$alg" "$size" "$kind" "$v" >&2
      done
    done
  done
done
printf '\r\033[K' >&2

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($model), load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$(openssl version | cut -d' ' -f1-2), cipherfleet-agent $("$agent" --version | cut -d' ' -f2);" \
  "deploy/bench-providers.sh $rounds $seconds: $rounds alternating rounds of ${seconds} s, medians"
echo
python3 - "$results" "${algorithms[*]}" "${sizes[*]}" <<'PY'
import statistics, sys
path, algorithms, sizes = sys.argv[1], sys.argv[2].split(), [int(s) for s in sys.argv[3].split()]
runs = {}
for line in open(path):
    alg, size, kind, value = line.split()
    runs.setdefault((alg, int(size), kind), []).append(float(value))
med = lambda a, s, k: statistics.median(runs[(a, s, k)])
def cv(a, s, k):
    v = runs[(a, s, k)]
    return statistics.stdev(v) / statistics.mean(v) * 100 if len(v) > 1 else 0.0
print("| cell | rustcrypto MB/s | ring MB/s | ring / rustcrypto | agent's openssl MB/s | openssl speed MB/s | agent's openssl / direct | largest CV |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for a in algorithms:
    for s in sizes:
        rc, ring, ossl, direct = (med(a, s, k) for k in ("rustcrypto", "ring", "openssl", "direct"))
        spread = max(cv(a, s, k) for k in ("rustcrypto", "ring", "openssl", "direct"))
        label = f"{s // 1024} KiB" if s >= 1024 else f"{s} B"
        print(f"| {a} {label} | {rc:,.1f} | {ring:,.1f} | {ring / rc:.2f} | {ossl:,.1f} | {direct:,.1f} | {ossl / direct:.2f} | {spread:.0f} % |")
PY
