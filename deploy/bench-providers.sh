#!/usr/bin/env bash
# The providers side by side on this machine, stored by the product itself: a coordinator with its
# private PostgreSQL in a data directory of its own and one local agent (as `deploy/quickstart.sh
# --no-fleet` starts them), one campaign measuring the agent's rustcrypto (the crates built in), ring
# (built in) and openssl (the host's `openssl speed`, driven by the agent) for AES-256-GCM and
# ChaCha20-Poly1305 at 16 B and 16 KiB on both paths (ring: accelerated only, it has no software
# build), then the figures read back from the coordinator (`/api/v1/providers`, the JSON behind
# `/providers`) and printed as Markdown tables with the date, the machine and the command, beside
# `openssl speed` run directly (docs/performance.md, "Providers side by side").
#
#   cipherfleet-coordinator campaign start --matrix '{…"paths":["accelerated","software"],
#       "providers":["rustcrypto","ring","openssl"],"seconds":S}'
#   openssl speed -elapsed -mr -seconds 1 -bytes N -aead -evp ALG   (max(3, S) runs, median)
#
# The agent's rustcrypto and ring measure the engine's shape (a fresh nonce per sealed message, one
# key); openssl speed's is its own (GCM re-keyed per message with -aead, ChaCha20-Poly1305 one
# stream: docs/measurement.md, "Against openssl speed"). The agent's openssl figure is `openssl
# speed` too, run max(3, S) times by the agent: it should match the direct column (run right after
# the campaign, the same number of one-second runs), which checks that the agent drives it
# faithfully. Progress goes to stderr; a failed or skipped point fails the run, with its reason.
# Uses the release binaries in dist/<triple>/ and builds them (deploy/build-static.sh --coordinator)
# when they are missing or predate providers. Needs no root (as root, PostgreSQL runs as the user
# cipherfleet-pg). How long a run takes: docs/performance.md, "The benchmarks".
#
# Usage: deploy/bench-providers.sh [--seconds S] [--keep] [--data-dir DIR] [--http-listen ADDR] [--no-build | --build]
#        deploy/bench-providers.sh --stop --data-dir DIR
#   --seconds S       seconds measured per point (default 3; openssl's points run max(3, S) one-second
#                     runs). There are no rounds any more: one campaign, one figure per point (the
#                     agent's median of its samples), as the fleet stores it
#   --keep            leave the coordinator and the agent running at the end and print the report's
#                     URL (/providers) and how to stop them (--stop)
#   --data-dir DIR    tokens, TLS, PostgreSQL, logs (default: a new temporary directory, removed at
#                     the end unless --keep; a DIR given here is kept, and a later run adds its campaign)
#   --http-listen A   the report's address (default 127.0.0.1:0, any free port)
#   --no-build        never build: fail if dist/ lacks fitting binaries
#   --build           build dist/ first even if its binaries look current
#   --stop            stop what a --keep run left running on DIR, check each process is gone, and
#                     remove DIR if this script made it
# Without --keep, everything it started is stopped at the end, on failure and on Ctrl-C (SIGINT,
# SIGTERM, SIGHUP), and checked gone.
set -euo pipefail

# A shell without job control starts its background commands with SIGINT ignored, and bash cannot
# trap a signal that was ignored when it started (deploy/quickstart.sh does the same).
if [ "${CIPHERFLEET_BENCH_PROVIDERS_SIGNALS:-}" != default ]; then
  exec env --default-signal=INT,TERM,HUP CIPHERFLEET_BENCH_PROVIDERS_SIGNALS=default "$BASH" "$0" "$@"
fi
unset CIPHERFLEET_BENCH_PROVIDERS_SIGNALS

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "bench-providers: $*" >&2; exit 2; }
fail() { echo "bench-providers: $*" >&2; exit 1; }
note() { echo "bench-providers: $*" >&2; }

