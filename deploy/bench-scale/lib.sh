# Helpers for the scenarios of deploy/bench-scale.sh (sourced by each scenario; see the
# format and the environment at the top of bench-scale.sh). Every process a scenario starts
# through these helpers is stopped when the scenario exits.
# shellcheck shell=bash

: "${BENCH_DIR:?run the scenarios through deploy/bench-scale.sh}"
BIN=${BENCH_BIN:?}
SCENARIO=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
PIDS=()
HZ=$(getconf CLK_TCK)

cleanup_scenario() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  # Up to 10 s each: a coordinator waits 5 s for agent streams to close (SHUTDOWN_GRACE), then
  # writes its last marks; killed earlier, it showed as "Killed" after large runs.
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}
trap cleanup_scenario EXIT

# row METRIC VALUE UNIT [NOTE]: one line of the table.
row() { printf 'ROW\t%s\t%s\t%s\t%s\t%s\n' "$SCENARIO" "$1" "$2" "$3" "${4:-}"; }
log() { printf '[%s %s] %s\n' "$(date -u +%T)" "$SCENARIO" "$*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# psql_db DB SQL: one value (or rows, tab-separated) from the private cluster.
psql_db() { psql -X -q -At -F $'\t' -h "$BENCH_PG_SOCKET" -p "$BENCH_PG_PORT" -U "$BENCH_PG_USER" -d "$1" -c "$2"; }

# pg_ctl_bench ARGS…: pg_ctl on the private cluster, as the user it runs as (e.g. `-m fast -w restart`).
pg_ctl_bench() {
  local as=(); [ -n "${BENCH_PG_AS:-}" ] && as=(runuser -u "$BENCH_PG_AS" --)
  "${as[@]}" "${BENCH_PG_BIN:?}/pg_ctl" -D "$BENCH_DIR/pg" -l "$BENCH_DIR/postgres.log" "$@" >/dev/null
}

# fresh_db NAME: an empty database; echoes its URL (the coordinator migrates it).
fresh_db() {
  psql_db postgres "DROP DATABASE IF EXISTS $1" >/dev/null
  psql_db postgres "CREATE DATABASE $1" >/dev/null
  echo "postgresql://$BENCH_PG_USER@localhost/$1?host=$BENCH_PG_SOCKET&port=$BENCH_PG_PORT"
}

# coord_start DB_URL [GRPC_ADDR] [extra serve flags…]: sets COORD_PID, GRPC (host:port), HTTP.
coord_start() {
  local url=$1 addr=${2:-127.0.0.1:0}; shift 2 || shift $#
  local out="$BENCH_DIR/$SCENARIO-coordinator.$$.$RANDOM"
  mkfifo "$out.fifo"
  CIPHERFLEET_LOG=${BENCH_COORDINATOR_LOG:-warn} "$BIN/cipherfleet-coordinator" serve \
    --grpc-listen "$addr" --http-listen 127.0.0.1:0 --database-url "$url" \
    --agent-token-file "$BENCH_DIR/agent.token" --admin-token-file "$BENCH_DIR/admin.token" \
    --heartbeat-seconds "${BENCH_HEARTBEAT:-5}" --verify-on-change=false ${BENCH_SERVE_ARGS:-} "$@" \
    >"$out.fifo" 2>>"$BENCH_DIR/$SCENARIO-coordinator.log" &
  COORD_PID=$!
  PIDS+=("$COORD_PID")
  local line
  if ! read -r -t 120 line <"$out.fifo"; then
    log "the coordinator printed no address line (see $BENCH_DIR/$SCENARIO-coordinator.log)"; return 1
  fi
  # Keep draining its stdout so it never blocks on a full pipe.
  cat "$out.fifo" >/dev/null &
  GRPC=$(tr ' ' '\n' <<<"$line" | sed -n 's/^grpc=//p')
  HTTP=$(tr ' ' '\n' <<<"$line" | sed -n 's/^http=//p')
  log "coordinator $COORD_PID: grpc=$GRPC http=$HTTP"
}

coord_kill() { kill -KILL "$COORD_PID" 2>/dev/null || true; wait "$COORD_PID" 2>/dev/null || true; }
coord_stop() { kill -TERM "$COORD_PID" 2>/dev/null || true; wait "$COORD_PID" 2>/dev/null || true; }

# sim_start COUNT [cipherfleet-sim flags…]: the simulator against $GRPC; sets SIM_PID and SIM_STATS
# (SIM_TAG, if set, tells the stats files of several simulators apart; SIM_IN_MEMORY=1 keeps
# the hosts' credentials in memory instead of files, each written with fsyncs, twice).
sim_start() {
  local count=$1; shift
  SIM_STATS="$BENCH_DIR/$SCENARIO-sim${SIM_TAG:-}.stats"
  rm -f "$SIM_STATS"
  local state=(--state-dir "$BENCH_DIR/$SCENARIO-sim-state")
  [ "${SIM_IN_MEMORY:-0}" = 1 ] && state=()
  CIPHERFLEET_LOG=${BENCH_SIMULATOR_LOG:-error} "$BIN/cipherfleet-sim" \
    --coordinator "http://$GRPC" --token-file "$BENCH_DIR/agent.token" \
    --count "$count" "${state[@]}" --stats-file "$SIM_STATS" \
    --progress 10s ${BENCH_SIM_ARGS:-} "$@" 2>>"$BENCH_DIR/$SCENARIO-sim.log" &
  SIM_PID=$!
  PIDS+=("$SIM_PID")
}

# sim_stat KEY: the simulator's latest value of KEY (its --stats-file), 0 before the first.
sim_stat() {
  [ -f "$SIM_STATS" ] || { echo 0; return; }
  tr ' ' '\n' <"$SIM_STATS" | sed -n "s/^$1=//p" | head -1
}

# wait_stat KEY MIN SECONDS: until the simulator's KEY reaches MIN; 1 on timeout.
wait_stat() {
  local deadline=$(( $(date +%s) + $3 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(sim_stat "$1" | cut -d. -f1)" -ge "$2" ] 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# rss_mb PID / peak_rss_mb PID: resident set now / its peak, in MB.
rss_mb() { awk '/^VmRSS:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$1/status"; }
peak_rss_mb() { awk '/^VmHWM:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$1/status"; }
# rss_watch PID FILE: from now on, FILE holds the largest RSS of PID seen (every 0.5 s), in MB.
rss_watch() {
  ( local peak=0 r
    while r=$(rss_mb "$1" 2>/dev/null) && [ -n "$r" ]; do
      [ "$r" -gt "$peak" ] && { peak=$r; echo "$peak" >"$2"; }
      sleep 0.5
    done ) &
  PIDS+=("$!")
}
# cpu_ticks PID: user + system time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# pg_ticks: the same of the private cluster: its postmaster with the children it reaped
# (cutime, cstime) and those still running.
pg_ticks() {
  local pm; pm=$(head -1 "$BENCH_DIR/pg/postmaster.pid")
  { awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat"
    for child in $(pgrep -P "$pm"); do cpu_ticks "$child" 2>/dev/null || true; done; } | awk '{ s += $1 } END { print s }'
}
# machine_ticks: "busy iowait all" of every core so far (/proc/stat), in clock ticks;
# machine_split BEFORE AFTER: the busy and iowait shares between two, in % of all cores.
machine_ticks() { awk '/^cpu / { busy = $2 + $3 + $4 + $7 + $8 + $9; all = busy + $5 + $6; print busy, $6, all }' /proc/stat; }
machine_split() {
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); all = y[3] - x[3]; all = all > 0 ? all : 1
    printf "%.0f / %.0f", 100 * (y[1] - x[1]) / all, 100 * (y[2] - x[2]) / all }'
}
# pg_reaped N: waits (at most 5 s) until the cluster has at most N processes again, so that
# the CPU of the backends of clients that just left is in pg_ticks (the postmaster's cutime)
# rather than in neither (exited, not yet reaped).
# pg_processes: how many the cluster has now.
pg_reaped() {
  for _ in $(seq 50); do [ "$(pg_processes)" -le "$1" ] && return 0; sleep 0.1; done
  log "PostgreSQL still has $(pg_processes) processes (had $1): CPU figures may miss some"
}
pg_processes() { pgrep -c -P "$(head -1 "$BENCH_DIR/pg/postmaster.pid")"; }
# cpu_percent PID SECONDS: CPU of PID over the next SECONDS, in % of one core.
cpu_percent() {
  local a b; a=$(cpu_ticks "$1"); sleep "$2"; b=$(cpu_ticks "$1")
  awk -v a="$a" -v b="$b" -v s="$2" -v hz="$HZ" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / s }'
}

# The campaign of the ingest scenarios: 10 jobs a host (5 algorithms × 2 sizes, encrypt, one
# thread, accelerated), the issue's target. BENCH_SUITE, a suite name or a matrix in JSON, replaces it.
TEN_JOBS='{"algorithms":["aes-128-gcm","aes-256-gcm","chacha20-poly1305","aes-128-cbc","aes-256-ctr"],
  "sizes":[16,1024],"directions":["encrypt"],"threads":[1],"key_modes":["static"],
  "paths":["accelerated"],"seconds":0.5}'
INGEST_CAMPAIGN=${BENCH_SUITE:-$TEN_JOBS}
# The restart scenario's campaign: 2 jobs a host, running while the coordinator is killed.
RESTART_CAMPAIGN='{"algorithms":["aes-128-gcm"],"sizes":[16,1024],"directions":["encrypt"],"threads":[1],
  "key_modes":["static"],"paths":["accelerated"],"seconds":0.5}'

# campaign_start SUITE|MATRIX: starts a named suite, or a matrix given as JSON (`campaign start
# --matrix`), on every online host; echoes its id.
campaign_start() {
  local points=(--suite "$1")
  [ "${1:0:1}" = "{" ] && points=(--matrix "$1")
  CIPHERFLEET_ADMIN_TOKEN=$(cat "$BENCH_DIR/admin.token") "$BIN/cipherfleet-coordinator" campaign start \
    "${points[@]}" --coordinator "http://$GRPC" --format json | jq -r .campaign_id
}

# jobs_by_status DB CAMPAIGN: "done failed other" counts, from the per-host counts the jobs
# triggers keep (migrations/0019): counting a large campaign's jobs every second of a wait cost
# PostgreSQL enough CPU to show in the ingest scenario's figures, charged to ingest
# (docs/performance.md, "The scale bench's polling").
jobs_by_status() {
  psql_db "$1" "SELECT coalesce(sum(done), 0), coalesce(sum(failed), 0), coalesce(sum(queued + running), 0)
                FROM campaign_host_jobs WHERE campaign_id = $2" | tr '\t' ' '
}

# wait_campaign DB CAMPAIGN SECONDS: until no job of it is left to run; 1 on timeout.
wait_campaign() {
  local deadline=$(( $(date +%s) + $3 )) left
  while [ "$(date +%s)" -lt "$deadline" ]; do
    left=$(jobs_by_status "$1" "$2" | awk '{ print $3 }')
    [ "$left" = 0 ] && return 0
    sleep 1
  done
  return 1
}

# not_exactly_once DB CAMPAIGN: done jobs without exactly one result, and results of jobs not done.
not_exactly_once() {
  psql_db "$1" "SELECT (SELECT count(*) FROM jobs j WHERE j.campaign_id = $2 AND j.status = 'done'
                          AND (SELECT count(*) FROM results r WHERE r.job_id = j.id) <> 1)
                     + (SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id
                          WHERE j.campaign_id = $2 AND j.status <> 'done')"
}

