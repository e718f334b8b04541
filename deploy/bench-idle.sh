#!/usr/bin/env bash
# Idle sockets against a real coordinator: N connections that never send a request are held on
# its report port and N more on its plain gRPC port (each one the server closes is opened again,
# at most --rate a second over all), while /healthz, ListHosts (`cipherfleet-coordinator hosts`)
# and a new agent's Hello (a real `cipherfleet-agent run` enrolling) are tried over and over.
# Prints one table: how many of each were answered, how fast, and the coordinator's open files
# and memory. The coordinator runs on a private PostgreSQL cluster in a temporary directory
# (needs PostgreSQL's server binaries, as `serve` does) with its default caps and timeouts.
#
# The sockets are held by separate processes (python3), 5,000 each, so that neither they nor
# the coordinator need an open-files limit above this machine's.
#
# Usage: deploy/bench-idle.sh [--idle N] [--seconds S] [--rate R] [--debug] [--no-build]
#   --idle N      idle connections held on each port (default 20000)
#   --seconds S   how long they are held while the probes run (default 60)
#   --rate R      most reconnections a second, over all holders (default 2000)
#   --debug       use target/debug (built by deploy/build.sh) instead of a release build
#   --no-build    use the binaries as they are
set -euo pipefail
cd "$(dirname "$0")/.."

idle=20000 seconds=60 rate=2000 profile=release build=1
while [ $# -gt 0 ]; do
  case $1 in
    --idle) idle=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --debug) profile=debug; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-idle.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v python3 >/dev/null || { echo "bench-idle.sh: needs python3 for the socket holders" >&2; exit 1; }
if [ "$build" = 1 ]; then
  if [ "$profile" = release ]; then
    cargo build --release -p cipherfleet-coordinator -p cipherfleet-agent
  else
    deploy/build.sh
  fi
fi
BIN=target/$profile
dir=$(mktemp -d /tmp/bench-idle.XXXXXX)
# The private cluster runs as its own user, which must reach the data directory.
chmod 711 "$dir"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
log() { printf '[%s] %s\n' "$(date -u +%T)" "$*" >&2; }
now_ms() { date +%s%3N; }

