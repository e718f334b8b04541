#!/usr/bin/env bash
# Stops deploy/quickstart.sh every way it can be stopped, and checks each time that nothing it started is
# left: no quickstart, coordinator, PostgreSQL or agent process, no network namespace, no bridge.
#   ctrl-c   Ctrl-C on its terminal (tmux send-keys C-c) while its campaign runs
#   sigint   SIGINT to its process group, started in the background of this script with setsid, so with
#            SIGINT ignored at its start, as a shell without job control leaves it
#   sigterm  SIGTERM to the script alone
#   sighup   its terminal closing (tmux kill-session), and SIGHUP to its process group, as a hangup
#            sends it to the terminal's foreground group: to the script and its coordinator, which must
#            stop its own PostgreSQL rather than leave it to the script
#   stop     --keep until its campaign is done; then the coordinator SIGKILLed, so that its PostgreSQL
#            outlives it; then --stop, which must stop that PostgreSQL too and say that all is gone
# Each runs the quickstart with --no-build, --no-vm and --suite quick (the static binaries in dist/:
# deploy/build-static.sh --coordinator), on a fleet and data directory of its own (bridge cfstop0,
# 10.79.0.0/24, namespaces cfstop-*), so it runs beside another fleet. Needs root, qemu-user, tmux and
# PostgreSQL. How long it takes: docs/performance.md, "Scripts: time and disk".
#
# Usage: deploy/check-stop.sh [-v] [WAY…]   (default: all five, in the order above; -v prints each log)
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "check-stop: $*" >&2; exit 2; }
ways=() verbose=false
for arg in "$@"; do
  case "$arg" in
    -v) verbose=true ;;
    ctrl-c|sigint|sigterm|sighup|stop) ways+=("$arg") ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown way '$arg' (see --help)" ;;
  esac
