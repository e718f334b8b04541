#!/usr/bin/env bash
# Checks the deployment files without a cluster, a systemd PID 1 or a registry (deploy/test.sh runs it):
#   systemd     both units pass `systemd-analyze verify` (warnings fail too) and `security` scores them
#   install     deploy/install-agent.sh --root into a scratch directory: twice (the same files, owners
#               and modes both times), bad flags refused before anything changes, --uninstall keeps the
#               state directory and the user, --purge removes them, --dry-run changes nothing
#   kubernetes  `kubectl kustomize deploy/k8s` renders, deploy/check-k8s.py finds everything it needs,
#               and finds a hostNetwork agent when one is planted
#   monitoring  `promtool check rules` and `promtool test rules`, deploy/check-monitoring.py (metric
#               names against coordinator/src/metrics.rs, the Grafana dashboard's JSON and panels)
#   images      deploy/build-images.sh, when buildah works here (skipped with the reason otherwise)
# Quick without the images (docs/performance.md, "Scripts: time and disk").
#
# Usage: deploy/check-deploy.sh [--no-images]
set -euo pipefail
cd "$(dirname "$0")/.."

images=true
case "${1:-}" in
  --no-images) images=false ;;
  "") ;;
  *) echo "check-deploy.sh: unknown argument '$1' (usage: deploy/check-deploy.sh [--no-images])" >&2; exit 2 ;;
esac

for tool in systemd-analyze systemd-sysusers kubectl promtool python3; do
  command -v "$tool" >/dev/null || { echo "check-deploy: $tool is missing: run deploy/install-deps.sh" >&2; exit 1; }
done
python3 -c 'import yaml' 2>/dev/null || { echo "check-deploy: PyYAML is missing: run deploy/install-deps.sh" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "check-deploy: FAILED: $*" >&2; exit 1; }
ok() { echo "check-deploy: ok: $*"; }
step() { printf -- '-- %s\n' "$*"; }

# Stand-ins for the binaries: what is checked here is where they land, not what they do.
mkdir -p "$work/bin"
for b in cipherfleet-agent cipherfleet-agent-soft cipherfleet-coordinator; do
  printf '#!/bin/sh\necho "%s stand-in"\n' "$b" >"$work/bin/$b"
  chmod 0755 "$work/bin/$b"
done
openssl rand -hex 32 >"$work/token"
chmod 0600 "$work/token"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=cipherfleet-test-ca \
  -days 1 -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null

step "install-agent.sh --root"
root=$work/root
mkdir "$root"
install_args=(--coordinator https://coordinator.example:7443 --token-file "$work/token" --ca-cert "$work/ca.pem"
  --name web-1 --label rack=b7 --label class=storage --binaries "$work/bin" --root "$root")