head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$dir/agent.token"
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$dir/admin.token"
chmod 600 "$dir"/*.token
mkfifo "$dir/out"
CIPHERFLEET_LOG=${CIPHERFLEET_LOG:-warn} "$BIN/cipherfleet-coordinator" serve \
  --grpc-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --data-dir "$dir/data" \
  --agent-token-file "$dir/agent.token" --admin-token-file "$dir/admin.token" \
  --verify-on-change=false >"$dir/out" 2>"$dir/coordinator.log" &
coordinator=$!
pids+=("$coordinator")
read -r -t 120 line <"$dir/out" || { echo "no address line; see the log:" >&2; tail "$dir/coordinator.log" >&2; exit 1; }
cat "$dir/out" >/dev/null &
grpc=$(tr ' ' '\n' <<<"$line" | sed -n 's/^grpc=//p')
http=$(tr ' ' '\n' <<<"$line" | sed -n 's/^http=//p')
log "coordinator $coordinator: grpc=$grpc http=$http"

files() { find "/proc/$coordinator/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss_mb() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$coordinator/status"; }
files_before=$(files) rss_before=$(rss_mb)

# One holder: N sockets to HOST:PORT that never send anything; one the server closes is opened
# again (at most RATE a second); every second it writes what it holds to STATS.
cat >"$dir/hold.py" <<'EOF'
import os, selectors, socket, sys, time
host, port, n, rate, stats, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], float(sys.argv[6])
sel = selectors.DefaultSelector()
opened = closed = failed = 0
def connect():
    global opened, failed
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    except OSError:
        failed += 1
        s.close()
        return
    sel.register(s, selectors.EVENT_READ)
    opened += 1
for _ in range(n):
    connect()
owed, credit, last, end = 0, 0.0, time.time(), time.time() + seconds
while time.time() < end:
    for key, _ in sel.select(timeout=0.1):
        s = key.fileobj
        try:
            data = s.recv(1)
        except OSError:
            data = b""
        if not data:
            sel.unregister(s)
            s.close()
            closed += 1
            owed += 1
    t = time.time()
    credit = min(credit + (t - last) * rate, rate)
    last = t
    while owed and credit >= 1:
        connect()
        owed -= 1
        credit -= 1
    with open(stats + ".tmp", "w") as f:
        f.write(f"{opened} {len(sel.get_map())} {closed} {failed}\n")
    os.replace(stats + ".tmp", stats)
EOF

per=5000
holders=$(( (idle + per - 1) / per ))
started=$(date +%s)
for port_of in "$http" "$grpc"; do
  left=$idle
  for h in $(seq "$holders"); do
    n=$(( left < per ? left : per )); left=$(( left - n ))
    tag=$( [ "$port_of" = "$http" ] && echo http || echo grpc )
    python3 "$dir/hold.py" 127.0.0.1 "${port_of##*:}" "$n" "$(( rate / (2 * holders) + 1 ))" \
      "$dir/$tag-$h.stats" "$(( seconds + 30 ))" 2>>"$dir/holders.log" &
    pids+=("$!")
  done
done
# held TAG: opened, open now, closed by the server, failed connects, summed over TAG's holders.
held() { cat "$dir/$1"-*.stats 2>/dev/null | awk '{ o += $1; h += $2; c += $3; f += $4 } END { printf "%d %d %d %d", o, h, c, f }'; }
log "holders started: $holders per port, $idle sockets each port"
sleep 5

hz_ok=0 hz_n=0 hz_max=0 lh_ok=0 lh_n=0 lh_max=0 he_ok=0 he_n=0 he_max=0
files_max=0 rss_max=0 http_open_max=0 grpc_open_max=0
deadline=$(( $(date +%s) + seconds ))
agent_round=0 next_agent=$(date +%s)
hosts() {
  timeout 10 "$BIN/cipherfleet-coordinator" hosts --coordinator "http://$grpc" \
    --admin-token-file "$dir/admin.token" --format json 2>>"$dir/probes.log"
}
while [ "$(date +%s)" -lt "$deadline" ]; do
  t=$(now_ms)
  hz_n=$(( hz_n + 1 ))
  if curl -fsS --max-time 5 "http://$http/healthz" >/dev/null 2>>"$dir/probes.log"; then
    hz_ok=$(( hz_ok + 1 )); d=$(( $(now_ms) - t )); [ "$d" -gt "$hz_max" ] && hz_max=$d
  fi
  t=$(now_ms)
  lh_n=$(( lh_n + 1 ))
  if hosts >/dev/null; then
    lh_ok=$(( lh_ok + 1 )); d=$(( $(now_ms) - t )); [ "$d" -gt "$lh_max" ] && lh_max=$d
  fi
  if [ "$(date +%s)" -ge "$next_agent" ]; then
    # A new host enrolls: its Hello answered means it is listed online.
    agent_round=$(( agent_round + 1 )); name="bench-idle-$agent_round"
    he_n=$(( he_n + 1 )); t=$(now_ms)
    "$BIN/cipherfleet-agent" run --coordinator "http://$grpc" --name "$name" --state-dir "$dir/agent-$agent_round" \
      --token-file "$dir/agent.token" >/dev/null 2>>"$dir/agents.log" &
    agent=$!
    for _ in $(seq 150); do
      if hosts | python3 -c "import json,sys; sys.exit(0 if any(h['name']=='$name' and h['online'] for h in json.load(sys.stdin)) else 1)" 2>/dev/null; then
        he_ok=$(( he_ok + 1 )); d=$(( $(now_ms) - t )); [ "$d" -gt "$he_max" ] && he_max=$d
        break
      fi
      sleep 0.1
    done
    kill -TERM "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true
    next_agent=$(( $(date +%s) + 10 ))
  fi
  f=$(files); [ "$f" -gt "$files_max" ] && files_max=$f
  r=$(rss_mb); [ "$r" -gt "$rss_max" ] && rss_max=$r
  read -r _ ho _ _ <<<"$(held http)"; [ "$ho" -gt "$http_open_max" ] && http_open_max=$ho
  read -r _ go _ _ <<<"$(held grpc)"; [ "$go" -gt "$grpc_open_max" ] && grpc_open_max=$go
  sleep 1
done
read -r h_opened _ h_closed h_failed <<<"$(held http)"
read -r g_opened _ g_closed g_failed <<<"$(held grpc)"
kill -0 "$coordinator" 2>/dev/null && alive=yes || alive=no
nofile=$(awk '/Max open files/ { print $4 }' "/proc/$coordinator/limits" 2>/dev/null || echo "?")

printf '\nbench-idle: %s idle connections on each port for %s s (%s build), %s cores, %s\n' \
  "$idle" "$seconds" "$profile" "$(nproc)" "$(date -u +%F)"
printf '%-44s %s\n' \
  "idle HTTP connections opened / closed by the coordinator / connect failures" "$h_opened / $h_closed / $h_failed" \
  "idle gRPC connections opened / closed by the coordinator / connect failures" "$g_opened / $g_closed / $g_failed" \
  "most idle HTTP / gRPC sockets open at once (client side)" "$http_open_max / $grpc_open_max" \
  "/healthz answered" "$hz_ok / $hz_n (slowest $hz_max ms)" \
  "ListHosts answered" "$lh_ok / $lh_n (slowest $lh_max ms, CLI start included)" \
  "new agents' Hello answered (enrolled, online)" "$he_ok / $he_n (slowest $he_max ms, agent start included)" \
  "coordinator open files: before / most" "$files_before / $files_max (limit $nofile)" \
  "coordinator RSS MB: before / most" "$rss_before / $rss_max" \
  "coordinator alive at the end" "$alive"
[ "$alive" = yes ] && [ "$hz_ok" = "$hz_n" ] && [ "$lh_ok" = "$lh_n" ] && [ "$he_ok" = "$he_n" ]
