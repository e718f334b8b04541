#!/usr/bin/env bash
# Scale benchmark of the coordinator on this machine: builds the release binaries, starts a
# private PostgreSQL cluster in a temporary directory, runs every scenario of
# deploy/bench-scale/ against simulated agents (`cipherfleet-sim`), each bounded
# in time, and prints ONE table. Scenarios: 10-connect (connect storm, RSS, idle CPU),
# 20-ingest (a campaign on every host: dispatch and ingest rates, result→ack p99),
# 21-postgres-floor (PostgreSQL alone storing results as ingest does, with pgbench: the
# ceiling of 20-ingest's rate on this machine), 30-restart (coordinator killed and
# restarted with every agent connected), 40-slow-postgres (a pg_sleep trigger under
# ingest: memory bounded, nothing lost), 41-restart-postgres (PostgreSQL restarted, then
# stopped for a while, mid-campaign: memory bounded, ingest resumes, nothing lost),
# 50-two-coordinators (two on one database, one SIGKILLed mid-campaign: time until the
# other serves every agent, each job run exactly once).
#
# Usage: deploy/bench-scale.sh [--count N] [--quick] [--only PATTERN] [--no-build] [--keep]
#   --count N      simulated agents (default 10000; --quick: 200)
#   --quick        short waits and a small fleet, to check the scenarios themselves
#   --only PAT     run the scenarios whose file name matches the shell pattern PAT (e.g. '2*')
#   --no-build     use target/release as it is
#   --keep         keep the temporary directory (logs, databases) and print its path
#
# A scenario is one executable file deploy/bench-scale/NN-name.sh, run in name order with
# `timeout` (BENCH_SCENARIO_LIMIT seconds, default 900; --quick 240). It sources
# deploy/bench-scale/lib.sh (helpers: fresh_db, pg_ctl_bench, coord_start/coord_kill/coord_stop, sim_start,
# sim_stat/wait_stat, rss_mb/peak_rss_mb/cpu_percent, campaign_start/wait_campaign, row) and
# everything it starts through them is stopped when it exits. It reports on stdout, one line
# per figure, in this format (tab-separated, the rest of its output goes to the log):
#
#   ROW <TAB> scenario <TAB> metric <TAB> value <TAB> unit <TAB> note
#
# (`row METRIC VALUE UNIT [NOTE]` prints it, with the scenario's file name). The driver
# collects every ROW line and prints them as the table at the end; a scenario that fails or
# runs out of time gets a row saying so. Environment a scenario can rely on:
#   BENCH_DIR       scratch directory (tokens, logs, simulator state), removed at the end
#   BENCH_BIN       directory of the binaries (default target/release; may be set with --no-build)
#   BENCH_COUNT     simulated agents;  BENCH_QUICK  1 in --quick mode, else 0
#   BENCH_PG_SOCKET, BENCH_PG_PORT, BENCH_PG_USER   the private cluster (psql_db, fresh_db;
#   BENCH_PG_BIN, BENCH_PG_AS: its pg_ctl and the user it runs as, for pg_ctl_bench)
#   BENCH_CONNECT_LIMIT, BENCH_INGEST_LIMIT          seconds to wait for a connect / a campaign
# and BENCH_HEARTBEAT (heartbeat seconds, default 5), BENCH_SUITE (a suite name or a matrix
# in JSON; default lib.sh's TEN_JOBS: 10 jobs a host), BENCH_SERVE_ARGS (extra `serve` flags),
# BENCH_SIM_ARGS (extra `cipherfleet-sim` flags), BENCH_HISTORY_WEEKS and BENCH_HISTORY_ROWS (20: past
# weeks of stored results laid out first, each a partition of that many rows; default none),
# BENCH_SETUP_SQL (20: SQL run on its database after the coordinator's migrations and the
# history, before the campaign: a variant of the schema measured with the same binaries),
# BENCH_WARM_CAMPAIGNS (20: campaigns of the same points run to the end before the measured one,
# default 0: with 1, every point's latest row exists and is updated, as in a fleet watched for long),
# BENCH_RAMP (10: the storm spread over this long),
# BENCH_PG_SLEEP (40: seconds a result insert sleeps, default 0.2), BENCH_JOB_DELAY (50: each
# simulated job's time, default 0.5s) and BENCH_PG_CONF (lines added to postgresql.conf, e.g.
# "shared_preload_libraries = 'pg_stat_statements'", which makes 20-ingest log the statements
# that took the most time: BENCH_STATEMENTS of them, default 15, BENCH_STATEMENT_CHARS of each,
# default 160, in 20-ingest.err, which only --keep keeps (the driver prints a scenario's last
# three log lines); add "pg_stat_statements.track = all" for the trigger and foreign-key statements;
# "log_statement_stats = on" with "log_min_error_statement = log" makes it log each statement's
# CPU per stored result instead, no waiting counted: bench-scale/statement-cpu.py)
# may be set by the caller.
#
# Large fleets: every connection is an open file on both ends, so when --count needs more than
# the open-files hard limit allows, the driver raises it (with CAP_SYS_RESOURCE; up to
# fs.nr_open) for everything it starts; where it cannot, 10-connect splits the fleet over
# several simulators and coordinators. Above 10,000 agents the simulator's hosts dial from several loopback
# source addresses (127.0.0.2, 127.0.0.3, …, one per 5,000 hosts; `cipherfleet-sim --local-address`):
# one source address has about 28,000 ephemeral ports towards one coordinator, and a bound
# source address takes its ports from the other half of the range than connect() prefers, so
# other programs' loopback connections keep theirs.
set -euo pipefail
cd "$(dirname "$0")/.."

