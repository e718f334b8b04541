#!/usr/bin/env bash
# Coordinator restart with BENCH_COUNT agents connected and a campaign running: once a third of
# its jobs are done (2 a host, each taking BENCH_JOB_DELAY, default 2s) the coordinator is
# killed (SIGKILL) and started again on the same port. Rows: time until every agent is back,
# the peak rate of reconnections (the agents' backoff with full jitter should spread the herd),
# the window over which they came back and how many came back in each second of it, the
# failed attempts meanwhile, and that nothing was lost: the campaign finishes with every job
# done, none failed, each with exactly one result.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

db=bench_restart
url=$(fresh_db $db)
coord_start "$url"
sim_start "$BENCH_COUNT" --ramp 0s --job-delay "${BENCH_JOB_DELAY:-2s}"
wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
sleep 2
connected=$(sim_stat connected)
id=$(campaign_start "${BENCH_SUITE:-$RESTART_CAMPAIGN}")
jobs=$(psql_db $db "SELECT count(*) FROM jobs WHERE campaign_id = $id")
wait_jobs_done $db "$id" $(( jobs / 3 )) || log "fewer than a third of the jobs done in $BENCH_INGEST_LIMIT s"
read -r done_at_kill _ _ < <(jobs_by_status $db "$id")
port=$GRPC
coord_kill
log "coordinator killed with $connected agents connected, $done_at_kill of $jobs jobs done"
wait_stat_below() { # until connected drops to 0 (the simulator saw the streams break)
  for _ in $(seq 100); do [ "$(sim_stat connected)" -eq 0 ] && return 0; sleep 0.2; done; return 1
}
wait_stat_below || true
before=$(sim_stat sessions)
errors_before=$(sim_stat errors)
t0=$(now)
coord_start "$url" "$port"
# Follow the reconnections second by second.
peak=0 prev=$before first="" last="" back="" per_second=()
deadline=$(( $(date +%s) + BENCH_CONNECT_LIMIT ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 1
  cur=$(sim_stat sessions)
  delta=$(( cur - prev )); prev=$cur
  per_second+=("$delta")
  [ "$delta" -gt "$peak" ] && peak=$delta
  [ "$delta" -gt 0 ] && { [ -n "$first" ] || first=$(since "$t0"); last=$(since "$t0"); }
  if [ "$(sim_stat connected)" -ge "$connected" ]; then back=$(since "$t0"); break; fi
done
row "all $connected agents back after" "${back:-timeout}" s "$(sim_stat connected) connected; from the restart, which takes a moment itself"
row "peak reconnections" "$peak" "/s"
row "reconnection window" "${first:-?} – ${last:-?}" s "per second: ${per_second[*]:0:30}"
row "failed attempts while down and back" "$(( $(sim_stat errors) - errors_before ))" "" "refused hosts $(sim_stat refused)"

t1=$(now)
campaign_rest_rows $db "$id" "$jobs" "$t1" "$jobs jobs, $done_at_kill done at the kill" " (above 1: dispatched again after the restart)"
