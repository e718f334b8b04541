#!/usr/bin/env bash
# The attack table (issue 32): what an attacker and a faulty host try, against a real coordinator
# (the debug build of deploy/build.sh) with real agents on a fresh database. One row per case:
#   wrong enrollment token (with or without a credential), wrong admin token, wrong report token,
#   host names probed without a secret, NUL in a Hello's facts, NUL in the report's query
#   parameters, NUL in a campaign name, an oversize message mid-session, implausible figures in a
#   result, idle sockets on the report and gRPC ports, the coordinator SIGKILLed and restarted
#   mid-campaign;
# with columns: inputs tried, clear refusals, crashes, 5xx (gRPC: UNAVAILABLE, INTERNAL, UNKNOWN),
# stuck hosts, lost and duplicated results, guesses answered past the limit (or host names told
# apart), health checks unanswered. Exits non-zero when any row fails: any crash, 5xx, stuck
# host, lost or duplicated result, unlimited guessing, unanswered health check, or an input that
# must be refused and was not. The cases live in coordinator/tests/e2e/attack.rs; the test command
# runs every case at a small count.
#
# Usage: deploy/attack.sh [--count N] [--limits-only] [--no-build]
#   --count N       inputs per case (default 200; idle sockets: N on each port)
#   --limits-only   only guessing, idle sockets and the restart
#   --no-build      use target/debug as it is
set -euo pipefail
cd "$(dirname "$0")/.."

count=200 cases=all build=1
while [ $# -gt 0 ]; do
  case $1 in
    --count) count=$2; shift 2 ;;
    --limits-only) cases=limits; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "attack.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$build" = 1 ] && deploy/build.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
CIPHERFLEET_ATTACK_COUNT=$count CIPHERFLEET_ATTACK_CASES=$cases \
  cargo test -q -p cipherfleet-coordinator --test e2e attack::attack_table -- --ignored --exact --nocapture >"$log" 2>&1
status=$?
set -e
printf 'attack.sh: %s inputs per case, %s, %s cores\n\n' "$count" "$(date -u +%F)" "$(nproc)"
if grep -q ATTACK-TABLE-BEGIN "$log"; then
  sed -n '/ATTACK-TABLE-BEGIN/,/ATTACK-TABLE-END/p' "$log" | sed '1d;$d'
else
  tail -40 "$log"
fi
[ "$status" = 0 ] && echo "attack.sh: every case held" || echo "attack.sh: some case failed (rows marked FAIL)" >&2
exit "$status"