# Path, type, mode, owner and a content hash of every file under the root.
snapshot() {
  (cd "$root" && find . -printf '%p %y %m %U:%G\n' | sort | while read -r p rest; do
    h=-; [ -f "$p" ] && h=$(sha256sum <"$p" | cut -c1-16)
    echo "$p $rest $h"
  done)
}
deploy/install-agent.sh "${install_args[@]}" >"$work/install1.log" 2>&1 || { cat "$work/install1.log"; fail "install-agent.sh --root"; }
snapshot >"$work/snap1"
deploy/install-agent.sh "${install_args[@]}" >"$work/install2.log" 2>&1 || { cat "$work/install2.log"; fail "second install-agent.sh --root"; }
snapshot >"$work/snap2"
diff "$work/snap1" "$work/snap2" || fail "a second install changed the files above"
uid=$(awk -F: '$1 == "cipherfleet-agent" { print $3 ":" $4 }' "$root/etc/passwd")
[ -n "$uid" ] || fail "no cipherfleet-agent user in $root/etc/passwd"
expect() { # PATH TYPE MODE OWNER
  grep -q "^\./${1#/} $2 $3 $4 " "$work/snap1" || fail "$1: want type $2 mode $3 owner $4, have: $(grep "^\./${1#/} " "$work/snap1" || echo missing)"
}
expect /usr/local/bin/cipherfleet-agent f 755 0:0
expect /usr/local/bin/cipherfleet-agent-soft f 755 0:0
expect /etc/systemd/system/cipherfleet-agent.service f 644 0:0
expect /etc/sysusers.d/cipherfleet-agent.conf f 644 0:0
expect /etc/cipherfleet/agent.env f 644 0:0
expect /etc/cipherfleet/agent/token f 600 0:0
expect /etc/cipherfleet/agent/ca.pem f 644 0:0
expect /var/lib/cipherfleet-agent d 700 "$uid"
cmp -s "$work/token" "$root/etc/cipherfleet/agent/token" || fail "the token was not copied as given"
grep -qx 'CIPHERFLEET_COORDINATOR=https://coordinator.example:7443' "$root/etc/cipherfleet/agent.env" &&
  grep -qx 'CIPHERFLEET_AGENT_ARGS=--ca-cert /etc/cipherfleet/agent/ca.pem --name web-1 --label rack=b7 --label class=storage' \
    "$root/etc/cipherfleet/agent.env" || { cat "$root/etc/cipherfleet/agent.env"; fail "agent.env does not hold the flags given"; }
cmp -s deploy/systemd/cipherfleet-agent.service "$root/etc/systemd/system/cipherfleet-agent.service" || fail "the unit is not deploy/systemd's"
ok "installed twice, identical: $(wc -l <"$work/snap1") paths, token 0600, state directory 0700 $uid"

# Refusals come before any change: a fresh root stays empty.
fresh=$work/fresh
mkdir "$fresh"
refused() { # EXPECTED-MESSAGE ARGS…
  local want=$1; shift
  if out=$(deploy/install-agent.sh "$@" --binaries "$work/bin" --root "$fresh" 2>&1); then fail "install-agent.sh $* was accepted"; fi
  grep -q -- "$want" <<<"$out" || fail "install-agent.sh $*: said '$out', want '$want'"
  [ -z "$(ls -A "$fresh")" ] || fail "install-agent.sh $* changed $fresh before refusing"
}
refused "--token-file F is required" --coordinator https://c.example:7443
refused "--coordinator URL is required" --token-file "$work/token"
refused "must start with https://" --coordinator c.example:7443 --token-file "$work/token"
refused "--label 'rack'" --coordinator https://c.example:7443 --token-file "$work/token" --label rack
refused "not a readable PEM certificate" --coordinator https://c.example:7443 --token-file "$work/token" --ca-cert "$work/token"
: >"$work/empty-token"
refused "is empty" --coordinator https://c.example:7443 --token-file "$work/empty-token"
refused "unknown argument" --coordinator https://c.example:7443 --token-file "$work/token" --bogus
deploy/install-agent.sh --dry-run "${install_args[@]/#$root/$fresh}" >"$work/dry.log" 2>&1 || { cat "$work/dry.log"; fail "--dry-run"; }
grep -q '^+ write .*agent.env' "$work/dry.log" || fail "--dry-run did not show what it would write"
[ -z "$(ls -A "$fresh")" ] || fail "--dry-run changed $fresh"
deploy/install-agent.sh --help | grep -q -- '--uninstall' || fail "install-agent.sh --help does not describe --uninstall"
ok "bad flags refused with the reason before any change; --dry-run changes nothing; --help"

step "systemd-analyze verify, security"
# verify needs the units it refers to (sysinit.target…) and the ExecStart binaries under --root.
verify=$work/verify
cp -a "$root" "$verify"
mkdir -p "$verify/usr/lib/systemd"
cp -a /usr/lib/systemd/system "$verify/usr/lib/systemd/"
install -m 0755 "$work/bin/cipherfleet-coordinator" "$verify/usr/local/bin/cipherfleet-coordinator"
install -m 0644 deploy/systemd/cipherfleet-coordinator.service "$verify/etc/systemd/system/"
units=(cipherfleet-agent.service cipherfleet-coordinator.service)
out=$(systemd-analyze verify --root="$verify" "${units[@]/#//etc/systemd/system/}" 2>&1) || { echo "$out"; fail "systemd-analyze verify"; }
[ -z "$out" ] || { echo "$out"; fail "systemd-analyze verify warned"; }
scores=()
for u in "${units[@]}"; do
  # Exposure 0 (locked down) to 10; above 2.0 a hardening line went missing.
  out=$(systemd-analyze security --offline=yes --root="$verify" --threshold=20 "$u" 2>&1) ||
    { echo "$out" | grep -v '✓'; fail "systemd-analyze security: $u is more exposed than 2.0"; }
  scores+=("$u $(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")")
done
ok "both units verify without a warning; exposure (0 best, 10 worst): ${scores[*]}"

step "install-agent.sh --uninstall"
deploy/install-agent.sh --uninstall --root "$root" >"$work/un.log" 2>&1 || { cat "$work/un.log"; fail "--uninstall"; }
grep -q "kept /var/lib/cipherfleet-agent" "$work/un.log" || fail "--uninstall did not say what it kept: $(cat "$work/un.log")"
left=$(cd "$root" && find . -type f ! -path './etc/passwd*' ! -path './etc/group*' ! -path './etc/shadow*' \
  ! -path './etc/gshadow*' ! -path './etc/.pwd.lock' | sort)
[ -z "$left" ] || fail "--uninstall left: $left"
[ -d "$root/var/lib/cipherfleet-agent" ] && grep -q '^cipherfleet-agent:' "$root/etc/passwd" ||
  fail "--uninstall removed the state directory or the user"
deploy/install-agent.sh --uninstall --purge --root "$root" >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "--purge"; }
[ ! -e "$root/var/lib/cipherfleet-agent" ] || fail "--purge kept the state directory"
! grep -q '^cipherfleet-agent:' "$root/etc/passwd" "$root/etc/group" || fail "--purge kept the user or its group"
ok "--uninstall removed every file and kept the state directory and the user; --purge removed those"

