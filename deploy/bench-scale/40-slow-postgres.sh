#!/usr/bin/env bash
# Slow PostgreSQL under ingest: a trigger sleeps BENCH_PG_SLEEP (default 0.2 s) in every
# result insert while the campaign runs, then is dropped. Rows: the coordinator's RSS before
# and at its peak (it must stay bounded: backpressure reaches the agents, which keep their
# results), the ingest rate while slowed, and that nothing was lost or stored twice once
# the campaign finished.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

db=bench_slow
slow=$([ "$BENCH_QUICK" = 1 ] && echo 15 || echo 60)
coord_start "$(fresh_db $db)"
sim_start "$BENCH_COUNT" --ramp 0s --job-delay 0s
wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
psql_db $db "CREATE FUNCTION bench_slow() RETURNS trigger LANGUAGE plpgsql AS
               \$\$ BEGIN PERFORM pg_sleep(${BENCH_PG_SLEEP:-0.2}); RETURN NEW; END \$\$;
             CREATE TRIGGER bench_slow BEFORE INSERT ON results FOR EACH ROW EXECUTE FUNCTION bench_slow();" >/dev/null
rss_before=$(rss_mb "$COORD_PID")
# StartCampaign waits on the slowed database too: started aside, its campaign row is there first.
campaign_start "$INGEST_CAMPAIGN" >"$BENCH_DIR/$SCENARIO.campaign" &
starter=$!
id=""
for _ in $(seq 300); do
  id=$(psql_db $db "SELECT max(id) FROM campaigns")
  [ -n "$id" ] && break
  sleep 0.2
done
peak=$rss_before
for _ in $(seq "$slow"); do sleep 1; r=$(rss_mb "$COORD_PID"); [ "$r" -gt "$peak" ] && peak=$r; done
stored=$(psql_db $db "SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.campaign_id = $id")
psql_db $db "DROP TRIGGER bench_slow ON results" >/dev/null
slowed_rate=$(awk -v n="$stored" -v s="$slow" 'BEGIN { printf "%.0f", n / s }')
wait "$starter" || log "StartCampaign failed"
jobs=$(psql_db $db "SELECT count(*) FROM jobs WHERE campaign_id = $id")
row "coordinator RSS, before / peak while slowed" "$rss_before / $peak" MB "${slow} s at ${BENCH_PG_SLEEP:-0.2} s a result insert"
row "ingest while slowed" "$slowed_rate" "results/s" "$stored of $jobs stored in the ${slow} s"
row "simulator: results sent / acked" "$(sim_stat results) / $(sim_stat acked)" "" "errors $(sim_stat errors)"
if wait_campaign $db "$id" "$BENCH_INGEST_LIMIT"; then
  row "campaign done after the slowdown" yes "" "$jobs jobs"
else
  read -r done failed left < <(jobs_by_status $db "$id")
  row "campaign done after the slowdown" "timeout" "" "$done done, $failed failed, $left left"
fi
row "done jobs without exactly one result" "$(not_exactly_once $db "$id")" "" "must be 0"
row "failed jobs" "$(jobs_by_status $db "$id" | awk '{ print $2 }')" "" "lost results would show here"