count="" quick=0 only="*" build=1 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count=$2; shift ;;
    --quick) quick=1 ;;
    --only) only=$2; shift ;;
    --no-build) build=0 ;;
    --keep) keep=1 ;;
    -h|--help) awk 'NR > 1 && /^set -euo/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-scale.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$count" ]; then count=$([ $quick = 1 ] && echo 200 || echo 10000); fi
case "$count" in ''|*[!0-9]*) echo "bench-scale.sh: --count needs a whole number, not '$count'" >&2; exit 2 ;; esac
for tool in jq psql timeout; do
  command -v "$tool" >/dev/null || { echo "bench-scale.sh: needs $tool" >&2; exit 2; }
done

# Open files: a connection each on both sides, plus the rest (the coordinator keeps 1,024 aside).
need_files=$(( count + 4096 ))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$need_files" ]; then
  nr_open=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)
  [ "$need_files" -le "$nr_open" ] || need_files=$nr_open
  if ulimit -Hn "$need_files" 2>/dev/null && ulimit -Sn "$need_files"; then
    echo "bench-scale.sh: open-files limit raised to $need_files for $count agents" >&2
  else
    echo "bench-scale.sh: $count agents need about $need_files open files and the hard limit is" \
      "$(ulimit -Hn) and cannot be raised here (it needs CAP_SYS_RESOURCE)" >&2
  fi
fi
if [ "$count" -gt 10000 ] && [[ "${BENCH_SIM_ARGS:-}" != *--local-address* ]]; then
  addresses=$(seq -s, -f '127.0.0.%g' 2 $(( 1 + (count + 4999) / 5000 )))
  export BENCH_SIM_ARGS="${BENCH_SIM_ARGS:-} --local-address $addresses"
fi

if [ $build = 1 ]; then
  cargo build --release -p cipherfleet-coordinator -p cipherfleet-sim --bin cipherfleet-coordinator --bin cipherfleet-sim
fi
export BENCH_BIN=${BENCH_BIN:-$PWD/target/release} BENCH_COUNT=$count BENCH_QUICK=$quick
export BENCH_DIR; BENCH_DIR=$(mktemp -d -t cipherfleet-bench-scale.XXXXXX)
export BENCH_CONNECT_LIMIT=${BENCH_CONNECT_LIMIT:-$([ $quick = 1 ] && echo 60 || echo 180)}
export BENCH_INGEST_LIMIT=${BENCH_INGEST_LIMIT:-$([ $quick = 1 ] && echo 90 || echo 420)}
limit=${BENCH_SCENARIO_LIMIT:-$([ $quick = 1 ] && echo 240 || echo 900)}

