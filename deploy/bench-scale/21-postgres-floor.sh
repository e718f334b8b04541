#!/usr/bin/env bash
# PostgreSQL alone under ingest: the least a stored result costs the database as this schema
# keeps it, with the machine to itself. Its rate is a ceiling for 20-ingest's here, whatever
# the coordinator did. A small campaign (at most 1,000 agents, 10 jobs each) leaves real
# results; then the coordinator and the simulator stop, and pgbench stores batches as the
# ingest batch does with the coordinator's defaults (BENCH_FLOOR_BATCH results a transaction,
# default 512, in BENCH_FLOOR_CLIENTS at once, default 4): the jobs' claim (queued →
# running), the results rows (copies of the real ones: the same columns, checks, indexes and
# compression), the jobs' finish (running → done). Left out, so that it is a ceiling: the
# foreign keys and triggers (the report's aggregates), the starts, the hosts' claim locks
# and each host's search for its next job, parsing the measurement's JSON (copied already
# parsed and compressed), sessions and heartbeats, and the coordinator and simulator.
# Rows: results/s, how busy the machine was and how much it waited for the disk, the WAL
# written and PostgreSQL's CPU per result; BENCH_FLOOR_RESULTS are stored (default: 10 a
# host, as in 20-ingest's campaign, at least 20,000), rounded up to whole batches.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

db=bench_floor
batch=${BENCH_FLOOR_BATCH:-512}
clients=${BENCH_FLOOR_CLIENTS:-4}
# As many as 20-ingest's campaign stores (10 a host), into tables as empty as its are.
total=${BENCH_FLOOR_RESULTS:-$(( BENCH_COUNT * 10 > 20000 ? BENCH_COUNT * 10 : 20000 ))}
per_client=$(( (total + batch * clients - 1) / (batch * clients) ))
total=$(( per_client * batch * clients ))

# Real results to copy: a campaign on a small fleet.
agents=$(( BENCH_COUNT < 1000 ? BENCH_COUNT : 1000 ))
coord_start "$(fresh_db $db)"
sim_start "$agents" --ramp 0s --job-delay 0s
wait_stat connected "$agents" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
id=$(campaign_start "$INGEST_CAMPAIGN")
wait_campaign $db "$id" "$BENCH_INGEST_LIMIT" || log "campaign $id not finished: copying what it stored"
cleanup_scenario
PIDS=()

# Every column but those the floor sets itself, as the schema has them now.
columns() {
  psql_db $db "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)
               FROM information_schema.columns
               WHERE table_schema = 'public' AND table_name = '$1' AND column_name <> ALL ('{$2}')"
}
job_cols=$(columns jobs "id,campaign_id,host_id,position,status,attempts,created_at,assigned_at,started_at,finished_at,deadline,error,attempt_id")
result_cols=$(columns results "id,job_id,created_at")
samples=$(psql_db $db "SELECT count(*) FROM results")
[ "$samples" -gt 0 ] || { log "the campaign stored no result to copy"; exit 1; }
# The jobs, one campaign on 10,000 hosts as in 20-ingest; the results' and jobs' copies keep
# every index, check and default (LIKE … INCLUDING ALL) but no foreign key or trigger.
psql_db $db "
  CREATE TABLE floor_results (LIKE results INCLUDING ALL);
  CREATE TABLE floor_jobs (LIKE jobs INCLUDING ALL);
  CREATE TABLE floor_sample AS SELECT (row_number() OVER (ORDER BY id) - 1)::int AS k, * FROM results;
  CREATE UNIQUE INDEX ON floor_sample (k);
  CREATE TABLE floor_job_sample AS SELECT (row_number() OVER (ORDER BY id) - 1)::int AS k, * FROM jobs;
  INSERT INTO floor_jobs (campaign_id, host_id, position, $job_cols)
    SELECT 0, g % 10000, g, $job_cols FROM generate_series(0, $total - 1) g
    JOIN floor_job_sample j ON j.k = g % (SELECT count(*) FROM floor_job_sample);
  CREATE SEQUENCE floor_batch;" >/dev/null
psql_db $db "VACUUM ANALYZE floor_jobs, floor_sample" >/dev/null
psql_db $db "CHECKPOINT" >/dev/null

range="campaign_id = 0 AND position >= :b * $batch AND position < (:b + 1) * $batch"
cat >"$BENCH_DIR/$SCENARIO.sql" <<SQL
SELECT nextval('floor_batch') - 1 AS b \gset
BEGIN;
UPDATE floor_jobs SET status = 'running', assigned_at = now(),
    deadline = now() + time_limit_seconds * interval '1 second', attempt_id = gen_random_uuid()
  WHERE $range AND status = 'queued';
INSERT INTO floor_results (job_id, $result_cols)
  SELECT j.id, $(sed -E 's/([a-z_][a-z0-9_]*)/s.\1/g; s/s\.host_id/j.host_id/' <<<"$result_cols")
  FROM floor_jobs j JOIN floor_sample s ON s.k = j.position % $samples WHERE j.$range;
UPDATE floor_jobs SET status = 'done', finished_at = now() WHERE $range AND status = 'running';
COMMIT;
SQL
n0=$(pg_processes); p0=$(pg_ticks); w0=$(wal_lsn $db); m0=$(machine_ticks); t0=$(now)
"$BENCH_PG_BIN/pgbench" -n -h "$BENCH_PG_SOCKET" -p "$BENCH_PG_PORT" -U "$BENCH_PG_USER" \
  -c "$clients" -j "$clients" -t "$per_client" -f "$BENCH_DIR/$SCENARIO.sql" $db >"$BENCH_DIR/$SCENARIO.pgbench" 2>&1 ||
  { cat "$BENCH_DIR/$SCENARIO.pgbench" >&2; exit 1; }
seconds=$(since "$t0"); m1=$(machine_ticks); w1=$(wal_lsn $db); pg_reaped "$n0"; p1=$(pg_ticks)
cat "$BENCH_DIR/$SCENARIO.pgbench" >&2
stored=$(psql_db $db "SELECT count(*) FROM floor_results")
done_jobs=$(psql_db $db "SELECT count(*) FROM floor_jobs WHERE status = 'done'")
row "results stored / jobs done" "$stored / $done_jobs" "" "must be $total / $total (copies of $samples real results)"
row "rate, PostgreSQL alone" "$(awk -v n="$stored" -v s="$seconds" 'BEGIN { printf "%.0f", n / s }')" "results/s" \
  "ceiling for 20-ingest here (target 20000): $clients × $batch a transaction, $(nproc) cores"
row "machine busy / waiting for the disk" "$(machine_split "$m0" "$m1")" "% of all cores" \
  "over $seconds s; load $(cut -d' ' -f1-3 /proc/loadavg)"
row "WAL per result, PostgreSQL alone" "$(wal_per $db "$w0" "$w1" "$stored")" "bytes" \
  "$(wal_rate $db "$w0" "$w1" "$seconds") MB/s of WAL"
row "CPU per result, PostgreSQL alone" "$(awk -v n="$stored" -v p=$((p1 - p0)) -v hz="$HZ" \
  'BEGIN { printf "%.0f", 1e6 * p / hz / (n > 0 ? n : 1) }')" "µs" \
  "$(awk -v p=$((p1 - p0)) -v hz="$HZ" -v s="$seconds" 'BEGIN { printf "%.0f", 100 * p / hz / s }') % of a core over $seconds s"
