#!/usr/bin/env bash
# Connect storm: BENCH_COUNT simulated agents dial at once (or spread over BENCH_RAMP, e.g.
# 60s). Rows: time until all are connected, the peak rate of new sessions, the coordinator's
# RSS with all connected, its CPU while they only send heartbeats (and that of PostgreSQL and
# the simulator, per heartbeat sent), the simulator's memory
# per simulated agent, and the agents lost for silence.
#
# One process holds about as many connections as its open-files hard limit (`ulimit -Hn`)
# allows, less what it keeps aside (a coordinator 1,024). A fleet larger than that is split:
# over several simulators (--first, --count), and over several coordinators on the one
# database (the scale-out path; each host dials the coordinator of its index first and knows
# them all), whose hosts keep their credentials in memory (SIM_IN_MEMORY: a file each, with
# four fsyncs, would make the storm one of the disk's). The rows then give the sums, and the
# RSS and CPU of each coordinator.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

idle=$([ "$BENCH_QUICK" = 1 ] && echo 10 || echo 30)
hard=$(ulimit -Hn); [ "$hard" = unlimited ] && hard=1048576
per_process=${BENCH_PER_PROCESS:-$(( hard - 1100 ))}
parts=$(( (BENCH_COUNT + per_process - 1) / per_process ))
[ "$parts" = 1 ] || export SIM_IN_MEMORY=${SIM_IN_MEMORY:-1}
url=$(fresh_db bench_connect)
coords=() urls=()
for _ in $(seq "$parts"); do
  coord_start "$url"
  coords+=("$COORD_PID"); urls+=(--coordinator "http://$GRPC")
