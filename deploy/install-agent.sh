#!/usr/bin/env bash
# Installs the cipherfleet agent on a plain systemd host, as root, and starts it:
#   /usr/local/bin/cipherfleet-agent{,-soft}         both flavours, side by side (the daemon runs
#                                                    software-path jobs in the -soft sibling)
#   /etc/sysusers.d/cipherfleet-agent.conf + user    the unprivileged system user cipherfleet-agent
#   /etc/systemd/system/cipherfleet-agent.service    the hardened unit (deploy/systemd/)
#   /etc/cipherfleet/agent.env                       the coordinator URL and the other `run` flags
#   /etc/cipherfleet/agent/token (0600)              the enrollment token, loaded by LoadCredential=
#   /etc/cipherfleet/agent/ca.pem                    the coordinator's CA (--ca-cert)
#   /var/lib/cipherfleet-agent/ (0700)               state: the host credential and the spool
# Running it again with other flags or newer binaries updates the host and restarts the agent.
#
# Usage: deploy/install-agent.sh --coordinator URL --token-file F [--ca-cert F] [--name N]
#            [--label K=V]… [--binaries DIR] [--insecure-plaintext] [--root DIR] [--dry-run]
#        deploy/install-agent.sh --uninstall [--purge] [--root DIR] [--dry-run]
#   --binaries DIR  where cipherfleet-agent and cipherfleet-agent-soft are; default: dist/<triple>/
#                   of deploy/build-static.sh for this machine's architecture
#   --insecure-plaintext  passed on to the agent: lets it send its token over http:// to a coordinator
#                   that is not on loopback (trusted networks only)
#   --root DIR      install under DIR instead of /, without systemctl (for tests and images)
#   --dry-run       print what would be done, change nothing
#   --uninstall     stop and remove everything above except the state directory and the user
#                   (the host keeps its identity if reinstalled); --purge removes those too
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "install-agent: $*" >&2; exit 2; }

coordinator="" token_file="" ca_cert="" name="" binaries="" root="" labels=()
insecure=false dry=false uninstall=false purge=false
while [ $# -gt 0 ]; do
  case "$1" in
    --coordinator|--token-file|--ca-cert|--name|--label|--binaries|--root)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --coordinator) coordinator=$2 ;;
        --token-file) token_file=$2 ;;
        --ca-cert) ca_cert=$2 ;;
        --name) name=$2 ;;
        --label) labels+=("$2") ;;
        --binaries) binaries=$2 ;;
        --root) root=$2 ;;
      esac
      shift ;;
    --insecure-plaintext) insecure=true ;;
    --dry-run) dry=true ;;
    --uninstall) uninstall=true ;;
    --purge) purge=true ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

if [ -n "$root" ]; then
  [ -d "$root" ] || die "--root $root is not a directory"
  root=$(cd "$root" && pwd)
  [ "$root" != / ] || root=""
fi
[ "$(id -u)" -eq 0 ] || $dry || die "run as root (or try --dry-run)"
$purge && ! $uninstall && die "--purge goes with --uninstall"

user=cipherfleet-agent
unit=cipherfleet-agent.service
bin_dir=/usr/local/bin
conf_dir=/etc/cipherfleet
state_dir=/var/lib/cipherfleet-agent
sysusers_conf=/etc/sysusers.d/cipherfleet-agent.conf

# Every change goes through run (or write_file), so --dry-run shows exactly what would happen.
run() {
  if $dry; then printf '+'; printf ' %q' "$@"; echo; else "$@"; fi
}
# write_file PATH MODE: stdin to $root/PATH, replaced atomically.
write_file() {
  local dest=$root$1 content
  content=$(cat)
  if $dry; then
    printf '+ write %s (mode %s):\n%s\n' "$dest" "$2" "$(sed 's/^/    /' <<<"$content")"
    return
  fi
  printf '%s\n' "$content" >"$dest.new"
  chmod "$2" "$dest.new"
  mv -f "$dest.new" "$dest"
}
# copy_file SRC PATH MODE: a copy that a running program never sees half-written
# (a rename, so a running agent's binary is not overwritten in place either).
copy_file() {
  run install -m "$3" "$1" "$root$2.new"
  run mv -f "$root$2.new" "$root$2"
}
systemctl_or_skip() {
  if [ -n "$root" ]; then
    echo "install-agent: --root: skipped systemctl $*"
  elif ! command -v systemctl >/dev/null || [ ! -d /run/systemd/system ]; then
    echo "install-agent: systemd is not running here: skipped systemctl $*"
  else
    run systemctl "$@"
  fi
}

if $uninstall; then
  systemctl_or_skip disable --now "$unit" || true
  for f in "$bin_dir/cipherfleet-agent" "$bin_dir/cipherfleet-agent-soft" "/etc/systemd/system/$unit" \
    "$conf_dir/agent.env" "$conf_dir/agent/token" "$conf_dir/agent/ca.pem" "$sysusers_conf"; do
    [ -e "$root$f" ] && run rm -f "$root$f"
  done
  [ -d "$root$conf_dir/agent" ] && run rmdir "$root$conf_dir/agent"
  # Only if nothing else lives there (the coordinator's files may).
  [ -d "$root$conf_dir" ] && [ -z "$(ls -A "$root$conf_dir")" ] && run rmdir "$root$conf_dir"
  systemctl_or_skip daemon-reload
  if $purge; then
    [ -e "$root$state_dir" ] && run rm -rf "$root$state_dir"
    if grep -q "^$user:" "$root/etc/passwd" 2>/dev/null; then
      run userdel ${root:+--prefix "$root"} "$user"
    fi
    # userdel leaves the group when the login.defs of $root do not say USERGROUPS_ENAB.
    if grep -q "^$user:" "$root/etc/group" 2>/dev/null; then
      run groupdel ${root:+--prefix "$root"} "$user"
    fi
    echo "install-agent: removed the agent, its state directory and the user $user"
  else
    echo "install-agent: removed the agent; kept $state_dir (this host's credential and unsent results)" \
      "and the user $user, so a reinstall keeps the host's identity; --uninstall --purge removes them"
  fi
  exit 0