# The private cluster: initdb refuses root, so root runs it as the coordinator's own system user.
# (Where PATH has pg_ctl as a link, the directory it points into: pgbench is beside it there.)
pg_bin=$(dirname "$(readlink -f "$(command -v pg_ctl 2>/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -1)")")
as_pg=()
if [ "$(id -u)" = 0 ]; then
  id cipherfleet-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin cipherfleet-pg
  chown cipherfleet-pg "$BENCH_DIR"; chmod 0755 "$BENCH_DIR"
  as_pg=(runuser -u cipherfleet-pg --)
  export BENCH_PG_USER=cipherfleet-pg
else
  export BENCH_PG_USER=$USER
fi
export BENCH_PG_SOCKET=$BENCH_DIR BENCH_PG_PORT=5432 BENCH_PG_BIN=$pg_bin BENCH_PG_AS=${as_pg[2]:-}
cleanup() {
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$BENCH_DIR/pg" -m immediate stop >/dev/null 2>&1 || true
  if [ $keep = 1 ]; then echo "kept $BENCH_DIR" >&2; else rm -rf "$BENCH_DIR"; fi
}
trap cleanup EXIT
"${as_pg[@]}" "$pg_bin/initdb" -D "$BENCH_DIR/pg" -U "$BENCH_PG_USER" --auth-local trust --auth-host reject >"$BENCH_DIR/initdb.log"
cat >>"$BENCH_DIR/pg/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$BENCH_DIR'
max_connections = 200
shared_buffers = 256MB
${BENCH_PG_CONF:-}
CONF
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$BENCH_DIR/pg" -l "$BENCH_DIR/postgres.log" -w start >/dev/null
umask 077
printf 'bench-agent-token-%s' "$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" >"$BENCH_DIR/agent.token"
printf 'bench-admin-token-%s' "$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" >"$BENCH_DIR/admin.token"
chmod 0644 "$BENCH_DIR"/*.token 2>/dev/null || true

rows=$BENCH_DIR/rows.tsv
: >"$rows"
for scenario in deploy/bench-scale/[0-9]*.sh; do
  name=$(basename "$scenario" .sh)
  # shellcheck disable=SC2254
  case "$name" in $only) ;; *) continue ;; esac
  echo "== $name ($count agents, at most $limit s)" >&2
  set +e
  timeout --kill-after=10 "$limit" bash "$scenario" >"$BENCH_DIR/$name.out" 2>"$BENCH_DIR/$name.err"
  status=$?
  set -e
  grep $'^ROW\t' "$BENCH_DIR/$name.out" | cut -f2- >>"$rows" || true
  case $status in
    0) ;;
    124|137) printf '%s\t%s\t%s\t\t%s\n' "$name" "scenario" "timed out" "after $limit s" >>"$rows" ;;
    *) printf '%s\t%s\t%s\t\t%s\n' "$name" "scenario" "failed (exit $status)" \
         "$(tail -1 "$BENCH_DIR/$name.err" | cut -c1-100)" >>"$rows" ;;
  esac
  [ $keep = 1 ] || tail -3 "$BENCH_DIR/$name.err" >&2 || true
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
echo
echo "bench-scale: $count simulated agents, $(date -u +%Y-%m-%d), $(nproc) × ${cpu:-unknown CPU}, $mem," \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$([ $quick = 1 ] && echo ', quick mode')"
# Empty cells as "-", since column(1) merges adjacent separators.
{ printf 'scenario\tmetric\tvalue\tunit\tnote\n'; cat "$rows"; } |
  awk -F'\t' -v OFS='\t' '{ for (i = 1; i <= 5; i++) if ($i == "") $i = "-"; print }' | column -t -s $'\t'
