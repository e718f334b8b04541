#!/usr/bin/env bash
# The whole system on one machine, as root (the README's main command):
#   1. installs what is missing (deploy/install-deps.sh --quickstart: PostgreSQL, clang/llvm, the musl
#      targets, qemu-user-static unless --no-fleet, qemu-system and Debian's kernel unless --no-vm);
#   2. builds the release binaries (deploy/build-static.sh): both agent flavours and the coordinator for
#      x86-64, the static aarch64 agent for the ARM host;
#   3. makes the tokens and, through `serve --self-signed`, a private CA (TLS on), in DATA-DIR;
#   4. starts the coordinator with its private PostgreSQL under DATA-DIR (reused by later runs);
#   5. starts the emulated fleet (deploy/fleet.sh up) on a bridge: five process hosts and two VM hosts
#      booting Debian's kernel (--no-vm: the five alone); or with --no-fleet one local agent;
#   6. runs the `tour` campaign on every host with a progress display: quick's algorithms on both
#      paths everywhere, and on the real hosts the points every scenario view reads, so that every page
#      has its answer;
#   7. prints the report's URL and a summary (hosts, findings by reason), and stays up until Ctrl-C;
#   8. then stops everything it started, and checks that it is gone.
# Ctrl-C, SIGINT, SIGTERM and SIGHUP (its terminal closing) each stop everything it started, however it
# was started (also in the background of a script, where SIGINT starts out ignored).
# The emulated hosts measure at emulated speed (how long the tour takes: docs/performance.md,
# "Building and the quickstart"). Their figures are not performance; the report marks them and keeps
# them out of capacity and the scenario views.
#
# Usage: deploy/quickstart.sh [--no-fleet | --no-vm] [--keep] [--suite NAME] [--data-dir DIR] [--http-listen ADDR]
#        deploy/quickstart.sh --stop [--data-dir DIR]
#   --no-fleet        one local agent (this machine's own CPU) instead of the emulated fleet
#   --no-vm           the fleet without its VM hosts (x86-kernel-generic, x86-noxsave): no qemu-system,
#                     no kernel download, a faster start
#   --keep            once the campaign is done, leave everything running and print how to stop it (--stop)
#   --suite NAME      the campaign's suite instead of tour: e.g. quick (fewer points), standard
#   --data-dir DIR    tokens, CA, PostgreSQL, the fleet's run directory (/var/lib/cipherfleet-quickstart)
#   --http-listen A   the report's address (127.0.0.1:8080)
#   --no-build        use the binaries already in dist/ (skip steps 1 and 2)
#   --stop            stop what a --keep run left running, and check that each process is gone
# The bridge and its subnet are deploy/fleet.sh's (CIPHERFLEET_FLEET_SUBNET, CIPHERFLEET_FLEET_BRIDGE).
set -euo pipefail

# A shell without job control starts its background commands with SIGINT ignored, and bash cannot trap
# a signal that was ignored when it started: `setsid deploy/quickstart.sh &` from a script would then
# sit through Ctrl-C. So it starts again with INT, TERM and HUP at their defaults, for the traps below.
if [ "${CIPHERFLEET_QUICKSTART_SIGNALS:-}" != default ]; then
  exec env --default-signal=INT,TERM,HUP CIPHERFLEET_QUICKSTART_SIGNALS=default "$BASH" "$0" "$@"
fi
unset CIPHERFLEET_QUICKSTART_SIGNALS

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "quickstart: $*" >&2; exit 2; }
say() { printf '\n== %s\n' "$*"; }

fleet=true vm=true keep=false stop=false build=true suite=tour http_listen=127.0.0.1:8080
data=/var/lib/cipherfleet-quickstart
while [ $# -gt 0 ]; do
  case "$1" in
    --no-fleet) fleet=false ;;
    --no-vm) vm=false ;;
    --keep) keep=true ;;
    --stop) stop=true ;;
    --no-build) build=false ;;
    --suite|--data-dir|--http-listen)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --suite) suite=$2 ;;
        --data-dir) data=$2 ;;
        --http-listen) http_listen=$2 ;;
      esac
      shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || die "run as root: it installs packages, and the fleet needs network namespaces"
