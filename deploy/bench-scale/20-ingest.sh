#!/usr/bin/env bash
# Ingest: a campaign of 10 jobs a host (lib.sh's TEN_JOBS, or BENCH_SUITE) on every one of
# BENCH_COUNT agents that answer each job at once. Rows: how long StartCampaign takes to return, the dispatch rate (jobs
# assigned per second), the ingest rate (results stored per second), the result→ack latency
# the simulator measured, the CPU the coordinator, PostgreSQL and the simulator used meanwhile
# (which one limits) and the WAL PostgreSQL wrote per result, the coordinator's peak RSS,
# and that every done job has exactly one result. The campaign is given BENCH_INGEST_LIMIT
# seconds; the rates are of what finished.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

db=bench_ingest
coord_start "$(fresh_db $db)"
# history WEEKS ROWS: WEEKS past weeks of ROWS results each, in their week partitions, and the
# present week's partition (in place of results_before, which holds it on a fresh database).
history() {
  psql_db $db "DO \$\$ DECLARE week timestamptz; first timestamptz; BEGIN
      ALTER TABLE results_raw DETACH PARTITION results_before; DROP TABLE results_before;
      SELECT min((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz)
        INTO first FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = 'results_raw'::regclass;
      week := first - ($1 + 1) * interval '1 week';
      WHILE week < first LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF results_raw FOR VALUES FROM (%L) TO (%L)',
          'results_' || to_char(week AT TIME ZONE 'UTC', 'YYYYMMDD'), week, week + interval '1 week');
        week := week + interval '1 week';
      END LOOP; END \$\$" >/dev/null
  psql_db $db "INSERT INTO hosts (name) VALUES ('history');
    INSERT INTO campaigns (name, suite, matrix, started_by, status, finished_at)
      VALUES ('history', 'quick', '{}', 'bench', 'finished', now())" >/dev/null
  local n=$(( $1 * $2 ))
  psql_db $db "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes,
        threads, key_mode, path, time_limit_seconds, status)
      SELECT (SELECT id FROM campaigns WHERE name = 'history'), (SELECT id FROM hosts WHERE name = 'history'),
        g, '{}', 'aes-256-gcm', 'encrypt', 16384, 1, 'static', 'accelerated', 60, 'done'
      FROM generate_series(1, $n) g" >/dev/null
  psql_db $db "INSERT INTO results (job_id, host_id, algorithm, direction, size_bytes, threads, key_mode, path,
        path_used, throughput_mb_s, ops_per_s, latency_p50_ns, latency_p90_ns, latency_p99_ns, latency_p999_ns,
        latency_max_ns, latency_method, batch_ops, samples, cpu_user_seconds, cpu_sys_seconds, cpu_utilization,
        key_setup_ns, elapsed_seconds, measurement, created_at)
      SELECT j.id, j.host_id, j.algorithm, j.direction, j.size_bytes, j.threads, j.key_mode, j.path, 'accelerated',
        1000, 1000, 1, 1, 1, 1, 1, 'per-op', 1, 20, 1, 1, 1, 1, 1, jsonb_build_object('pad', repeat('x', 2000)),
        date_trunc('week', now(), 'UTC') - (j.position - 0.5) * interval '1 week' * $1 / $n
      FROM jobs j JOIN campaigns c ON c.id = j.campaign_id WHERE c.name = 'history'" >/dev/null
  psql_db $db "VACUUM ANALYZE" >/dev/null
}
history_weeks=${BENCH_HISTORY_WEEKS:-0}
if [ "$history_weeks" -gt 0 ]; then
  t=$(now)
  history "$history_weeks" "${BENCH_HISTORY_ROWS:-50000}"
  log "history: $history_weeks weeks of ${BENCH_HISTORY_ROWS:-50000} results laid out in $(since "$t") s"
fi
# A variant of the schema beside the build's own, to compare the two with one binary; SQL
# that fails ends the scenario (an `if`, not `&&`, so that `set -e` sees it).
if [ -n "${BENCH_SETUP_SQL:-}" ]; then
  psql_db $db "$BENCH_SETUP_SQL" >/dev/null