done
[ ${#ways[@]} -gt 0 ] || ways=(ctrl-c sigint sigterm sighup stop)
[ "$(id -u)" -eq 0 ] || die "run as root: the quickstart's fleet needs network namespaces"
command -v tmux >/dev/null || die "tmux is missing: run deploy/install-deps.sh"

export CIPHERFLEET_FLEET_SUBNET=10.79.0.0/24 CIPHERFLEET_FLEET_BRIDGE=cfstop0 CIPHERFLEET_FLEET_NETNS=cfstop-
data=$(mktemp -d "${TMPDIR:-/tmp}/cipherfleet-check-stop.XXXXXX")
tmux_socket=cfstop-$$
quickstart=(deploy/quickstart.sh --no-build --no-vm --data-dir "$data" --http-listen 127.0.0.1:0 --suite quick)
# Whatever happens, nothing of ours outlives the check.
finish() {
  tmux -L "$tmux_socket" kill-server 2>/dev/null || true
  "${quickstart[0]}" --stop --data-dir "$data" >/dev/null 2>&1 || true
  if [ -n "${CIPHERFLEET_CHECK_STOP_KEEP:-}" ]; then echo "check-stop: kept $data"; else rm -rf "$data"; fi
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

failures=0
fail() { # MESSAGE: counted, with the end of this way's log
  echo "check-stop: $way: FAILED: $*" >&2
  [ ! -s "$log" ] || tail -n 30 "$log" | sed 's/^/    /' >&2
  failures=$((failures + 1))
}

# What a quickstart on $data left: processes naming it (the script, the coordinator, PostgreSQL, the
# agents and their emulators), processes in its namespaces, the namespaces and the bridge.
leftovers() {
  local pid ns
  for pid in $(pgrep -f -- "$data" || true); do
    [ "$pid" != $$ ] && echo "process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)"
  done
  for ns in $(ip netns list | awk '{ print $1 }'); do
    case "$ns" in
      "$CIPHERFLEET_FLEET_NETNS"*) echo "namespace $ns (processes: $(ip netns pids "$ns" | paste -sd ' '))" ;;
    esac
  done
  if ip link show "$CIPHERFLEET_FLEET_BRIDGE" >/dev/null 2>&1; then echo "bridge $CIPHERFLEET_FLEET_BRIDGE"; fi
  return 0
}
# Fails unless the pid exits within SECONDS. A zombie has exited: tmux has been seen leaving its
# pane's process unreaped (pane_dead set, pane_dead_status empty) under load.
wait_gone() { # PID SECONDS
  local i
  for i in $(seq "$(($2 * 5))"); do
    kill -0 "$1" 2>/dev/null || return 0
    case "$(ps -o stat= -p "$1" 2>/dev/null)" in Z*) return 0 ;; esac
    sleep 0.2
  done
  return 1
}
# A quickstart that did not stop as it should: SIGTERM, then SIGKILL, so the next way starts clean.
end() { # PID
  kill -TERM "$1" 2>/dev/null || true
  wait_gone "$1" 60 || kill -KILL "$1" 2>/dev/null || true
}
# Waits until FILE-PRODUCING-COMMAND's output shows the campaign started (a line "campaign N").
wait_campaign() { # COMMAND…
  local i
  for i in $(seq 300); do
    if "$@" 2>/dev/null | grep -q '^campaign [0-9]'; then
      sleep 3 # its first jobs running on every host
      return 0
    fi
    sleep 1
  done
  return 1
}
check_clean() {
  local left
  left=$(leftovers)
  if [ -n "$left" ]; then
    fail "left running: $(paste -sd ';' <<<"$left")"
    # Clean up for the next way.
    "${quickstart[0]}" --stop --data-dir "$data" >/dev/null 2>&1 || true
  else
    echo "check-stop: $way: nothing left"
  fi
}
in_tmux() { tmux -L "$tmux_socket" "$@"; }
pane() { in_tmux capture-pane -p -S - -t q; }

for way in "${ways[@]}"; do
  echo "check-stop: $way"
  t0=$(date +%s)
  log=$data/$way.log
  case "$way" in
    ctrl-c|sighup)
      # The pane runs the quickstart itself (no shell in between for sighup, whose hangup goes to the
      # terminal's whole group), and stays after it exits. For ctrl-c a non-interactive bash around it
      # writes its exit status to a file (bash waits out a child that handles SIGINT, then goes on):
      # tmux's own pane_dead_status has been seen empty.
      status_file=$data/$way.status
      rm -f "$status_file"
      wrap=()
      [ "$way" = sighup ] || wrap=(bash -c '"$@"; echo $? >"$0"' "$status_file")
      in_tmux new-session -d -s q -x 200 -y 50 "${wrap[@]}" env \
        CIPHERFLEET_FLEET_SUBNET="$CIPHERFLEET_FLEET_SUBNET" CIPHERFLEET_FLEET_BRIDGE="$CIPHERFLEET_FLEET_BRIDGE" \
        CIPHERFLEET_FLEET_NETNS="$CIPHERFLEET_FLEET_NETNS" "${quickstart[@]}"
      in_tmux set-option -t q remain-on-exit on
      pid=$(in_tmux display-message -p -t q '#{pane_pid}')
      if ! wait_campaign pane; then
        pane >"$log"
        fail "no campaign started within 5 minutes (pane: $log)"
        end "$pid"
      elif [ "$way" = ctrl-c ]; then
        in_tmux send-keys -t q C-c
        for _ in $(seq 600); do [ -s "$status_file" ] && break; sleep 0.2; done
        [ -s "$status_file" ] || { fail "the quickstart still runs 2 minutes after Ctrl-C"; end "$pid"; }
        wait_gone "$pid" 10 || fail "the pane's shell still runs after the quickstart ended"
        pane >"$log"
        status=$(cat "$status_file" 2>/dev/null || true)
        [ "$status" = 130 ] || fail "exit status '$status' after Ctrl-C, not 130 (pane: $log)"
        grep -q 'everything it started is stopped' "$log" || fail "it did not say that everything is stopped (pane: $log)"
      else
        in_tmux kill-session -t q
        kill -HUP -- "-$pid" 2>/dev/null || true
        wait_gone "$pid" 120 || { fail "the quickstart still runs 2 minutes after its terminal closed"; end "$pid"; }
        # The terminal is gone: it says what it stopped in its data directory.
        cp "$data/quickstart.log" "$log" 2>/dev/null || : >"$log"
        grep -q 'everything it started is stopped' "$log" || fail "its log does not say that everything is stopped ($log)"
        ! grep -q 'outlived its coordinator' "$log" || fail "the coordinator left its PostgreSQL running on SIGHUP ($log)"
      fi
      in_tmux kill-server 2>/dev/null || true
      ;;
    sigint|sigterm)
      # setsid: a process group of its own, led by the script (setsid does not fork here), with SIGINT
      # ignored as this script's background commands have it.
      setsid "${quickstart[@]}" >"$log" 2>&1 &
      pid=$!
      if ! wait_campaign cat "$log"; then
        fail "no campaign started within 5 minutes ($log)"
        end "$pid"
      else
        if [ "$way" = sigint ]; then kill -INT -- "-$pid"; else kill -TERM "$pid"; fi
        wait_gone "$pid" 120 || { fail "the quickstart still runs 2 minutes after $way"; end "$pid"; }
        set +e
        wait "$pid"
        status=$?
        set -e
        want=$([ "$way" = sigint ] && echo 130 || echo 143)
        [ "$status" = "$want" ] || fail "exit status $status after $way, not $want ($log)"
        grep -q 'everything it started is stopped' "$log" || fail "it did not say that everything is stopped ($log)"
      fi
      ;;
    stop)
      if ! timeout 600 "${quickstart[@]}" --keep >"$log" 2>&1; then
        fail "the --keep run failed ($log)"
      else
        coordinator=$(cat "$data/pids/coordinator.pid")
        up=$(leftovers)
        for what in "process $coordinator:" /postgres "namespace ${CIPHERFLEET_FLEET_NETNS}arm64" "bridge"; do
          grep -q -- "$what" <<<"$up" || fail "after --keep, not running: $what"
        done
        kill -KILL "$coordinator"
        wait_gone "$coordinator" 10 || fail "the coordinator outlived SIGKILL"
        if ! "${quickstart[0]}" --stop --data-dir "$data" >>"$log" 2>&1; then
          fail "--stop failed ($log)"
        fi
        grep -q 'outlived its coordinator' "$log" || fail "--stop did not find the PostgreSQL its coordinator left ($log)"
        grep -q 'everything it started is stopped' "$log" || fail "--stop did not say that everything is stopped ($log)"
      fi
      ;;
  esac
  check_clean
  if $verbose && [ -f "$log" ]; then sed 's/^/    /' "$log"; fi
  echo "check-stop: $way: $(($(date +%s) - t0)) s"
done

if [ "$failures" -gt 0 ]; then
  echo "check-stop: $failures failure(s); the logs were in $data (removed)" >&2
  exit 1
fi
echo "check-stop: every way of stopping stopped everything (${ways[*]})"