mkdir -p "$data"
chmod 0755 "$data"
data=$(cd "$data" && pwd)

export CIPHERFLEET_FLEET_DIR=$data/fleet
# Every host, or the five process hosts (fleet.sh's names for the two sets).
if $vm; then export CIPHERFLEET_FLEET_HOSTS=all; else export CIPHERFLEET_FLEET_HOSTS=process; fi
triple=x86_64-unknown-linux-musl
dist=$repo/dist/$triple
coordinator_bin=$dist/cipherfleet-coordinator
tokens=$data/tokens
pids=$data/pids

# ---- stopping: also what a signal and any failure run ----
alive() { # PID NAME: the process runs and is NAME (a reused PID is another program)
  local cmdline
  [[ $1 =~ ^[0-9]+$ ]] && cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") && [[ $cmdline == *"$2"* ]]
}
stop_pid() { # FILE NAME: SIGTERM to the recorded process, SIGKILL after 30 s
  local file=$1 name=$2 pid i
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if alive "$pid" "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 150); do alive "$pid" "$name" || break; sleep 0.2; done
    alive "$pid" "$name" && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}
pgdata=$data/coordinator/postgres
postgres_pid() { # the coordinator's PostgreSQL server, if one runs (its postmaster works in its data directory)
  local pid
  pid=$(head -n 1 "$pgdata/postmaster.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(realpath "$pgdata")" ] && echo "$pid"
}
stop_postgres() { # a server left by a coordinator that could not stop it (SIGKILL): fast shutdown
  local pid i
  pid=$(postgres_pid) || return 0
  echo "  PostgreSQL (pid $pid) outlived its coordinator: stopping it"
  kill -INT "$pid" 2>/dev/null || true
  for i in $(seq 150); do postgres_pid >/dev/null || return 0; sleep 0.2; done
}
stop_all() {
  echo "quickstart: stopping"
  # What was started, for the check at the end.
  local coordinator_pid agent_pid postgres fleet_pids netns="" bridge="" stopped=() left=() pid ns
  coordinator_pid=$(cat "$pids/coordinator.pid" 2>/dev/null || true)
  agent_pid=$(cat "$pids/agent.pid" 2>/dev/null || true)
  postgres=$(postgres_pid || true)
  fleet_pids=$(cat "$CIPHERFLEET_FLEET_DIR"/run/*.pid 2>/dev/null || true)
  if [ -f "$CIPHERFLEET_FLEET_DIR/fleet.env" ]; then
    netns=$(sed -n 's/^netns=//p' "$CIPHERFLEET_FLEET_DIR/fleet.env" | tail -n 1)
    netns=${netns:-cf-}
    bridge=$(sed -n 's/^bridge=//p' "$CIPHERFLEET_FLEET_DIR/fleet.env" | tail -n 1)
    # Into a file first: fleet.sh stops at its first failed write, and this output may have nowhere
    # to go (a closed terminal, a reader that exited).
    deploy/fleet.sh down >"$data/fleet-down.log" 2>&1 || true
    sed 's/^/  /' "$data/fleet-down.log" || true
  fi
  stop_pid "$pids/agent.pid" cipherfleet-agent
  # SIGTERM: the coordinator stops its private PostgreSQL before it exits.
  stop_pid "$pids/coordinator.pid" cipherfleet-coordinator
  stop_postgres
  # Each process named, checked gone.
  if [ -n "$coordinator_pid" ]; then
    stopped+=("coordinator (pid $coordinator_pid)")
    ! alive "$coordinator_pid" cipherfleet-coordinator || left+=("coordinator (pid $coordinator_pid)")
  fi
  if [ -n "$postgres" ]; then stopped+=("PostgreSQL (pid $postgres)"); fi
  if pid=$(postgres_pid); then left+=("PostgreSQL (pid $pid, data $pgdata)"); fi
  for pid in $agent_pid $fleet_pids; do
    ! alive "$pid" cipherfleet-agent || left+=("agent (pid $pid)")
  done
  [ -z "$agent_pid$fleet_pids" ] || stopped+=("agents (pids $(echo $agent_pid $fleet_pids))")
  if [ -n "$bridge" ]; then
    for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
      case "$ns" in "$netns"*) left+=("network namespace $ns") ;; esac
    done
    ! ip link show "$bridge" >/dev/null 2>&1 || left+=("bridge $bridge")
    stopped+=("the fleet's namespaces ($netns*) and bridge $bridge")
  fi
  if [ ${#left[@]} -gt 0 ]; then
    echo "quickstart: still running: $(printf '%s; ' "${left[@]}" | sed 's/; $//')" >&2
    return 1
  fi
  [ ${#stopped[@]} -eq 0 ] || echo "quickstart: gone: $(printf '%s, ' "${stopped[@]}" | sed 's/, $//')"
  echo "quickstart: everything it started is stopped (data kept in $data)"
}
if $stop; then
  stop_all
  exit
fi

if [ -f "$pids/coordinator.pid" ] && kill -0 "$(cat "$pids/coordinator.pid")" 2>/dev/null; then
  die "a quickstart is already running on $data (pid $(cat "$pids/coordinator.pid")): deploy/quickstart.sh --stop first"
fi
if $fleet && [ "$(uname -m)" != x86_64 ]; then
  die "the emulated fleet needs an x86-64 machine (three of its hosts are x86-64); try --no-fleet"
fi
[ "$(uname -m)" = x86_64 ] || triple=aarch64-unknown-linux-musl
dist=$repo/dist/$triple coordinator_bin=$dist/cipherfleet-coordinator

# started: something was started that stop_all stops; leave_running: a --keep run got to its end.
started=false leave_running=false child="" sleeper=""
cleanup() {
  local status=$?
  # A second signal does not cut the stopping short, nor a failing line in it, nor a reader of its
  # output that is gone (SIGPIPE).
  trap '' INT TERM HUP PIPE
  set +e
  # A long step runs in a process group of its own (run_step): stopped as a whole.
  [ -z "$child" ] || kill -TERM -- "-$child" 2>/dev/null
  [ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null
  if $started && ! $leave_running; then stop_all || status=1; fi
  exit "$status"
}
on_signal() { # NAME STATUS
  trap '' INT TERM HUP PIPE
  set +e
  # SIGHUP: the terminal has gone, and writing to it would fail: say it in a log instead.
  if [ "$1" = HUP ]; then exec >>"$data/quickstart.log" 2>&1; fi
  echo
  echo "quickstart: SIG$1"
  exit "$2"
}
trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP
# Runs a step in a process group of its own and waits for it; a signal is then the script's to handle
# at once (bash waits for a foreground command before its trap runs), and cleanup stops the group.
# (A background command of a script leads no process group, so setsid does not fork: $! is the group.)
run_step() {
  setsid "$@" &
  child=$!
  local status=0
  wait "$child" || status=$?
  child=""
  return "$status"
}
pause() { # SECONDS: a sleep a signal interrupts at once
  sleep "$1" &
  sleeper=$!
  wait "$sleeper" || true
  sleeper=""
}

if $build; then
  say "dependencies"
  command -v cargo >/dev/null || die "cargo is missing: install a Rust toolchain with rustup (https://rustup.rs), then run this again"
  if ! $fleet; then deploy/install-deps.sh --quickstart --no-qemu
  elif ! $vm; then deploy/install-deps.sh --quickstart --no-vm
  else deploy/install-deps.sh --quickstart
  fi

  say "release builds (deploy/build-static.sh; about 10 minutes the first time on an idle 2-core machine, seconds later)"
  t0=$(date +%s)
  run_step deploy/build-static.sh --coordinator "$triple"
  # The ARM64 host runs the accelerated agent alone: no software sibling to build for it.
  if $fleet; then run_step deploy/build-static.sh --no-soft aarch64-unknown-linux-musl; fi
  echo "builds: $(($(date +%s) - t0)) s"
else
  for f in "$coordinator_bin" "$dist/cipherfleet-agent" "$dist/cipherfleet-agent-soft"; do
    [ -x "$f" ] || die "--no-build: $f is missing (run without --no-build)"
  done
fi

say "tokens and TLS in $data"
mkdir -p "$tokens" "$pids"
chmod 0700 "$tokens"
for t in agent admin; do
  if [ ! -s "$tokens/$t.token" ]; then
    (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tokens/$t.token")
    echo "made $tokens/$t.token"
  fi
done

started=true
if $fleet; then
  # The bridge first: the coordinator listens on its address, where the hosts reach it.
  deploy/fleet.sh net
  grpc_host=$(sed -n 's/^subnet=//p' "$CIPHERFLEET_FLEET_DIR/fleet.env")
  grpc_host=${grpc_host%.0/24}.1
else
  grpc_host=127.0.0.1
fi

say "coordinator (private PostgreSQL in $data/coordinator)"
log=$data/coordinator.log
# Verification on change is off: on the fleet's first start it would queue one verification campaign
# per new host ahead of the campaign below.
"$coordinator_bin" serve --grpc-listen "$grpc_host:7443" --http-listen "$http_listen" \
  --data-dir "$data/coordinator" --self-signed "$data/tls" --tls-name "$grpc_host" \
  --agent-token-file "$tokens/agent.token" --admin-token-file "$tokens/admin.token" \
  --verify-on-change=false </dev/null >"$log" 2>&1 &
echo $! >"$pids/coordinator.pid"
for _ in $(seq 600); do
  grep -q '^grpc=' "$log" && break
  kill -0 "$(cat "$pids/coordinator.pid")" 2>/dev/null || { tail -n 20 "$log" >&2; die "the coordinator did not start (log: $log)"; }
  sleep 0.1
done
grep -q '^grpc=' "$log" || die "the coordinator did not print its addresses within a minute (log: $log)"
http=$(sed -n 's/^grpc=[^ ]* http=\([^ ]*\).*/\1/p' "$log" | head -n 1)
export CIPHERFLEET_COORDINATOR=https://$grpc_host:7443 CIPHERFLEET_CA_CERT=$data/tls/ca.pem
admin=(--admin-token-file "$tokens/admin.token")
echo "gRPC $CIPHERFLEET_COORDINATOR (CA $CIPHERFLEET_CA_CERT), report http://$http/, log $log"

if $fleet; then
  say "the emulated fleet (deploy/fleet.sh up)"
  deploy/fleet.sh up --coordinator "$CIPHERFLEET_COORDINATOR" --ca-cert "$CIPHERFLEET_CA_CERT" \
    --token-file "$tokens/agent.token"
  if $vm; then want=7; else want=5; fi
else
  say "one local agent"
  mkdir -p "$data/agent"
  chmod 0700 "$data/agent"
  "$dist/cipherfleet-agent" run --coordinator "$CIPHERFLEET_COORDINATOR" --ca-cert "$CIPHERFLEET_CA_CERT" \
    --token-file "$tokens/agent.token" --label fleet=local --state-dir "$data/agent/state" \
    --spool-dir "$data/agent/spool" </dev/null >"$data/agent.log" 2>&1 &
  echo $! >"$pids/agent.pid"
  echo "agent pid $!, log $data/agent.log"
  want=1
fi

hosts_json() { "$coordinator_bin" hosts --format json "${admin[@]}" 2>/dev/null; }
online_count() {
  hosts_json | python3 -c 'import json,sys; print(sum(1 for h in json.load(sys.stdin) if h["online"]))' 2>/dev/null || echo 0
}
printf 'waiting for %s host(s) online…' "$want"
for _ in $(seq 120); do
  [ "$(online_count)" -ge "$want" ] && break
  pause 1
done
n=$(online_count)
echo " $n online"
[ "$n" -ge "$want" ] || die "only $n of $want hosts came online in 2 minutes (logs: $CIPHERFLEET_FLEET_DIR/log/, $data/agent.log)"

say "campaign: suite $suite on every online host"
campaign=$("$coordinator_bin" campaign start --suite "$suite" --name "quickstart $suite" "${admin[@]}")
echo "campaign $campaign"
t0=$(date +%s)
tty=false
[ -t 1 ] && tty=true
# The progress display: a bar per host, redrawn in place on a terminal, a line per change otherwise.
lines=0 last=""
while :; do
  status=$("$coordinator_bin" campaign status "$campaign" --format json "${admin[@]}") || { pause 2; continue; }
  hosts=$(hosts_json || echo '[]')
  view=$(python3 - "$status" "$hosts" "$(($(date +%s) - t0))" <<'EOF'
import json, sys
s, hosts, elapsed = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
emulated = {h["name"] for h in hosts if h["labels"].get("emulated", "no").lower() not in ("no", "false", "0")}
o = s["overall"]
total = sum(o.values())
print(f"campaign {s['campaign_id']} ({s['state']}): {o['done']}/{total} jobs done, {o['failed']} failed, {elapsed} s")
for h in sorted(s["hosts"], key=lambda h: h["host_name"]):
    c = h["counts"]
    n = max(1, sum(c.values()))
    end = c["done"] + c["failed"] + c["cancelled"]
    bar = "#" * (end * 30 // n) + "." * (30 - end * 30 // n)
    note = "emulated: slow, figures not real" if h["host_name"] in emulated else ""
    print(f"  {h['host_name'][:24]:<24} [{bar}] {end:>3}/{n:<3} {note}")
print("STATE=" + s["state"])
EOF
)
  state=${view##*STATE=}
  view=${view%STATE=*}
  if $tty; then
    [ "$lines" -eq 0 ] || printf '\033[%dA\033[J' "$lines"
    printf '%s' "$view"
    lines=$(printf '%s' "$view" | wc -l)
  elif [ "${view#*$'\n'}" != "$last" ]; then
    printf '%s' "$view"
    last=${view#*$'\n'}
  fi
  [ "$state" = running ] || break
  pause 3
done
python3 - "$status" "$(($(date +%s) - t0))" <<'EOF'
import json, sys
s = json.loads(sys.argv[1])
o = s["overall"]
print(f"campaign {s['campaign_id']} {s['state']} after {sys.argv[2]} s: {o['done']} jobs done, {o['failed']} failed")
for f in s["failures"][:5]:
    print(f"  failed on {f['host_name']}: {f['error'][:160]}")
EOF

say "summary"
# Findings are derived when the campaign ends; a moment for that pass.
pause 3
set +e
findings=$("$coordinator_bin" check --format json --min-severity info "${admin[@]}")
check_status=$?
set -e
[ "$check_status" -le 1 ] || echo "quickstart: could not read the findings (check exited $check_status)"
python3 - "$(hosts_json)" "${findings:-[]}" <<'EOF'
import json, sys
from collections import Counter
hosts, findings = json.loads(sys.argv[1]), json.loads(sys.argv[2] or "[]")
per_host = Counter(f["host_name"] for f in findings)
print(f"{len(hosts)} hosts:")
for h in sorted(hosts, key=lambda h: h["name"]):
    emulated = " (emulated)" if h["labels"].get("emulated") else ""
    print(f"  {h['name']:<19} {h['arch']:<8} {h['acceleration']:<12} kernel {h['kernel_release']:<24} "
          f"{per_host[h['name']]} finding(s){emulated}")
reasons = Counter(f["reason"] for f in findings)
print("open findings by reason: " + (", ".join(f"{r} {n}" for r, n in sorted(reasons.items())) or "none"))
EOF
echo
echo "report: http://$http/   (findings: http://$http/fallback, capacity: http://$http/capacity)"
echo "operator commands: export CIPHERFLEET_COORDINATOR=$CIPHERFLEET_COORDINATOR CIPHERFLEET_CA_CERT=$CIPHERFLEET_CA_CERT"
echo "                   $coordinator_bin hosts --admin-token-file $tokens/admin.token"
$fleet && echo "fleet: CIPHERFLEET_FLEET_DIR=$CIPHERFLEET_FLEET_DIR deploy/fleet.sh status --admin-token-file $tokens/admin.token"
if $fleet && $vm; then
  echo "VM hosts (Debian's kernel under qemu-system; each checked at boot which driver serves the kernel's AES):"
  deploy/fleet.sh status | grep 'kernel aes:' | sed 's/^/  /' || true
elif $fleet; then
  echo "VM hosts: left out (--no-vm)"
fi

if $keep; then
  leave_running=true
  echo
  echo "left running (--keep). Stop it all with: deploy/quickstart.sh --stop --data-dir $data"
  exit 0
fi
echo
echo "up until Ctrl-C (or SIGTERM, SIGHUP)"
while :; do pause 3600; done
