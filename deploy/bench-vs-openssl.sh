#!/usr/bin/env bash
# cipherfleet-agent bench against `openssl speed`, alternating, on this machine: per
# algorithm and size, openssl's MB/s, the agent's own (engine) figure and its
# `--openssl-compat` figure, each with its ratio to openssl; printed as a Markdown table
# with the date and the machine (docs/performance.md, "Against openssl speed").
#
#   openssl speed -elapsed -seconds S -bytes N -evp ALG   (plus -aead for AEADs)
#   cipherfleet-agent bench -a ALG --size N --seconds S [--openssl-compat]
#
# -elapsed: openssl otherwise divides by the CPU time of its process (user time), which
# reads high on a busy or throttled machine; the agent divides by wall time, so both do.
# This compares harnesses (the engine's, its openssl-compat shape, openssl speed's) with the
# agent run locally, and stores nothing. The agent's `openssl` provider beside rustcrypto and
# ring, measured by a campaign and stored by a coordinator (read back from /providers), is
# deploy/bench-providers.sh.
# Builds the release agent first if needed. How long a run takes: docs/performance.md,
# "The benchmarks".
# Usage: deploy/bench-vs-openssl.sh [ROUNDS (default 3)] [SECONDS (whole, default 1)]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
seconds=${2:-1}
algorithms=(aes-128-gcm aes-256-gcm chacha20-poly1305 aes-128-cbc aes-256-ctr)
sizes=(16 1024 16384)
agent=target/release/cipherfleet-agent

cargo build --release -p cipherfleet-agent --bin cipherfleet-agent >&2
command -v openssl >/dev/null || { echo "bench-vs-openssl: openssl is missing" >&2; exit 1; }

model=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
codegen=$("$agent" probe --format json | python3 -c '
import json, sys
c = json.load(sys.stdin)["build"].get("codegen") or {}
print("%s, LTO %s, %s codegen unit(s)" % (c.get("profile"), c.get("lto"), c.get("codegen_units")))')
results=$(mktemp)
trap 'rm -f "$results"' EXIT

openssl_mb_s() { # alg size → MB/s (-mr prints bytes per second in its +F line)
  local aead=()
  case "$1" in *gcm|*ccm|*ocb|chacha20-poly1305) aead=(-aead) ;; esac
  openssl speed -mr -elapsed -seconds "$seconds" -bytes "$2" "${aead[@]}" -evp "$1" 2>/dev/null |
    awk -F: '/^\+F:/ { printf "%.3f\n", $NF / 1e6 }'
}
agent_mb_s() { # alg size [--openssl-compat] → MB/s
  "$agent" bench -a "$1" --size "$2" --seconds "$seconds" --format json "${@:3}" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["throughput_mb_s"])'
}

for ((r = 0; r < rounds; r++)); do
  for alg in "${algorithms[@]}"; do
    for size in "${sizes[@]}"; do
      # The three harnesses take turns going first, so drift does not favour one.
      order=(openssl engine compat)
      for ((i = 0; i < r % 3; i++)); do order=("${order[@]:1}" "${order[0]}"); done
      for kind in "${order[@]}"; do
        case $kind in
          openssl) v=$(openssl_mb_s "$alg" "$size") ;;
          engine) v=$(agent_mb_s "$alg" "$size") ;;
          compat) v=$(agent_mb_s "$alg" "$size" --openssl-compat) ;;
        esac
        echo "$alg $size $kind $v" >>"$results"
        printf '\r\033[Kround %d/%d: %s %s %s %s' $((r + 1)) "$rounds" "$alg" "$size" "$kind" "$v" >&2
      done
    done
  done
done
printf '\r\033[K' >&2

echo "$(date -u +%Y-%m-%d), $(nproc) CPUs ($model), $(openssl version | cut -d' ' -f1-2)," \
  "cipherfleet-agent $("$agent" --version | cut -d' ' -f2) ($codegen); $rounds alternating rounds of ${seconds} s, medians"
echo
python3 - "$results" "${algorithms[*]}" "${sizes[*]}" <<'EOF'
import statistics, sys
path, algorithms, sizes = sys.argv[1], sys.argv[2].split(), [int(s) for s in sys.argv[3].split()]
runs = {}
for line in open(path):
    alg, size, kind, value = line.split()
    runs.setdefault((alg, int(size), kind), []).append(float(value))
def med(alg, size, kind):
    return statistics.median(runs[(alg, size, kind)])
def cv(alg, size, kind):
    v = runs[(alg, size, kind)]
    return statistics.stdev(v) / statistics.mean(v) * 100 if len(v) > 1 else 0.0
print("| algorithm | size | openssl MB/s | agent MB/s | agent / openssl | agent --openssl-compat MB/s | compat / openssl | largest CV |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for alg in algorithms:
    for size in sizes:
        o, e, c = (med(alg, size, k) for k in ("openssl", "engine", "compat"))
        spread = max(cv(alg, size, k) for k in ("openssl", "engine", "compat"))
        label = f"{size // 1024} KiB" if size >= 1024 else f"{size} B"
        print(f"| {alg} | {label} | {o:,.1f} | {e:,.1f} | {e / o:.2f} | {c:,.1f} | {c / o:.2f} | {spread:.0f} % |")
EOF
