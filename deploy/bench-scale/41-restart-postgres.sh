#!/usr/bin/env bash
# PostgreSQL restarted and stopped under ingest: with a third of the campaign done,
# `pg_ctl restart -m fast` (every connection of the pool cut at once); with two thirds done,
# a stop of BENCH_PG_DOWN seconds (default 10; --quick 5). Rows: the coordinator's RSS before
# and at its peak from the restart on (bounded: the ingest queue fills, sessions stop reading,
# agents keep their results spooled), how long after the database was back results were
# stored again, each time, and that the campaign then finished with every job exactly once.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

db=bench_pg_restart
down=${BENCH_PG_DOWN:-$([ "$BENCH_QUICK" = 1 ] && echo 5 || echo 10)}
coord_start "$(fresh_db $db)"
sim_start "$BENCH_COUNT" --ramp 0s --job-delay "${BENCH_JOB_DELAY:-0.5s}"
wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
t0=$(now)
id=$(campaign_start "$INGEST_CAMPAIGN")
jobs=$(psql_db $db "SELECT count(*) FROM jobs WHERE campaign_id = $id")
stored() { psql_db $db "SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.campaign_id = $id"; }
# resumed SINCE N: seconds from SINCE until more than N results are stored.
resumed() {
  local deadline=$(( $(date +%s) + BENCH_INGEST_LIMIT ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(stored 2>/dev/null || echo 0)" -gt "$2" ] && { since "$1"; return; }
    sleep 0.2
  done
  echo timeout
}
wait_jobs_done $db "$id" $(( jobs / 3 )) || log "a third of the campaign not done in time"
rss_before=$(rss_mb "$COORD_PID") sessions_before=$(sim_stat sessions)
rss_watch "$COORD_PID" "$BENCH_DIR/$SCENARIO.peak"
n=$(stored)
pg_ctl_bench -m fast -w restart
row "results stored again after a restart" "$(resumed "$(now)" "$n")" s "pg_ctl restart -m fast at $n of $jobs results"
wait_jobs_done $db "$id" $(( 2 * jobs / 3 )) || log "two thirds of the campaign not done in time"
n=$(stored)
pg_ctl_bench -m fast -w stop
sleep "$down"
pg_ctl_bench -w start
row "results stored again after a ${down} s stop" "$(resumed "$(now)" "$n")" s "stopped at $n of $jobs results"
row "coordinator RSS, before / peak from the restart on" "$rss_before / $(cat "$BENCH_DIR/$SCENARIO.peak")" MB
row "agents' new sessions" "$(( $(sim_stat sessions) - sessions_before ))" "" \
  "of $BENCH_COUNT agents; simulator errors $(sim_stat errors)"
campaign_rest_rows $db "$id" "$jobs" "$t0" "from the campaign's start" ""