done
GRPC=${urls[1]#http://}
[ "$parts" = 1 ] || log "$BENCH_COUNT agents over $parts coordinators and $parts simulators (at most $per_process open files each)"
rss_before=$(for c in "${coords[@]}"; do rss_mb "$c"; done | paste -sd/)
sims=() stats=()
t0=$(now)
for j in $(seq 0 $(( parts - 1 ))); do
  first=$(( j * BENCH_COUNT / parts )); n=$(( (j + 1) * BENCH_COUNT / parts - first ))
  SIM_TAG=$([ "$parts" = 1 ] || echo "-$j")
  # The first coordinator is $GRPC (lib.sh); the others follow, so host i starts on i mod $parts.
  sim_start "$n" --ramp "${BENCH_RAMP:-0s}" --first "$first" "${urls[@]:2}"
  sims+=("$SIM_PID"); stats+=("$SIM_STATS")
done
# total KEY: the sum over the simulators of KEY (max_KEY: the largest).
total() { local f k=$1; for f in "${stats[@]}"; do SIM_STATS=$f sim_stat "$k"; done | awk '{ s += $1 } END { printf "%d", s }'; }
most() { local f k=$1; for f in "${stats[@]}"; do SIM_STATS=$f sim_stat "$k"; done | sort -g | tail -1; }
# Follow the storm second by second: the peak of new sessions over all simulators.
peak=0 prev=0 all=""
deadline=$(( $(date +%s) + BENCH_CONNECT_LIMIT ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 1
  cur=$(total sessions); [ $(( cur - prev )) -gt "$peak" ] && peak=$(( cur - prev )); prev=$cur
  if [ "$(total connected)" -ge "$BENCH_COUNT" ]; then all=$(since "$t0"); break; fi
done
if [ -n "$all" ]; then
  # One simulator's own figure when there is one (its clock starts with its first dial).
  [ "$parts" = 1 ] && all=$(sim_stat connect_all_s)
  row "connect all ($BENCH_COUNT agents)" "$all" s "$([ "$parts" = 1 ] || echo "over $parts coordinators; by the script's 1 s polls")"
else
  row "connect all ($BENCH_COUNT agents)" "timeout" s "$(total connected) connected after ${BENCH_CONNECT_LIMIT} s; refused $(total refused), last error in $SCENARIO-sim.log"
fi
[ "$parts" = 1 ] && peak=$(sim_stat peak_connects_per_s)
row "peak new sessions" "$peak" "/s"
rss_now=$(for c in "${coords[@]}"; do rss_mb "$c"; done | paste -sd/)
rss_peak=$(for c in "${coords[@]}"; do peak_rss_mb "$c"; done | paste -sd/)
row "coordinator RSS, idle / all connected" "$rss_before / $rss_now" MB "peak $rss_peak MB$([ "$parts" = 1 ] || echo ', per coordinator')"
sleep 2
# Waits for these samplers only: a bare `wait` would wait for the coordinators and simulators too.
samplers=()
# The load generator's and the database's share of the same window, and the heartbeats the
# simulators sent in it (the coordinators may have told longer intervals than BENCH_HEARTBEAT:
# --max-heartbeat-rate), for the CPU per heartbeat of each part.
others() { echo "$(for s in "${sims[@]}"; do cpu_ticks "$s"; done | awk '{ s += $1 } END { print s }') $(pg_ticks) $(total heartbeats) $(now)"; }
others0=$(others)
for c in "${coords[@]}"; do cpu_percent "$c" "$idle" >"$BENCH_DIR/$SCENARIO-cpu.$c" & samplers+=("$!"); done
wait "${samplers[@]}"
others1=$(others)
cpus=$(for c in "${coords[@]}"; do cat "$BENCH_DIR/$SCENARIO-cpu.$c"; echo; done)
connected=$(total connected)
read -r s0 p0 h0 w0 <<<"$others0"; read -r s1 p1 h1 w1 <<<"$others1"
# Each part's CPU seconds per second (the coordinators' summed), and heartbeats per second.
shares=$(awk -v hz="$HZ" -v w="$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')" -v p=$((p1 - p0)) -v s=$((s1 - s0)) \
  -v h=$((h1 - h0)) -v c="$(awk '{ s += $1 } END { print s }' <<<"$cpus")" \
  'BEGIN { printf "%f %f %f %f", c / 100, p / hz / w, s / hz / w, h / w }')
read -r coord_share pg_share sim_share beats <<<"$shares"
row "coordinator CPU, heartbeats only" "$(paste -sd/ <<<"$cpus")" "% of a core" \
  "${idle} s: $(printf '%.0f' "$beats") heartbeats/s$([ "$parts" = 1 ] || echo ' over all') (at ${BENCH_HEARTBEAT:-5} s each: $(awk -v n="$connected" -v h="${BENCH_HEARTBEAT:-5}" 'BEGIN { printf "%.0f", n / h }')); $(total repaced) sessions re-paced"
row "CPU per heartbeat coordinators / PostgreSQL / simulators" "$(awk -v b="$beats" -v c="$coord_share" -v p="$pg_share" \
  -v s="$sim_share" 'BEGIN { f = 1e6 / (b > 0 ? b : 1); printf "%.0f / %.0f / %.0f", c * f, p * f, s * f }')" µs \
  "heartbeats only; PostgreSQL and simulators $(awk -v p="$pg_share" -v s="$sim_share" 'BEGIN { printf "%.1f / %.1f", 100 * p, 100 * s }') % of a core"
sim_rss=$(for s in "${sims[@]}"; do rss_mb "$s"; done | awk '{ s += $1 } END { print s }')
row "simulator RSS" "$sim_rss" MB "$(awk -v r="$sim_rss" -v n="$BENCH_COUNT" 'BEGIN { printf "%.1f", r * 1024 / n }') KB per simulated agent"
row "session errors" "$(total errors)" "" "refused $(total refused)"
# Sessions a coordinator ended for silence, and whether the simulator had fallen behind sending
# heartbeats then (its own CPU starved: the silence was real, and the load generator's doing).
row "agents lost for silence" "$(grep -c 'agent lost' "$BENCH_DIR/$SCENARIO-coordinator.log" || true)" "" \
  "simulators sent $(total late_heartbeats) heartbeats ≥ 1 s late, the latest $(most late_heartbeat_max_ms) ms"