seconds=3 keep=false stop=false build=auto http_listen=127.0.0.1:0 data=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=true ;;
    --stop) stop=true ;;
    --no-build) build=never ;;
    --build) build=always ;;
    --seconds|--data-dir|--http-listen)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --seconds) seconds=$2 ;;
        --data-dir) data=$2 ;;
        --http-listen) http_listen=$2 ;;
      esac
      shift ;;
    -h|--help) usage; exit 0 ;;
    [0-9]*) die "'$1': ROUNDS and SECONDS are no longer positional (one campaign, no rounds): use --seconds S (see --help)" ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ] || [ "$seconds" -gt 60 ]; then
  die "--seconds takes whole seconds from 1 to 60, not '$seconds'"
fi

algorithms=(aes-256-gcm chacha20-poly1305)
sizes=(16 16384)
providers=(rustcrypto ring openssl)
triple=$(uname -m)-unknown-linux-musl
dist=$repo/dist/$triple
coordinator_bin=$dist/cipherfleet-coordinator
agent_bin=$dist/cipherfleet-agent
marker=.bench-providers-temporary # in a data directory this script made (and may remove)

# ---- stopping: at the end, on failure, on a signal, and --stop ----
alive() { # PID NAME: the process runs and is NAME (a reused PID is another program)
  local cmdline
  [[ $1 =~ ^[0-9]+$ ]] && cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") && [[ $cmdline == *"$2"* ]]
}
stop_pid() { # FILE NAME SECONDS: SIGTERM to the recorded process, SIGKILL after SECONDS
  local file=$1 name=$2 pid i
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  # Stopped just after its fork, the child may not have become NAME yet: a moment for that.
  for ((i = 0; i < 10; i++)); do
    alive "$pid" "$name" || ! kill -0 "$pid" 2>/dev/null || [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" != "$(realpath "$BASH")" ] && break
    sleep 0.2
  done
  if alive "$pid" "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < $3 * 5; i++)); do alive "$pid" "$name" || break; sleep 0.2; done
    if alive "$pid" "$name"; then
      note "$name (pid $pid) did not stop in $3 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
    fi
  fi
  rm -f "$file"
}
postgres_pid() { # the coordinator's PostgreSQL server, if one runs (its postmaster works in its data directory)
  local pid pgdata=$data/coordinator/postgres
  pid=$(head -n 1 "$pgdata/postmaster.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(realpath "$pgdata")" ] && echo "$pid"
}
stop_all() { # REMOVE: stops the agent, then the coordinator (which stops its PostgreSQL), checks all
  # are gone, then removes the data directory if this script made it and REMOVE is true
  local remove=$1 agent_pid coordinator_pid postgres pid i left=() gone=()
  agent_pid=$(cat "$data/pids/agent.pid" 2>/dev/null || true)
  coordinator_pid=$(cat "$data/pids/coordinator.pid" 2>/dev/null || true)
  postgres=$(postgres_pid || true)
  # The agent first (it finishes a running job within its --grace), then the coordinator: SIGTERM
  # makes it stop its private PostgreSQL before it exits.
  stop_pid "$data/pids/agent.pid" cipherfleet-agent 30
  stop_pid "$data/pids/coordinator.pid" cipherfleet-coordinator 60
  if pid=$(postgres_pid); then # a server its coordinator could not stop (SIGKILL): fast shutdown
    note "PostgreSQL (pid $pid) outlived its coordinator: stopping it"
    kill -INT "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do postgres_pid >/dev/null || break; sleep 0.2; done
  fi
  if [ -n "$agent_pid" ]; then
    gone+=("agent (pid $agent_pid)")
    ! alive "$agent_pid" cipherfleet-agent || left+=("agent (pid $agent_pid)")
  fi
  if [ -n "$coordinator_pid" ]; then
    gone+=("coordinator (pid $coordinator_pid)")
    ! alive "$coordinator_pid" cipherfleet-coordinator || left+=("coordinator (pid $coordinator_pid)")
  fi
  [ -z "$postgres" ] || gone+=("PostgreSQL (pid $postgres)")
  if pid=$(postgres_pid); then left+=("PostgreSQL (pid $pid)"); fi
  if [ ${#left[@]} -gt 0 ]; then
    note "still running: $(printf '%s; ' "${left[@]}" | sed 's/; $//') (data in $data)"
    return 1
  fi
  [ ${#gone[@]} -eq 0 ] || note "stopped and gone: $(printf '%s, ' "${gone[@]}" | sed 's/, $//')"
  if [ -f "$data/$marker" ] && $remove; then
    rm -rf "$data"
    note "removed the temporary data directory $data"
  elif [ -f "$data/$marker" ]; then
    note "kept the temporary data directory $data for its logs: rm -rf $data when done"
  else
    note "data kept in $data"
  fi
}

if $stop; then
  [ -n "$data" ] || die "--stop needs --data-dir DIR (the directory a --keep run printed)"
  [ -d "$data" ] || die "--stop: no directory $data"
  data=$(cd "$data" && pwd)
  stop_all true
  exit
fi

# ---- the binaries ----
fits() { # dist/ holds an agent and a coordinator that know providers
  [ -x "$coordinator_bin" ] && [ -x "$agent_bin" ] &&
    "$coordinator_bin" campaign start --help 2>/dev/null | grep -q '"providers"' &&
    "$agent_bin" bench --help 2>/dev/null | grep -q -- '--provider'
}
command -v openssl >/dev/null || fail "openssl is missing (the agent's openssl provider and the direct column run it)"
command -v python3 >/dev/null || fail "python3 is missing"
if [ "$build" = always ] || { [ "$build" = auto ] && ! fits; }; then
  [ "$build" = always ] || note "dist/$triple lacks an agent and coordinator that know providers: building them"
  command -v cargo >/dev/null || fail "cargo is missing, and dist/$triple has no fitting binaries"
  t0=$(date +%s)
  deploy/build-static.sh --coordinator "$triple" >&2
  note "built in $(($(date +%s) - t0)) s"
fi
fits || fail "dist/$triple lacks cipherfleet-agent and cipherfleet-coordinator that know providers (run without --no-build, or deploy/build-static.sh --coordinator $triple)"

# ---- the data directory ----
if [ -z "$data" ]; then
  data=$(mktemp -d "${TMPDIR:-/tmp}/cipherfleet-bench-providers.XXXXXX")
  : >"$data/$marker"
else
  mkdir -p "$data"
  data=$(cd "$data" && pwd)
fi
# Run as root, the coordinator's PostgreSQL runs as cipherfleet-pg and must reach its directory.
chmod 0755 "$data"
pids=$data/pids tokens=$data/tokens
if [ -f "$pids/coordinator.pid" ] && alive "$(cat "$pids/coordinator.pid")" cipherfleet-coordinator; then
  die "a coordinator already runs on $data (pid $(cat "$pids/coordinator.pid")): deploy/bench-providers.sh --stop --data-dir $data first"
fi
mkdir -p "$pids" "$tokens" "$data/agent"
chmod 0700 "$tokens" "$data/agent"

started=false leave_running=false campaign="" sleeper=""
cleanup() {
  local status=$?
  trap '' INT TERM HUP PIPE
  set +e
  [ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null
  if $started && ! $leave_running; then
    # A campaign cut short: its running jobs aborted, so the agent stops at once.
    if [ -n "$campaign" ] && [ "$status" -ne 0 ]; then
      timeout 10 "$coordinator_bin" campaign cancel "$campaign" --reason "bench-providers.sh stopped" \
        "${admin[@]}" >/dev/null 2>&1
    fi
    note "stopping what it started"
    # After a failure (not a signal) the logs are worth reading: a temporary directory stays.
    if [ "$status" -eq 0 ] || [ "$status" -ge 128 ]; then stop_all true || status=1; else stop_all false || status=1; fi
  elif ! $started && [ -f "$data/$marker" ]; then
    rm -rf "$data"
  fi
  exit "$status"
}
on_signal() { # NAME STATUS
  trap '' INT TERM HUP PIPE
  echo >&2
  note "SIG$1"
  exit "$2"
}
trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP
pause() { # SECONDS: a sleep a signal interrupts at once
  sleep "$1" &
  sleeper=$!
  wait "$sleeper" || true
  sleeper=""
}

for t in agent admin; do
  [ -s "$tokens/$t.token" ] || (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tokens/$t.token")
done
admin=(--admin-token-file "$tokens/admin.token")

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date -u +%s)

# ---- the coordinator and one local agent, as deploy/quickstart.sh --no-fleet starts them ----
note "starting the coordinator (private PostgreSQL in $data/coordinator; log $data/coordinator.log)"
log=$data/coordinator.log
# Emptied here, not by the child's redirection: the loop below must not read an earlier run's addresses.
: >"$log"
started=true
# In a session of their own: a Ctrl-C reaches the script, which stops them in order. Verification on
# change is off: it would queue a verification campaign ahead of this one.
setsid "$coordinator_bin" serve --grpc-listen 127.0.0.1:0 --http-listen "$http_listen" \
  --data-dir "$data/coordinator" --self-signed "$data/tls" --tls-name 127.0.0.1 \
  --agent-token-file "$tokens/agent.token" --admin-token-file "$tokens/admin.token" \
  --verify-on-change=false </dev/null >"$log" 2>&1 &
echo $! >"$pids/coordinator.pid"
for ((i = 0; i < 1800; i++)); do
  grep -qs '^grpc=' "$log" && break
  # kill -0, not alive: just after the fork the child may not be the coordinator yet.
  kill -0 "$(cat "$pids/coordinator.pid")" 2>/dev/null ||
    { tail -n 20 "$log" >&2; fail "the coordinator did not start (log: $log)"; }
  pause 0.1
done
grep -qs '^grpc=' "$log" || fail "the coordinator did not print its addresses within 3 minutes (log: $log)"
grpc=$(sed -n 's/^grpc=\([^ ]*\) .*/\1/p' "$log" | head -n 1)
http=$(sed -n 's/^grpc=[^ ]* http=\([^ ]*\).*/\1/p' "$log" | head -n 1)
export CIPHERFLEET_COORDINATOR=https://$grpc CIPHERFLEET_CA_CERT=$data/tls/ca.pem

note "starting one local agent (log $data/agent.log)"
setsid "$agent_bin" run --coordinator "$CIPHERFLEET_COORDINATOR" --ca-cert "$CIPHERFLEET_CA_CERT" \
  --token-file "$tokens/agent.token" --label bench=providers --state-dir "$data/agent/state" \
  --spool-dir "$data/agent/spool" --grace 5 </dev/null >"$data/agent.log" 2>&1 &
echo $! >"$pids/agent.pid"
host=""
for ((i = 0; i < 120; i++)); do
  kill -0 "$(cat "$pids/agent.pid")" 2>/dev/null ||
    { tail -n 20 "$data/agent.log" >&2; fail "the agent exited (log: $data/agent.log)"; }
  host=$("$coordinator_bin" hosts --format json "${admin[@]}" 2>/dev/null | python3 -c '
import json, sys
print(next((h["name"] for h in json.load(sys.stdin) if h["online"] and h["labels"].get("bench") == "providers"), ""))' 2>/dev/null || true)
  [ -z "$host" ] || break
  pause 1
done
[ -n "$host" ] || fail "the agent did not come online in 2 minutes (log: $data/agent.log)"
note "agent online as $host"

# ---- one campaign ----
matrix=$(python3 - "$seconds" "${algorithms[*]}" "${sizes[*]}" "${providers[*]}" <<'PY'
import json, sys
seconds, algorithms, sizes, providers = sys.argv[1:]
print(json.dumps({
    "algorithms": algorithms.split(), "sizes": [int(s) for s in sizes.split()],
    "directions": ["encrypt"], "threads": [1], "key_modes": ["static"],
    "paths": ["accelerated", "software"], "nonces": ["counter"],
    "providers": providers.split(), "seconds": float(seconds)}))
PY
)
started_json=$("$coordinator_bin" campaign start --matrix "$matrix" --select "host=$host" \
  --name "bench-providers --seconds $seconds" --format json "${admin[@]}")
campaign=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["campaign_id"])' "$started_json")
jobs=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["jobs_created"])' "$started_json")
note "campaign $campaign: $jobs points on $host; progress at http://$http/campaigns/$campaign"
t0=$(date +%s)
tty=false
[ -t 2 ] && tty=true
last="" status=""
while :; do
  if ! status=$("$coordinator_bin" campaign status "$campaign" --format json "${admin[@]}" 2>/dev/null); then
    alive "$(cat "$pids/coordinator.pid")" cipherfleet-coordinator || fail "the coordinator exited (log: $log)"
    pause 2
    continue
  fi
  line=$(python3 - "$status" <<'PY'
import json, sys
s = json.loads(sys.argv[1]); o = s["overall"]
print(f"{s['state']}: {o['done']}/{sum(o.values())} points done, {o['running']} running, {o['failed']} failed")
PY
)
  if $tty; then
    printf '\r\033[Kcampaign %s %s, %d s' "$campaign" "$line" $(($(date +%s) - t0)) >&2
  elif [ "$line" != "$last" ]; then
    echo "campaign $campaign $line, $(($(date +%s) - t0)) s" >&2
  fi
  last=$line
  case $line in running:*) pause 2 ;; *) break ;; esac
done
! $tty || echo >&2
t_campaign=$(($(date +%s) - t0))
verdict=$(python3 - "$status" <<'PY'
import json, sys
s = json.loads(sys.argv[1]); o = s["overall"]
problems = [f"failed on {f['host_name']}: {f['error']}" for f in s["failures"]]
problems += [f"{k['points']} {k['provider']} {k['path']} point(s) skipped on {k['host_name']}: {k['reason']}"
             for k in s["skipped"]]
if s["state"] != "completed":
    problems.insert(0, f"the campaign ended {s['state']}")
if o["failed"] or o["cancelled"]:
    problems.insert(0, f"{o['failed']} point(s) failed, {o['cancelled']} cancelled")
if s["points_skipped"] and not s["skipped"]:
    problems.append(f"{s['points_skipped']} point(s) skipped")
print("\n".join(problems))
PY
)
if [ -n "$verdict" ]; then
  echo "bench-providers: campaign $campaign did not measure every point (http://$http/campaigns/$campaign):" >&2
  while IFS= read -r problem; do echo "  $problem" >&2; done <<<"$verdict"
  exit 1
fi
note "campaign $campaign completed in $t_campaign s"

# ---- openssl speed run directly, as many one-second runs as the agent's openssl provider ----
runs=$((seconds > 3 ? seconds : 3))
direct=$data/direct.txt
: >"$direct"
for alg in "${algorithms[@]}"; do
  for size in "${sizes[@]}"; do
    aead=()
    case "$alg" in *gcm|*ccm|*ocb|chacha20-poly1305) aead=(-aead) ;; esac
    for ((i = 0; i < runs; i++)); do
      ! $tty || printf '\r\033[Kopenssl speed %s %s: run %d/%d' "$alg" "$size" $((i + 1)) "$runs" >&2
      v=$(openssl speed -mr -elapsed -seconds 1 -bytes "$size" "${aead[@]}" -evp "$alg" 2>/dev/null |
        awk -F: '/^\+F:/ { printf "%.3f\n", $NF / 1e6 }')
      [ -n "$v" ] || fail "openssl speed -evp $alg -bytes $size printed no figure"
      echo "$alg $size $v" >>"$direct"
    done
  done
done
if $tty; then printf '\r\033[K' >&2; else note "openssl speed run directly: $runs one-second runs per cell"; fi

# ---- the stored figures, read back from the coordinator ----
stored=""
for ((i = 0; i < 30; i++)); do
  stored=$(curl -fsS "http://$http/api/v1/providers" 2>/dev/null) &&
    python3 - "$stored" "${algorithms[*]}" "${sizes[*]}" "${providers[*]}" <<'PY' && break
import json, sys
rows, algorithms, sizes, providers = json.loads(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
have = {(r["algorithm"], str(r["size_bytes"]), r["provider"]) for r in rows if r["accelerated_mb_s"] is not None}
sys.exit(0 if all((a, s, p) in have for a in algorithms for s in sizes for p in providers) else 1)
PY
  stored=""
  pause 2
done
[ -n "$stored" ] || fail "http://$http/api/v1/providers did not show every stored point within a minute"
t_end=$(date -u +%s)

model=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
codegen=$("$agent_bin" probe --format json | python3 -c '
import json, sys
c = json.load(sys.stdin)["build"].get("codegen") or {}
print("%s, LTO %s, %s codegen unit(s)" % (c.get("profile"), c.get("lto"), c.get("codegen_units")))')
command_line="deploy/bench-providers.sh --seconds $seconds"
echo "$(date -u -d "@$t_start" '+%Y-%m-%d %H:%M')–$(date -u -d "@$t_end" '+%H:%M UTC'), $(nproc) CPUs ($model)," \
  "load average $load_start at the start and $(cut -d' ' -f1-3 /proc/loadavg) at the end," \
  "$(openssl version | cut -d' ' -f1-2), cipherfleet-agent $("$agent_bin" --version | cut -d' ' -f2) ($codegen)," \
  "cipherfleet-coordinator $("$coordinator_bin" --version | cut -d' ' -f2);" \
  "\`$command_line\`: campaign $campaign, one point of ${seconds} s per cell (openssl: $runs one-second runs, median)," \
  "then \`openssl speed\` run directly, $runs one-second runs, median; $t_campaign s of campaign"
echo
python3 - "$stored" "$direct" "${algorithms[*]}" "${sizes[*]}" <<'PY'
import json, statistics, sys
rows, path, algorithms, sizes = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3].split(), [int(s) for s in sys.argv[4].split()]
fig = {(r["algorithm"], r["size_bytes"], r["provider"]): r for r in rows}
runs = {}
for line in open(path):
    a, s, v = line.split()
    runs.setdefault((a, int(s)), []).append(float(v))
def label(a, s):
    return f"{a} {s // 1024} KiB" if s >= 1024 else f"{a} {s} B"
def ran(r, path, asked):
    used = r.get(f"{path}_path_used")
    return f" (ran {used})" if used and used != asked else ""
def mb(r, path):
    v = r and r.get(f"{path}_mb_s")
    return f"{v:,.1f}{ran(r, path, path)}" if v is not None else "–"
print("Accelerated path (stored), beside `openssl speed` run directly, MB/s:")
print()
print("| cell | rustcrypto | ring | ring / rustcrypto | agent's openssl | openssl speed (direct) | agent's openssl / direct |")
print("|---|---:|---:|---:|---:|---:|---:|")
for a in algorithms:
    for s in sizes:
        rc, ring, ossl = (fig.get((a, s, p)) for p in ("rustcrypto", "ring", "openssl"))
        direct = statistics.median(runs[(a, s)])
        print(f"| {label(a, s)} | {mb(rc, 'accelerated')} | {mb(ring, 'accelerated')} | "
              f"{ring['accelerated_mb_s'] / rc['accelerated_mb_s']:.2f} | {mb(ossl, 'accelerated')} | "
              f"{direct:,.1f} | {ossl['accelerated_mb_s'] / direct:.2f} |")
print()
print("Software path (stored; ring has no software build), MB/s, and what the fallback costs (accelerated ÷ software):")
print()
print("| cell | rustcrypto software | rustcrypto fallback costs | openssl software | openssl fallback costs |")
print("|---|---:|---:|---:|---:|")
for a in algorithms:
    for s in sizes:
        rc, ossl = fig.get((a, s, "rustcrypto")), fig.get((a, s, "openssl"))
        cost = lambda r: f"{r['fallback_cost']:.1f}×" if r and r.get("fallback_cost") else "–"
        print(f"| {label(a, s)} | {mb(rc, 'software')} | {cost(rc)} | {mb(ossl, 'software')} | {cost(ossl)} |")
PY
echo
class=$(python3 -c 'import json, sys; print(", ".join(sorted({r["class"] for r in json.loads(sys.argv[1])})))' "$stored")
echo "Stored by the coordinator as campaign $campaign, in its PostgreSQL under $data/coordinator," \
  "machine class \"$class\":" \
  "the same figures on http://$http/providers (JSON: /api/v1/providers), the campaign on" \
  "http://$http/campaigns/$campaign."
if ! $keep && [ -f "$data/$marker" ]; then
  echo "The directory is temporary and goes when the script ends: --keep leaves the coordinator serving" \
    "these pages, --data-dir DIR keeps the database for later runs to add to."
fi

if $keep; then
  leave_running=true
  echo
  echo "Left running (--keep): the report at http://$http/providers; coordinator pid $(cat "$pids/coordinator.pid")," \
    "agent pid $(cat "$pids/agent.pid"), data in $data."
  echo "Stop both (and remove the temporary directory) with: deploy/bench-providers.sh --stop --data-dir $data"
fi
