#!/usr/bin/env bash
# Times migration 0040 (results partitioned by week) on a table of stored results, the
# upgrade's cost: it rebuilds the present table's primary key and an index on job_id under its
# lock, so results wait that long to be stored. Loads migrations 0001–0039 into a private
# PostgreSQL cluster in a temporary directory, then COUNT synthetic results (one host, a 2 KB
# measurement document each, created over 90 days), then times
# `psql -1 -f migrations/0040_results_partitioned.sql` and prints it with the table's size.
# Then migration 0041 (the default partition): COUNT more results stored over the next four
# weeks while no week was made ahead, as after a rollback past them, wait there; it times the
# next coordinator's making of the weeks (functions/cipherfleet_results_weeks.sql), which moves
# them into theirs, and which a coordinator does at start.
# Needs PostgreSQL's server binaries (PG_BIN, default /usr/lib/postgresql/15/bin); as root, runs
# the cluster as the `postgres` user. Figures: docs/performance.md, "A year of history under retention".
# Usage: deploy/bench-partition-migration.sh [COUNT]   (default 1000000; about 2 GB of TMPDIR)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-1000000}
case "$count" in ''|*[!0-9]*) echo "bench-partition-migration.sh: COUNT must be a number of results, not '$count'" >&2; exit 2 ;; esac
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
dir=$(mktemp -d)
as=()
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as=(runuser -u postgres --); fi
"${as[@]}" "$pg_bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
"${as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -o "-k $dir -c listen_addresses= -p 5433" -l "$dir/log" -w start >/dev/null
trap '"${as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null; rm -rf "$dir"' EXIT
psql() { command psql -h "$dir" -p 5433 -U postgres -d postgres -v ON_ERROR_STOP=1 -q "$@"; }
for f in migrations/00[0-3][0-9]_*.sql; do psql -f "$f" >/dev/null; done
# store FIRST CREATED_AT: COUNT synthetic results of jobs FIRST+1.. FIRST+COUNT, created at the
# SQL expression CREATED_AT, each with its job (done).
store() {
  psql -v count="$count" -v first="$1" <<SQL
INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads,
        key_mode, path, time_limit_seconds, status)
    SELECT (SELECT id FROM campaigns), (SELECT id FROM hosts), :first + g, '{}', 'aes-256-gcm',
        'encrypt', 16384, 1, 'static', 'accelerated', 60, 'done'
    FROM generate_series(1, :count) g;
INSERT INTO results (job_id, host_id, algorithm, direction, size_bytes, threads, key_mode, path,
        path_used, throughput_mb_s, ops_per_s, latency_p50_ns, latency_p90_ns, latency_p99_ns,
        latency_p999_ns, latency_max_ns, latency_method, batch_ops, samples, cpu_user_seconds,
        cpu_sys_seconds, cpu_utilization, key_setup_ns, elapsed_seconds, measurement, created_at)
    SELECT id, host_id, algorithm, direction, size_bytes, threads, key_mode, path, 'accelerated',
        1000, 1000, 1, 1, 1, 1, 1, 'per-op', 1, 20, 1, 1, 1, 1, 1,
        jsonb_build_object('pad', repeat('x', 2000)), $2
    FROM jobs WHERE position > :first;
VACUUM ANALYZE results;
SQL
}
echo "loading $count results"
psql <<'SQL'
INSERT INTO hosts (name) VALUES ('bench');
INSERT INTO campaigns (name, suite, matrix, started_by, status, finished_at)
    VALUES ('bench', 'quick', '{}', 'bench', 'finished', now());
SQL
store 0 "now() - random() * interval '90 days'"
size=$(psql -Atc "SELECT pg_size_pretty(pg_total_relation_size('results'))")
start=$(date +%s%N)
psql -1 -f migrations/0040_results_partitioned.sql >/dev/null
end=$(date +%s%N)
printf 'migration 0040 on %s results (%s): %.2f s\n' "$count" "$size" "$(( end - start ))e-9"

psql -f migrations/0041_results_later.sql >/dev/null
psql -f functions/cipherfleet_results_weeks.sql >/dev/null
echo "storing $count more results with no week made for them"
store "$count" "date_trunc('week', now(), 'UTC') + interval '1 week' + random() * interval '28 days'"
waiting=$(psql -Atc "SELECT count(*) FROM results_later")
start=$(date +%s%N)
made=$(psql -Atc "SELECT cipherfleet_results_weeks(4)")
end=$(date +%s%N)
left=$(psql -Atc "SELECT count(*) FROM results_later")
printf 'weeks made with %s results waiting in results_later: %s weeks, %.2f s; %s left there\n' \
  "$waiting" "$made" "$(( end - start ))e-9" "$left"
