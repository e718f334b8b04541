#!/usr/bin/env bash
# Coordinator restart with BENCH_COUNT agents connected: the coordinator is killed (SIGKILL)
# and started again on the same port. Rows: time until every agent is back, the peak rate of
# reconnections (the simulator's backoff with full jitter should spread the herd), the
# window over which they came back, and the sessions refused meanwhile.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

url=$(fresh_db bench_restart)
coord_start "$url"
sim_start "$BENCH_COUNT" --ramp 0s
wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
sleep 2
port=$GRPC
coord_kill
wait_stat_below() { # until connected drops to 0 (the simulator saw the streams break)
  for _ in $(seq 100); do [ "$(sim_stat connected)" -eq 0 ] && return 0; sleep 0.2; done; return 1
}
wait_stat_below || true
before=$(sim_stat sessions)
errors_before=$(sim_stat errors)
t0=$(now)
coord_start "$url" "$port"
# Follow the reconnections second by second.
peak=0 prev=$before first="" last="" back=""
deadline=$(( $(date +%s) + BENCH_CONNECT_LIMIT ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 1
  cur=$(sim_stat sessions)
  delta=$(( cur - prev )); prev=$cur
  [ "$delta" -gt "$peak" ] && peak=$delta
  [ "$delta" -gt 0 ] && { [ -n "$first" ] || first=$(since "$t0"); last=$(since "$t0"); }
  if [ "$(sim_stat connected)" -ge "$BENCH_COUNT" ]; then back=$(since "$t0"); break; fi
done
row "all $BENCH_COUNT agents back after" "${back:-timeout}" s "$(sim_stat connected) connected"
row "peak reconnections" "$peak" "/s"
row "reconnection window" "${first:-?} – ${last:-?}" s "after the restart"
row "failed attempts while down and back" "$(( $(sim_stat errors) - errors_before ))" "" "refused hosts $(sim_stat refused)"
