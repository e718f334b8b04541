#!/usr/bin/env bash
# Ingest: a campaign of 10 jobs a host (lib.sh's TEN_JOBS, or BENCH_SUITE) on every one of
# BENCH_COUNT agents that answer each job at once. Rows: how long StartCampaign takes to return, the dispatch rate (jobs
# assigned per second), the ingest rate (results stored per second), the result→ack latency
# the simulator measured, the coordinator's peak RSS, and that every done job has exactly one
# result. The campaign is given BENCH_INGEST_LIMIT seconds; the rates are of what finished.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

db=bench_ingest
coord_start "$(fresh_db $db)"
# With pg_stat_statements preloaded (BENCH_PG_CONF), where the database's time went, to the log.
top_statements() {
  psql_db $db "SELECT round(total_exec_time::numeric) AS ms, calls, rows,
                      left(regexp_replace(query, '\s+', ' ', 'g'), 160)
               FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$db')
               ORDER BY total_exec_time DESC LIMIT 15" >&2 || true
}
statements=$(psql_db $db "SELECT count(*) FROM pg_settings WHERE name = 'shared_preload_libraries'
                            AND setting LIKE '%pg_stat_statements%'")
if [ "$statements" = 1 ]; then
  psql_db $db "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
  trap 'top_statements; cleanup_scenario' EXIT
fi
sim_start "$BENCH_COUNT" --ramp 0s --job-delay 0s
wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
[ "$statements" = 1 ] && psql_db $db "SELECT pg_stat_statements_reset()" >/dev/null
t0=$(now)
id=$(campaign_start "$INGEST_CAMPAIGN")
row "StartCampaign returns after" "$(since "$t0")" s "suite ${BENCH_SUITE:-of 10 points}"
jobs=$(psql_db $db "SELECT count(*) FROM jobs WHERE campaign_id = $id")
hosts=$(psql_db $db "SELECT count(DISTINCT host_id) FROM jobs WHERE campaign_id = $id")
if wait_campaign $db "$id" "$BENCH_INGEST_LIMIT"; then
  row "campaign of $jobs jobs on $hosts hosts done in" "$(since "$t0")" s
else
  read -r done failed left < <(jobs_by_status $db "$id")
  row "campaign of $jobs jobs on $hosts hosts done in" "timeout" s "after ${BENCH_INGEST_LIMIT} s: $done done, $failed failed, $left left"
fi
row "dispatch rate" "$(rate_of $db "SELECT assigned_at FROM jobs WHERE campaign_id = $id AND assigned_at IS NOT NULL")" "jobs/s"
row "ingest rate" "$(rate_of $db "SELECT r.created_at FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.campaign_id = $id")" "results/s" "target 20000"
row "result→ack p50 / p99 / max" "$(sim_stat ack_p50_ms) / $(sim_stat ack_p99_ms) / $(sim_stat ack_max_ms)" ms "measured by the simulator"
row "coordinator RSS, now / peak" "$(rss_mb "$COORD_PID") / $(peak_rss_mb "$COORD_PID")" MB
row "done jobs without exactly one result" "$(not_exactly_once $db "$id")" "" "must be 0"