fi
leaves=$(psql_db $db "SELECT count(*) FROM pg_partition_tree('results') WHERE isleaf")
# With pg_stat_statements preloaded (BENCH_PG_CONF), where the database's time went, to the log.
top_statements() {
  psql_db $db "SELECT round(total_exec_time::numeric) AS ms, calls, rows,
                      left(regexp_replace(query, '\s+', ' ', 'g'), ${BENCH_STATEMENT_CHARS:-160})
               FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$db')
               ORDER BY total_exec_time DESC LIMIT ${BENCH_STATEMENTS:-15}" >&2 || true
}
statements=$(psql_db $db "SELECT count(*) FROM pg_settings WHERE name = 'shared_preload_libraries'
                            AND setting LIKE '%pg_stat_statements%'")
if [ "$statements" = 1 ]; then
  psql_db $db "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
  trap 'top_statements; cleanup_scenario' EXIT
fi
sim_start "$BENCH_COUNT" --ramp 0s --job-delay 0s
wait_stat connected "$BENCH_COUNT" "$BENCH_CONNECT_LIMIT" || log "only $(sim_stat connected) connected"
# Campaigns of the same points first (BENCH_WARM_CAMPAIGNS): every point's latest row then exists,
# as in a fleet watched for a while, and the measured campaign updates those rows.
warm=${BENCH_WARM_CAMPAIGNS:-0}
for ((i = 1; i <= warm; i++)); do
  t=$(now)
  warm_id=$(campaign_start "$INGEST_CAMPAIGN")
  if wait_campaign $db "$warm_id" "$BENCH_INGEST_LIMIT"; then
    log "warm-up campaign $i of $warm done in $(since "$t") s"
  else
    log "warm-up campaign $i of $warm not done in $BENCH_INGEST_LIMIT s"
  fi
done
[ "$statements" = 1 ] && psql_db $db "SELECT pg_stat_statements_reset()" >/dev/null
# With log_statement_stats on (BENCH_PG_CONF), each statement's CPU over the campaign, to the log.
stats=$(psql_db $db "SHOW log_statement_stats")
[ "$stats" = on ] && log_from=$(stat -c %s "$BENCH_DIR/postgres.log")
# What each part used while the campaign ran, to say which one limits the rates.
ticks0="$(cpu_ticks "$COORD_PID") $(cpu_ticks "$SIM_PID") $(pg_ticks)"
w0=$(wal_lsn $db)
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
read -r c0 s0 p0 <<<"$ticks0"
ticks="$(cpu_ticks "$COORD_PID") $(cpu_ticks "$SIM_PID") $(pg_ticks)"
read -r c1 s1 p1 <<<"$ticks"
w1=$(wal_lsn $db); seconds=$(since "$t0")
row "CPU coordinator / PostgreSQL / simulator" "$(awk -v t="$seconds" -v hz="$HZ" -v c=$((c1 - c0)) -v p=$((p1 - p0)) \
  -v s=$((s1 - s0)) 'BEGIN { printf "%.0f / %.0f / %.0f", 100 * c / hz / t, 100 * p / hz / t, 100 * s / hz / t }')" \
  "% of a core" "over the campaign, $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
stored=$(psql_db $db "SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.campaign_id = $id")
# The same CPU per stored result: far less sensitive to the shared machine's load than the rates.
row "CPU per result coordinator / PostgreSQL / simulator" "$(awk -v hz="$HZ" -v n="$stored" -v c=$((c1 - c0)) \
  -v p=$((p1 - p0)) -v s=$((s1 - s0)) 'BEGIN { n = n > 0 ? n : 1; f = 1e6 / hz / n
    printf "%.0f / %.0f / %.0f", c * f, p * f, s * f }')" "µs" "$stored results; 20,000/s on $(nproc) cores leaves $((1000000 * $(nproc) / 20000)) µs for all three"
[ "$stats" = on ] && tail -c +$((log_from + 1)) "$BENCH_DIR/postgres.log" \
  | python3 "$(dirname "$0")/statement-cpu.py" "$stored" "${BENCH_STATEMENTS:-15}" >&2
row "WAL per result" "$(wal_per $db "$w0" "$w1" "$stored")" bytes "$(wal_rate $db "$w0" "$w1" "$seconds") MB/s of WAL over the campaign (21-postgres-floor: the least)"
row "stored per result, row / its measurement" "$(psql_db $db "SELECT round(avg(pg_column_size(r.*))) || ' / ' || round(avg(pg_column_size(r.measurement))) FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.campaign_id = $id")" bytes "as PostgreSQL keeps them, compressed where it compressed"
row "dispatch rate" "$(rate_of $db "SELECT assigned_at FROM jobs WHERE campaign_id = $id AND assigned_at IS NOT NULL")" "jobs/s"
row "ingest rate" "$(rate_of $db "SELECT r.created_at FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.campaign_id = $id")" "results/s" "target 20000"
row "result→ack p50 / p99 / max" "$(sim_stat ack_p50_ms) / $(sim_stat ack_p99_ms) / $(sim_stat ack_max_ms)" ms "measured by the simulator"
row "coordinator RSS, now / peak" "$(rss_mb "$COORD_PID") / $(peak_rss_mb "$COORD_PID")" MB
row "done jobs without exactly one result" "$(not_exactly_once $db "$id")" "" "must be 0"
row "partitions of results" "$leaves" "" "$history_weeks past weeks of ${BENCH_HISTORY_ROWS:-50000} results laid out first (BENCH_HISTORY_WEEKS)"
row "campaigns of the same points before it" "$warm" "" "the latest points updated rather than inserted when above 0 (BENCH_WARM_CAMPAIGNS)"