fi

# Check everything before changing anything.
[ -n "$coordinator" ] || die "--coordinator URL is required (e.g. https://coordinator.example:7443)"
case "$coordinator" in
  https://?*) ;;
  http://?*) ;;
  *) die "--coordinator '$coordinator' must start with https:// (or http://)" ;;
esac
[ -n "$token_file" ] || die "--token-file F is required (the enrollment token the coordinator was started with)"
[ -f "$token_file" ] && [ -r "$token_file" ] || die "--token-file $token_file: not a readable file"
grep -q '[^[:space:]]' "$token_file" || die "--token-file $token_file is empty"
[ -z "$ca_cert" ] || grep -q 'BEGIN CERTIFICATE' "$ca_cert" 2>/dev/null ||
  die "--ca-cert $ca_cert: not a readable PEM certificate"
# The flags become one line of agent.env that systemd splits on white space: no spaces, quotes,
# backslashes, '$' or '%' (a systemd specifier) in them.
plain='^[^[:space:]"\\$%'"'"']+$'
for v in "$coordinator" "$name"; do
  [ -z "$v" ] || [[ $v =~ $plain ]] || die "'$v': white space, quotes, backslashes, \$ and % are not supported here"
done
for l in "${labels[@]}"; do
  [[ $l =~ ^[A-Za-z0-9_.-]+=.*$ && $l =~ $plain ]] ||
    die "--label '$l': KEY=VALUE with a key of [A-Za-z0-9_.-] and no white space, quotes, \$ or %"
done
if [ -z "$binaries" ]; then
  case "$(uname -m)" in
    x86_64) triple=x86_64-unknown-linux-musl ;;
    aarch64|arm64) triple=aarch64-unknown-linux-musl ;;
    *) die "no static build for $(uname -m); pass --binaries DIR" ;;
  esac
  binaries=$here/../dist/$triple
fi
for b in cipherfleet-agent cipherfleet-agent-soft; do
  [ -x "$binaries/$b" ] || die "$binaries/$b is missing: build it (deploy/build-static.sh) or pass --binaries DIR"
done
if [ -n "$root" ] || $dry; then
  command -v systemd-sysusers >/dev/null || die "systemd-sysusers is needed to create the user under --root"
fi

args=()
[ -z "$ca_cert" ] || args+=(--ca-cert "$conf_dir/agent/ca.pem")
[ -z "$name" ] || args+=(--name "$name")
for l in "${labels[@]}"; do args+=(--label "$l"); done
$insecure && args+=(--insecure-plaintext)

for d in "$bin_dir" /etc/systemd/system /etc/sysusers.d "$conf_dir/agent"; do
  [ -d "$root$d" ] || run mkdir -p "$root$d"
done
copy_file "$binaries/cipherfleet-agent" "$bin_dir/cipherfleet-agent" 0755
copy_file "$binaries/cipherfleet-agent-soft" "$bin_dir/cipherfleet-agent-soft" 0755

copy_file "$here/systemd/cipherfleet-agent.sysusers" "$sysusers_conf" 0644
if command -v systemd-sysusers >/dev/null; then
  run systemd-sysusers ${root:+--root="$root"} "$root$sysusers_conf"
elif ! getent passwd "$user" >/dev/null; then
  run useradd --system --user-group --home-dir "$state_dir" --no-create-home --shell /usr/sbin/nologin "$user"
fi

copy_file "$here/systemd/$unit" "/etc/systemd/system/$unit" 0644
run chmod 0755 "$root$conf_dir" "$root$conf_dir/agent"
copy_file "$token_file" "$conf_dir/agent/token" 0600
if [ -n "$ca_cert" ]; then
  copy_file "$ca_cert" "$conf_dir/agent/ca.pem" 0644
elif [ -e "$root$conf_dir/agent/ca.pem" ]; then
  run rm -f "$root$conf_dir/agent/ca.pem"
fi
write_file "$conf_dir/agent.env" 0644 <<EOF
# Written by deploy/install-agent.sh: run it again to change these (or edit, then
# systemctl restart cipherfleet-agent). The enrollment token is $conf_dir/agent/token.
CIPHERFLEET_COORDINATOR=$coordinator
CIPHERFLEET_AGENT_ARGS=${args[*]}
EOF

# The state directory systemd would create (StateDirectory=), made now so its owner and mode
# are right before the first start; kept across reinstalls (it holds the host credential).
uid_gid=$(awk -F: -v u="$user" '$1 == u { print $3 ":" $4 }' "$root/etc/passwd" 2>/dev/null || true)
$dry && uid_gid=${uid_gid:-$user:$user}
[ -n "$uid_gid" ] || die "the user $user was not created"
[ -d "$root$state_dir" ] || run mkdir -p "$root$state_dir"
run chown "$uid_gid" "$root$state_dir"
run chmod 0700 "$root$state_dir"

systemctl_or_skip daemon-reload
systemctl_or_skip enable "$unit"
# restart, not start: a reinstall with new flags or binaries takes effect now.
systemctl_or_skip restart "$unit"
echo "install-agent: installed ${root:+under $root }for $coordinator; logs: journalctl -u $unit -f"