step "kubernetes (kubectl kustomize + deploy/check-k8s.py)"
kubectl kustomize deploy/k8s >"$work/k8s.yaml" || fail "kubectl kustomize deploy/k8s"
deploy/check-k8s.py <"$work/k8s.yaml" || fail "deploy/check-k8s.py"
# The check must see a planted problem.
sed 's/hostNetwork: false/hostNetwork: true/' "$work/k8s.yaml" | deploy/check-k8s.py >"$work/k8s-bad.log" &&
  fail "deploy/check-k8s.py accepted an agent on the host network"
grep -q 'hostNetwork' "$work/k8s-bad.log" || fail "deploy/check-k8s.py did not name hostNetwork: $(cat "$work/k8s-bad.log")"
ok "the manifests render and hold what they must; a hostNetwork agent is caught"

step "monitoring (promtool, deploy/check-monitoring.py)"
promtool check rules deploy/monitoring/alerts.yml
(cd deploy/monitoring && promtool test rules alerts-test.yml)
deploy/check-monitoring.py
ok "alerting rules and dashboard"

step "container images"
if ! $images; then
  echo "check-deploy: images skipped (--no-images)"
elif ! command -v buildah >/dev/null; then
  echo "check-deploy: images skipped: buildah is not installed (deploy/install-deps.sh installs it)"
elif ! probe=$(buildah --root "$work/buildah" --runroot "$work/buildah-run" --storage-driver vfs from scratch 2>&1); then
  echo "check-deploy: images skipped: buildah cannot make a container here: $(tail -1 <<<"$probe")"
else
  deploy/build-images.sh || fail "deploy/build-images.sh"
fi
echo "check-deploy: all deployment checks passed"
