#!/usr/bin/env bash
# Two coordinators sharing one PostgreSQL, BENCH_COUNT simulated agents spread over them (each
# simulated host dials the first or the second coordinator first, by its index, and knows both),
# and a campaign (BENCH_SUITE, started through the first) running with jobs of
# BENCH_JOB_DELAY (default 0.5s). Once a third of its jobs are done the second coordinator is
# SIGKILLed. Rows: how the agents were spread, the time from the kill until the survivor holds
# the lease of every agent (target 30 s; the dead one's leases live 3 heartbeats), and that
# every job ran exactly once: each done job has one result, none is lost (all done, none
# failed), and how many RunJobs the agents accepted per job (above 1: some were dispatched again).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

db=bench_two
url=$(fresh_db $db)
coord_start "$url"
first_pid=$COORD_PID first=$GRPC
coord_start "$url"
second_pid=$COORD_PID second=$GRPC
GRPC=$first
sim_start "$BENCH_COUNT" --ramp 0s --job-delay "${BENCH_JOB_DELAY:-0.5s}" --coordinator "http://$second"
wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
connected=$(sim_stat connected)
hostname=$(cat /proc/sys/kernel/hostname)
# leases_of PID: the live leases of welcomed sessions that coordinator holds.
leases_of() {
  psql_db $db "SELECT count(*) FROM host_leases
               WHERE coordinator_name = '$hostname/$1' AND expires_at > now() AND welcomed"
}
row "agents on first / second" "$(leases_of "$first_pid") / $(leases_of "$second_pid")" "" \
  "$connected of $BENCH_COUNT connected"

id=$(campaign_start "${BENCH_SUITE:-quick}")
jobs=$(psql_db $db "SELECT count(*) FROM jobs WHERE campaign_id = $id")
wait_jobs_done $db "$id" $(( jobs / 3 )) || log "fewer than a third of the jobs done in $BENCH_INGEST_LIMIT s"
read -r done_at_kill _ left_at_kill < <(jobs_by_status $db "$id")
# Every agent connected at the kill, wherever: what the survivor must end up holding.
on_second=$(leases_of "$second_pid")
at_kill=$(( $(leases_of "$first_pid") + on_second ))
COORD_PID=$second_pid
t0=$(now)
coord_kill
log "second coordinator killed with $done_at_kill of $jobs jobs done, $left_at_kill left"
moved=""
limit=$(( BENCH_QUICK == 1 ? 60 : 120 ))
shown=0
while [ "$(since "$t0" | cut -d. -f1)" -lt "$limit" ]; do
  held=$(leases_of "$first_pid")
  if [ "$held" -ge "$at_kill" ]; then moved=$(since "$t0"); break; fi
  # Progress every 5 s: how many the survivor holds so far.
  if [ "$(since "$t0" | cut -d. -f1)" -ge $(( shown + 5 )) ]; then
    shown=$(( shown + 5 )); log "after ${shown} s the survivor holds $held of $at_kill"
  fi
  sleep 0.2
done
row "all $at_kill agents on the survivor after" "${moved:-timeout}" s \
  "target 30; $on_second moved; lease ${BENCH_HEARTBEAT:-5} s × 3; $done_at_kill of $jobs jobs done at the kill"

t1=$(now)
campaign_rest_rows $db "$id" "$jobs" "$t1" "$jobs jobs" ""
row "survivor RSS, now / peak" "$(rss_mb "$first_pid") / $(peak_rss_mb "$first_pid")" MB