# wait_jobs_done DB CAMPAIGN N: waits (at most BENCH_INGEST_LIMIT s) until N jobs of the campaign are done.
wait_jobs_done() {
  local deadline=$(( $(date +%s) + BENCH_INGEST_LIMIT )) done
  while [ "$(date +%s)" -lt "$deadline" ]; do
    read -r done _ _ < <(jobs_by_status "$1" "$2")
    [ "$done" -ge "$3" ] && return 0
    sleep 0.5
  done
  return 1
}

# campaign_rest_rows DB CAMPAIGN JOBS SINCE REST_NOTE RUNJOBS_NOTE: waits for the rest of the
# campaign (BENCH_INGEST_LIMIT) and prints the rows every scenario that interrupts one ends with:
# how long the rest took (from SINCE), jobs by status, exactly once, RunJobs per job.
campaign_rest_rows() {
  local db=$1 id=$2 jobs=$3 since_t=$4 done failed left
  if wait_campaign "$db" "$id" "$BENCH_INGEST_LIMIT"; then
    row "rest of the campaign done in" "$(since "$since_t")" s "$5"
  else
    row "rest of the campaign done in" "timeout" s "after $BENCH_INGEST_LIMIT s"
  fi
  read -r done failed left < <(jobs_by_status "$db" "$id")
  row "jobs done / failed / left" "$done / $failed / $left" "" "of $jobs; must be $jobs / 0 / 0"
  row "done jobs without exactly one result" "$(not_exactly_once "$db" "$id")" "" "must be 0"
  row "RunJobs accepted per job" "$(awk -v a="$(sim_stat jobs)" -v j="$jobs" 'BEGIN { printf "%.3f", a / j }')" "" \
    "$(sim_stat jobs) for $jobs jobs$6"
}

# wal_lsn DB: where the cluster's WAL is now. wal_per DB LSN0 LSN1 N: WAL bytes per item
# between two of them; wal_rate DB LSN0 LSN1 SECONDS: in MB/s.
wal_lsn() { psql_db "$1" "SELECT pg_current_wal_lsn()"; }
wal_per() { psql_db "$1" "SELECT round(pg_wal_lsn_diff('$3', '$2') / greatest($4, 1))"; }
wal_rate() { psql_db "$1" "SELECT round(pg_wal_lsn_diff('$3', '$2') / 1e6 / greatest($4, 0.001), 1)"; }

# rate_of DB SQL_TIMESTAMPS: items per second between the first and the last timestamp.
rate_of() {
  psql_db "$1" "SELECT CASE WHEN count(*) < 2 THEN 0 ELSE round((count(*) - 1)
                  / greatest(extract(epoch FROM max(t) - min(t)), 0.001)) END FROM ($2) s(t)"
}
