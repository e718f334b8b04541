#!/usr/bin/env bash
# Connect storm: BENCH_COUNT simulated agents dial at once. Rows: time until all are
# connected, the peak rate of new sessions, the coordinator's RSS with all connected, its
# CPU while they only send heartbeats, and the simulator's memory per simulated agent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

idle=$([ "$BENCH_QUICK" = 1 ] && echo 10 || echo 30)
coord_start "$(fresh_db bench_connect)"
rss_before=$(rss_mb "$COORD_PID")
sim_start "$BENCH_COUNT" --ramp 0s
if wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT"; then
  row "connect all ($BENCH_COUNT agents)" "$(sim_stat connect_all_s)" s
else
  row "connect all ($BENCH_COUNT agents)" "timeout" s "$(sim_stat connected) connected after ${BENCH_CONNECT_LIMIT} s; refused $(sim_stat refused), last error in $SCENARIO-sim.log"
fi
row "peak new sessions" "$(sim_stat peak_connects_per_s)" "/s"
row "coordinator RSS, idle / all connected" "$rss_before / $(rss_mb "$COORD_PID")" MB "peak $(peak_rss_mb "$COORD_PID") MB"
sleep 2
row "coordinator CPU, heartbeats only" "$(cpu_percent "$COORD_PID" "$idle")" "% of a core" \
  "${idle} s, heartbeat ${BENCH_HEARTBEAT:-5} s: $(awk -v n="$(sim_stat connected)" -v h="${BENCH_HEARTBEAT:-5}" 'BEGIN { printf "%.0f", n / h }') heartbeats/s"
sim_rss=$(rss_mb "$SIM_PID")
row "simulator RSS" "$sim_rss" MB "$(awk -v r="$sim_rss" -v n="$BENCH_COUNT" 'BEGIN { printf "%.1f", r * 1024 / n }') KB per simulated agent"
row "session errors" "$(sim_stat errors)" "" "refused $(sim_stat refused)"
