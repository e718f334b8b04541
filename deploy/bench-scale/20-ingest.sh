#!/usr/bin/env bash
# Ingest: BENCH_SUITE (default quick, 18 jobs) on every one of BENCH_COUNT agents that answer
# each job at once. Rows: how long StartCampaign takes to return, the dispatch rate (jobs
# assigned per second), the ingest rate (results stored per second), the result→ack latency
# the simulator measured, the coordinator's peak RSS, and that every done job has exactly one
# result. The campaign is given BENCH_INGEST_LIMIT seconds; the rates are of what finished.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

db=bench_ingest
coord_start "$(fresh_db $db)"
sim_start "$BENCH_COUNT" --ramp 0s --job-delay 0s
wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
t0=$(now)
id=$(campaign_start "${BENCH_SUITE:-quick}")
row "StartCampaign returns after" "$(since "$t0")" s "suite ${BENCH_SUITE:-quick}"
jobs=$(psql_db $db "SELECT count(*) FROM jobs WHERE campaign_id = $id")
if wait_campaign $db "$id" "$BENCH_INGEST_LIMIT"; then
  row "campaign of $jobs jobs done in" "$(since "$t0")" s
else
  read -r done failed left < <(jobs_by_status $db "$id")
  row "campaign of $jobs jobs done in" "timeout" s "after ${BENCH_INGEST_LIMIT} s: $done done, $failed failed, $left left"
fi
row "dispatch rate" "$(rate_of $db "SELECT assigned_at FROM jobs WHERE campaign_id = $id AND assigned_at IS NOT NULL")" "jobs/s"
row "ingest rate" "$(rate_of $db "SELECT r.created_at FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.campaign_id = $id")" "results/s" "target 20000"
row "result→ack p50 / p99 / max" "$(sim_stat ack_p50_ms) / $(sim_stat ack_p99_ms) / $(sim_stat ack_max_ms)" ms "measured by the simulator"
row "coordinator RSS, now / peak" "$(rss_mb "$COORD_PID") / $(peak_rss_mb "$COORD_PID")" MB
row "done jobs without exactly one result" "$(not_exactly_once $db "$id")" "" "must be 0"
