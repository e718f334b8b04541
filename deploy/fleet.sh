#!/usr/bin/env bash
# The emulated fleet on one machine, as root: a Linux bridge in the root namespace, one network
# namespace per process host joined to it by a veth pair, and one virtual machine per VM host joined to
# it by a tap device, each host with its own address. Every agent reaches the coordinator on the
# bridge's address, never over loopback, with its own --name, labels, state directory (its host
# credential) and spool, over TLS. Process hosts run inside their namespace (`ip netns exec`):
#   x86-aesni       the native static agent (its software sibling beside it)
#   x86-no-aesni    qemu-x86_64-static -cpu Nehalem                    (label emulated=qemu-nehalem)
#   x86-old-kernel  qemu-x86_64-static -cpu Westmere -r 3.10.0-1160.el7.x86_64, under the ENOSYS seccomp
#                   filter of deploy/enosys/run-under-3.10 when present (label emulated=qemu-westmere;
#                   enosys=3.10 when filtered, else a warning)
#   arm64           the static aarch64 agent under qemu-aarch64-static -cpu cortex-a72
#                                                                      (label emulated=qemu-cortex-a72)
#   x86-soft-build  the software-flavoured build alone (cipherfleet-agent-soft as the daemon)
# VM hosts boot Debian's own kernel (qemu-system-x86_64 -cpu max, TCG unless a probe boot shows that KVM
# runs a guest here) with an initramfs deploy/vm/image.sh makes at run time, a virtio disk for the
# state directory and spool (a restarted VM keeps its identity) and the console in log/HOST.log
# (labels vm=qemu-tcg and emulated=qemu-tcg; under KVM vm=qemu-kvm alone):
#   x86-kernel-generic  booted with modprobe.blacklist=aesni_intel: the kernel's AES is generic while
#                       userspace has AES-NI
#   x86-noxsave         booted with noxsave: XCR0 has no AVX state, CPUID still has AVX; its agent is
#                       installed by deploy/install-agent.sh inside the VM (its non-systemd path)
# Every host also carries the label fleet=box. Emulated hosts' workers run under the same emulator
# (CIPHERFLEET_WORKER_PREFIX). The binaries come from deploy/build-static.sh (dist/<triple>/).
#
# Usage: deploy/fleet.sh up [--coordinator URL] [--ca-cert PEM] [--token-file F]
#        deploy/fleet.sh status [--admin-token-file F]
#        deploy/fleet.sh down [--purge]
#        deploy/fleet.sh net                   only the bridge and the namespaces (to start a coordinator on
#                                              the bridge's address before the agents)
#        deploy/fleet.sh link HOST up|down     take a host's link down or bring it back
#   up      makes what is missing and starts the agents and VMs that are not running (idempotent: a
#           second `up` restarts only an agent or VM that died; a link taken down with `link` stays down). URL default https://BRIDGE-ADDRESS:7443; the CA and the
#           token file also from CIPHERFLEET_CA_CERT and CIPHERFLEET_TOKEN_FILE (URL: CIPHERFLEET_COORDINATOR).
#   status  each host: pid, address, whether its agent (or VM) runs, and whether the coordinator sees it
#           online (asks `cipherfleet-coordinator hosts` with the admin token: --admin-token-file or
#           CIPHERFLEET_ADMIN_TOKEN; else says unknown); then each VM's boot check of its kernel's AES.
#   down    stops every process in the fleet's namespaces and every VM, and removes the namespaces,
#           veths, taps and bridge, also after a half-failed `up`. It keeps the hosts' state directories
#           and disks (their credentials: the coordinator knows them by these) unless --purge, which
#           removes the run directory too.
# Environment (the values `up` used are kept in the run directory and reused by later commands):
#   CIPHERFLEET_FLEET_DIR     run directory: pids, logs, hosts' state and spools (/var/lib/cipherfleet-fleet)
#   CIPHERFLEET_FLEET_SUBNET  a private /24 for the bridge (10.77.0.0/24): bridge .1, hosts .11 to .17
#   CIPHERFLEET_FLEET_BRIDGE  the bridge's name (cfbr0); veths and taps are named after it, at most 12 characters
#   CIPHERFLEET_FLEET_NETNS   prefix of the namespaces' names (cf-: cf-arm64, …)
#   CIPHERFLEET_FLEET_HOSTS   the hosts to run, a subset of all seven (all); "process" means the five
#                             process hosts, "vm" the VM hosts
#   CIPHERFLEET_FLEET_VM_ACCEL  auto (KVM where a probe boot with it reaches init, else TCG), tcg or kvm
#   CIPHERFLEET_FLEET_VM_MEM  each VM's memory in MiB (256)
#   CIPHERFLEET_VM_CACHE      the kernels and initramfs of deploy/vm/image.sh (/var/cache/cipherfleet-vm)
#   CIPHERFLEET_FLEET_BIN     where <triple>/cipherfleet-agent{,-soft} are (dist)
#   CIPHERFLEET_FLEET_AGENT_ARGS  more `run` flags for every agent, e.g. "--nice 0"
#   CIPHERFLEET_FLEET_COORDINATOR_BIN  the coordinator binary `status` asks (dist/x86_64-…, else target/)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

PROCESS_HOSTS=(x86-aesni x86-no-aesni x86-old-kernel arm64 x86-soft-build)
VM_HOSTS=(x86-kernel-generic x86-noxsave)
ALL_HOSTS=("${PROCESS_HOSTS[@]}" "${VM_HOSTS[@]}")
OLD_KERNEL=3.10.0-1160.el7.x86_64
ENOSYS=$repo/deploy/enosys/run-under-3.10

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() { echo "fleet: $*" >&2; exit 2; }
say() { echo "fleet: $*"; }

# ---- configuration: the environment, else what `up` recorded, else the defaults ----
dir=${CIPHERFLEET_FLEET_DIR:-/var/lib/cipherfleet-fleet}
conf=$dir/fleet.env
recorded() { # KEY: the value `up` recorded, if any
  [ -f "$conf" ] && sed -n "s/^$1=//p" "$conf" | tail -n 1
}
pick() { # VAR KEY DEFAULT
  local v=${!1:-}
  [ -n "$v" ] || v=$(recorded "$2")
  printf '%s' "${v:-$3}"
}
subnet=$(pick CIPHERFLEET_FLEET_SUBNET subnet 10.77.0.0/24)
bridge=$(pick CIPHERFLEET_FLEET_BRIDGE bridge cfbr0)
nsprefix=$(pick CIPHERFLEET_FLEET_NETNS netns cf-)
hosts_wanted=$(pick CIPHERFLEET_FLEET_HOSTS hosts "${ALL_HOSTS[*]}")
bin=$(pick CIPHERFLEET_FLEET_BIN bin "$repo/dist")
agent_args=$(pick CIPHERFLEET_FLEET_AGENT_ARGS agent_args "")
vm_accel_wanted=$(pick CIPHERFLEET_FLEET_VM_ACCEL vm_accel auto)
vm_mem=$(pick CIPHERFLEET_FLEET_VM_MEM vm_mem 256)
vm_cache=${CIPHERFLEET_VM_CACHE:-/var/cache/cipherfleet-vm}

[[ $subnet =~ ^(10|172|192)\.([0-9]{1,3})\.([0-9]{1,3})\.0/24$ ]] \
  || die "CIPHERFLEET_FLEET_SUBNET=$subnet: give a private /24 such as 10.77.0.0/24"
net=${subnet%.0/24}
bridge_ip=$net.1
[[ $bridge =~ ^[A-Za-z0-9_]{1,12}$ ]] || die "CIPHERFLEET_FLEET_BRIDGE=$bridge: 1 to 12 letters, digits or _"
[[ $nsprefix =~ ^[A-Za-z0-9_.-]{0,32}$ ]] || die "CIPHERFLEET_FLEET_NETNS=$nsprefix: letters, digits, . _ - only"
case "$hosts_wanted" in
  all) hosts_wanted="${ALL_HOSTS[*]}" ;;
  process) hosts_wanted="${PROCESS_HOSTS[*]}" ;;
  vm) hosts_wanted="${VM_HOSTS[*]}" ;;
esac
read -r -a hosts <<<"$hosts_wanted"
[[ $vm_accel_wanted =~ ^(auto|tcg|kvm)$ ]] || die "CIPHERFLEET_FLEET_VM_ACCEL=$vm_accel_wanted: auto, tcg or kvm"
[[ $vm_mem =~ ^[0-9]+$ ]] && [ "$vm_mem" -ge 128 ] || die "CIPHERFLEET_FLEET_VM_MEM=$vm_mem: MiB, at least 128"
for h in "${hosts[@]}"; do
  [[ " ${ALL_HOSTS[*]} " == *" $h "* ]] || die "CIPHERFLEET_FLEET_HOSTS: unknown host '$h' (hosts: ${ALL_HOSTS[*]})"
done

index_of() { # HOST: its number 1…7, fixed, so a host keeps its address whatever subset runs
  local i
  for i in "${!ALL_HOSTS[@]}"; do [ "${ALL_HOSTS[$i]}" = "$1" ] && { echo $((i + 1)); return; }; done
  die "unknown host '$1' (hosts: ${ALL_HOSTS[*]})"
}
is_vm() { [[ " ${VM_HOSTS[*]} " == *" $1 "* ]]; }
ns_of() { echo "$nsprefix$1"; }
veth_of() { echo "$bridge-$(index_of "$1")"; }   # root side, a port of the bridge: a veth, or a VM's tap
addr_of() { echo "$net.$((10 + $(index_of "$1")))"; }
pidfile_of() { echo "$dir/run/$1.pid"; }

# ---- the network ----
ns_exists() { [ -e "/run/netns/$1" ]; }   # where `ip netns add` puts it
# (Output captured first: `grep -q` ending a pipe early fails it under pipefail.)
has_addr() { local a=$1 out; shift; out=$("$@"); grep -q "inet $a/24 " <<<"$out"; }
link_exists() { ip link show "$1" >/dev/null 2>&1; }

net_up() {
  [ "$(id -u)" -eq 0 ] || die "run as root: network namespaces and the bridge need it"
  command -v ip >/dev/null || die "ip (iproute2) is missing: run deploy/install-deps.sh"
  if ! link_exists "$bridge"; then
    ip link add "$bridge" type bridge
  fi
  has_addr "$bridge_ip" ip addr show dev "$bridge" || ip addr add "$bridge_ip/24" dev "$bridge"
  ip link set "$bridge" up
  local h ns veth peer
  for h in "${hosts[@]}"; do
    if is_vm "$h"; then
      # The VM's network card is this tap's other end: qemu opens it by name.
      veth=$(veth_of "$h")
      link_exists "$veth" || ip tuntap add dev "$veth" mode tap
      ip link set "$veth" master "$bridge"
      [ -e "$dir/run/$h.link-down" ] || ip link set "$veth" up
      continue
    fi
    ns=$(ns_of "$h") veth=$(veth_of "$h") peer="${bridge}p$(index_of "$h")"
    ns_exists "$ns" || ip netns add "$ns"
    if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
      link_exists "$veth" && ip link del "$veth"   # a pair left half-made
      ip link add "$veth" type veth peer name "$peer"
      ip link set "$peer" netns "$ns"
      ip -n "$ns" link set "$peer" name eth0
    fi
    ip link set "$veth" master "$bridge"
    # A link taken down with `link HOST down` stays down until `link HOST up`.
    [ -e "$dir/run/$h.link-down" ] || ip link set "$veth" up
    has_addr "$(addr_of "$h")" ip -n "$ns" addr show dev eth0 || ip -n "$ns" addr add "$(addr_of "$h")/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
  done
}

# ---- the agents ----
# A recorded pid that is alive and inside the host's namespace, or for a VM host a qemu booting this
# host's disk (a reused pid elsewhere is not ours).
running_pid() {
  local f pid
  f=$(pidfile_of "$1")
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  if is_vm "$1"; then
    local args
    args=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    grep -qxF "file=$dir/hosts/$1/disk.img,format=raw,if=virtio" <<<"$args" || return 1
  else
    [ "$(ip netns identify "$pid" 2>/dev/null)" = "$(ns_of "$1")" ] || return 1
  fi
  echo "$pid"
}

warned_enosys=false
# HOST: fills `cmd` (the program and its emulator), `prefix` (CIPHERFLEET_WORKER_PREFIX) and `labels`.
host_plan() {
  local x86=$bin/x86_64-unknown-linux-musl arm=$bin/aarch64-unknown-linux-musl
  prefix="" labels=(--label fleet=box)
  case "$1" in
    x86-aesni) cmd=("$x86/cipherfleet-agent") ;;
    x86-no-aesni)
      prefix="qemu-x86_64-static -cpu Nehalem"
      cmd=(qemu-x86_64-static -cpu Nehalem "$x86/cipherfleet-agent")
      labels+=(--label emulated=qemu-nehalem) ;;
    x86-old-kernel)
      prefix="qemu-x86_64-static -cpu Westmere -r $OLD_KERNEL"
      cmd=(qemu-x86_64-static -cpu Westmere -r "$OLD_KERNEL" "$x86/cipherfleet-agent")
      labels+=(--label emulated=qemu-westmere)
      if [ -x "$ENOSYS" ]; then
        # The filter is inherited by every child: the workers see a 3.10 kernel's system calls too.
        cmd=("$ENOSYS" "${cmd[@]}")
        labels+=(--label enosys=3.10)
      elif ! $warned_enosys; then
        say "warning: $ENOSYS is missing: x86-old-kernel runs without the ENOSYS filter (only uname says 3.10)" >&2
        warned_enosys=true
      fi ;;
    arm64)
      prefix="qemu-aarch64-static -cpu cortex-a72"
      cmd=(qemu-aarch64-static -cpu cortex-a72 "$arm/cipherfleet-agent")
      labels+=(--label emulated=qemu-cortex-a72) ;;
    x86-soft-build) cmd=("$x86/cipherfleet-agent-soft") ;;
    # VM hosts: the kernel's command line beyond the console, the driver expected to serve the
    # kernel's `aes`, whether deploy/install-agent.sh installs the agent inside.
    x86-kernel-generic)
      cmd=(qemu-system-x86_64) vm_append="modprobe.blacklist=aesni_intel" vm_kernel_aes=generic vm_install=0 ;;
    x86-noxsave)
      cmd=(qemu-system-x86_64) vm_append="noxsave" vm_kernel_aes=accelerated vm_install=1 ;;
  esac
}

check_binaries() {
  local h missing=() x86=$bin/x86_64-unknown-linux-musl
  for h in "${hosts[@]}"; do
    host_plan "$h"
    local c
    for c in "${cmd[@]}"; do
      case "$c" in
        */cipherfleet-agent*) [ -x "$c" ] || missing+=("$c (deploy/build-static.sh)") ;;
        qemu-*) command -v "$c" >/dev/null || missing+=("$c (deploy/install-deps.sh)") ;;
      esac
    done
    # x86-aesni runs software-path jobs in its sibling.
    [ "$h" != x86-aesni ] || [ -x "${cmd[0]}-soft" ] || missing+=("${cmd[0]}-soft (deploy/build-static.sh)")
    if is_vm "$h"; then
      local a
      for a in cipherfleet-agent cipherfleet-agent-soft; do
        [ -x "$x86/$a" ] || missing+=("$x86/$a (deploy/build-static.sh)")
      done
      command -v mke2fs >/dev/null || missing+=("mke2fs (e2fsprogs)")
    fi
  done
  [ ${#missing[@]} -eq 0 ] || die "missing: $(printf '%s\n' "${missing[@]}" | sort -u | paste -sd ' ')"
}

start_agent() { # HOST
  local h=$1 pid log
  if pid=$(running_pid "$h"); then
    say "$h: running (pid $pid)"
    return
  fi
  if is_vm "$h"; then
    start_vm "$h"
    return
  fi
  host_plan "$h"
  mkdir -p "$dir/run" "$dir/log" "$dir/hosts/$h/state"
  chmod 0700 "$dir/hosts" "$dir/hosts/$h" "$dir/hosts/$h/state"
  log=$dir/log/$h.log
  local extra=()
  read -r -a extra <<<"$agent_args"
  # setsid: each agent leads a process group of its own (its workers included), which `down` stops
  # as a whole. Neither setsid (not a group leader here) nor `ip netns exec` forks: $! is the agent.
  CIPHERFLEET_WORKER_PREFIX=$prefix CIPHERFLEET_LOG=${CIPHERFLEET_LOG:-info} \
    setsid ip netns exec "$(ns_of "$h")" "${cmd[@]}" run \
    --coordinator "$coordinator" --ca-cert "$ca_cert" --token-file "$token_file" \
    --name "$h" "${labels[@]}" --state-dir "$dir/hosts/$h/state" --spool-dir "$dir/hosts/$h/spool" \
    "${extra[@]}" </dev/null >>"$log" 2>&1 &
  pid=$!
  echo "$pid" >"$(pidfile_of "$h")"
  # A bad flag or binary ends at once; an unreachable coordinator does not (the agent retries).
  sleep 0.3
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "fleet: $h: the agent exited at once; the end of $log:" >&2
    tail -n 5 "$log" >&2
    exit 1
  fi
  say "$h: started (pid $pid, $(addr_of "$h"), log $log)"
}

# ---- the VM hosts ----
vm_image=""   # "KERNEL INITRAMFS RELEASE" of deploy/vm/image.sh, made once per command
vm_accel=""
vm_boot_files() {
  [ -n "$vm_image" ] && return
  vm_image=$(CIPHERFLEET_VM_CACHE=$vm_cache CIPHERFLEET_FLEET_BIN=$bin "$repo/deploy/vm/image.sh" build amd64) \
    || die "the VM hosts' boot files could not be made (deploy/vm/image.sh build)"
}

# tcg or kvm. KVM only where a probe boot with it reaches the initramfs and powers off: /dev/kvm can
# answer the KVM API on a machine whose nested guests never run. The answer is kept in the cache,
# per kernel, qemu and host kernel.
choose_accel() {
  [ -z "$vm_accel" ] || return 0
  if [ "$vm_accel_wanted" != auto ]; then vm_accel=$vm_accel_wanted; return; fi
  if [ ! -w /dev/kvm ]; then vm_accel=tcg; return; fi
  local kernel initrd release stamp
  read -r kernel initrd release <<<"$vm_image"
  stamp=$vm_cache/kvm-probe-$release-$(qemu-system-x86_64 --version | sed -n '1s/.*version \([^ ]*\).*/\1/p')-$(uname -r)
  if [ ! -f "$stamp" ]; then
    say "probing KVM: a guest boot with -accel kvm, at most 15 s"
    # (In a subshell: a qemu that aborts does not make bash report it.)
    if (timeout 15 qemu-system-x86_64 -accel kvm -cpu host -m 128 -nodefaults -no-user-config -display none \
      -no-reboot -kernel "$kernel" -initrd "$initrd" -append "console=ttyS0 panic=-1 rdinit=/bin/poweroff -- -f" \
      -serial none </dev/null >/dev/null 2>&1) 2>/dev/null; then
      echo kvm >"$stamp"
    else
      echo tcg >"$stamp"
    fi
  fi
  vm_accel=$(cat "$stamp")
  say "VM hosts run under $vm_accel ($stamp)"
}

# A MAC of the fleet's own (locally administered, QEMU's prefix): the host's index in the last byte.
mac_of() { printf '52:54:00:cf:%02x:%02x' "${net##*.}" "$(index_of "$1")"; }

start_vm() { # HOST
  local h=$1 pid log hdir kernel initrd release
  host_plan "$h"
  vm_boot_files
  choose_accel
  read -r kernel initrd release <<<"$vm_image"
  hdir=$dir/hosts/$h
  mkdir -p "$dir/run" "$dir/log" "$hdir"
  chmod 0700 "$dir/hosts" "$hdir"
  log=$dir/log/$h.log
  # The state disk: made once, kept by `down` (it holds the host credential and the spool).
  if [ ! -s "$hdir/disk.img" ]; then
    truncate -s 64M "$hdir/disk.img.new"
    mke2fs -q -t ext4 -L cf-state "$hdir/disk.img.new"
    mv "$hdir/disk.img.new" "$hdir/disk.img"
  fi
  # This host's settings, the token and the CA, appended to the shared initramfs as a second archive.
  local labels=(fleet=box "vm=qemu-$vm_accel") extra=()
  [ "$vm_accel" = kvm ] || labels+=(emulated=qemu-tcg)
  read -r -a extra <<<"$agent_args"
  # host.env is sourced by the guest's shell, each value in single quotes.
  [[ "$coordinator ${extra[*]}" != *"'"* ]] || die "$h: a single quote in the coordinator URL or CIPHERFLEET_FLEET_AGENT_ARGS cannot reach a VM"
  local cfg
  cfg=$(mktemp -d "$dir/run/$h.boot.XXXXXX")
  mkdir -p "$cfg/etc/cipherfleet-vm"
  install -m 0600 "$token_file" "$cfg/etc/cipherfleet-vm/token"
  install -m 0644 "$ca_cert" "$cfg/etc/cipherfleet-vm/ca.pem"
  {
    printf "CF_%s='%s'\n" NAME "$h" ADDR "$(addr_of "$h")/24" COORDINATOR "$coordinator" LABELS "${labels[*]}" \
      AGENT_ARGS "${extra[*]}" KERNEL_AES "$vm_kernel_aes" INSTALL "$vm_install" LOG "${CIPHERFLEET_LOG:-info}"
  } >"$cfg/etc/cipherfleet-vm/host.env"
  (umask 077; cat "$initrd" - >"$hdir/initrd.cpio") < <(cd "$cfg" && find . -mindepth 1 | LC_ALL=C sort | busybox cpio -o -H newc -R 0:0 2>/dev/null)
  rm -rf "$cfg"
  local accel=(-accel "tcg,tb-size=64" -cpu max)
  [ "$vm_accel" = tcg ] || accel=(-accel kvm -cpu host)
  echo "=== fleet.sh: $h: booting $release under $vm_accel, $(date -u +%FT%TZ)" >>"$log"
  # -no-reboot: a guest that powers off or panics (panic=-1) ends qemu, which `status` and a second
  # `up` see. setsid: `down` stops the group.
  setsid "${cmd[0]}" -name "cf-$h" "${accel[@]}" -smp 1 -m "$vm_mem" -nodefaults -no-user-config \
    -display none -no-reboot -kernel "$kernel" -initrd "$hdir/initrd.cpio" \
    -append "console=ttyS0 quiet panic=-1 $vm_append" \
    -chardev "file,id=console,path=$log,append=on" -serial chardev:console \
    -drive "file=$hdir/disk.img,format=raw,if=virtio" \
    -netdev "tap,id=net0,ifname=$(veth_of "$h"),script=no,downscript=no" \
    -device "virtio-net-pci,netdev=net0,mac=$(mac_of "$h")" -device virtio-rng-pci \
    </dev/null >>"$log" 2>&1 &
  pid=$!
  echo "$pid" >"$(pidfile_of "$h")"
  sleep 0.3
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "fleet: $h: qemu exited at once; the end of $log:" >&2
    tail -n 5 "$log" >&2
    exit 1
  fi
  say "$h: started (pid $pid, VM, $(addr_of "$h"), console $log)"
}

cmd_up() {
  coordinator=${opt_coordinator:-${CIPHERFLEET_COORDINATOR:-$(recorded coordinator)}}
  coordinator=${coordinator:-https://$bridge_ip:7443}
  ca_cert=${opt_ca_cert:-${CIPHERFLEET_CA_CERT:-$(recorded ca_cert)}}
  token_file=${opt_token_file:-${CIPHERFLEET_TOKEN_FILE:-$(recorded token_file)}}
  [ -n "$ca_cert" ] || die "up needs the coordinator's CA: --ca-cert PEM (serve --self-signed DIR makes DIR/ca.pem)"
  [ -n "$token_file" ] || die "up needs the enrollment token: --token-file F"
  [ -r "$ca_cert" ] || die "--ca-cert $ca_cert: not readable"
  [ -r "$token_file" ] || die "--token-file $token_file: not readable"
  case "$coordinator" in
    https://127.*|https://localhost*|https://\[::1\]*) die "--coordinator $coordinator: the hosts reach the coordinator over the bridge ($bridge_ip), not loopback" ;;
    https://*) ;;
    *) die "--coordinator $coordinator: https:// only (the fleet uses TLS)" ;;
  esac
  ca_cert=$(realpath "$ca_cert") token_file=$(realpath "$token_file")
  check_binaries
  mkdir -p "$dir"
  chmod 0755 "$dir"
  # Recorded before anything is made: a `down` after a half-failed `up` knows what to remove.
  {
    echo "# deploy/fleet.sh: what \`up\` used; later commands reuse it"
    printf '%s=%s\n' subnet "$subnet" bridge "$bridge" netns "$nsprefix" hosts "${hosts[*]}" bin "$bin" \
      agent_args "$agent_args" coordinator "$coordinator" ca_cert "$ca_cert" token_file "$token_file" \
      vm_accel "$vm_accel_wanted" vm_mem "$vm_mem"
  } >"$conf"
  net_up
  local h
  # The VMs first: they take longest to come up.
  for h in "${hosts[@]}"; do ! is_vm "$h" || start_agent "$h"; done
  for h in "${hosts[@]}"; do is_vm "$h" || start_agent "$h"; done
}

cmd_net() {
  mkdir -p "$dir"
  # The network as made now; what `up` recorded about the coordinator stays.
  local rest=""
  [ ! -f "$conf" ] || rest=$(grep -v -E '^(subnet|bridge|netns|hosts)=' "$conf" || true)
  {
    [ -z "$rest" ] || printf '%s\n' "$rest"
    printf '%s=%s\n' subnet "$subnet" bridge "$bridge" netns "$nsprefix" hosts "${hosts[*]}"
  } >"$conf"
  net_up
  say "bridge $bridge $bridge_ip/24; namespaces: $(for h in "${hosts[@]}"; do is_vm "$h" || printf '%s ' "$(ns_of "$h")"; done)"
}

cmd_down() {
  [ "$(id -u)" -eq 0 ] || die "run as root"
  local h ns pid pids i vms=()
  # SIGTERM to every agent's group: a running job gets its grace, the spool keeps what is unsent.
  # A VM's qemu ends at once, as at a power cut: its agent's credential and spool are on its disk,
  # written with fsync, and the coordinator re-queues its running job.
  for h in "${ALL_HOSTS[@]}"; do
    if pid=$(running_pid "$h"); then
      kill -TERM -- "-$pid" 2>/dev/null || true
      ! is_vm "$h" || vms+=("$h:$pid")
    fi
  done
  local vm
  for vm in "${vms[@]}"; do
    h=${vm%%:*} pid=${vm#*:}
    for i in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      [ "$i" -lt 40 ] || kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
    done
    say "$h: stopped (VM)"
  done
  for h in "${ALL_HOSTS[@]}"; do
    ns=$(ns_of "$h")
    ns_exists "$ns" || continue
    # Whatever still runs in the namespace, recorded or not (a half-failed `up`, a lost pid file).
    for i in $(seq 50); do
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -n "$pids" ] || break
      [ "$i" -lt 40 ] || kill -KILL $pids 2>/dev/null || true
      sleep 0.2
    done
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] || echo "fleet: warning: still running in $ns: $pids" >&2
    ip netns del "$ns"
    say "$h: stopped, namespace $ns removed"
  done
  # Deleting a namespace deletes its end of a veth pair, and with it the root end (a moment later:
  # the kernel cleans a namespace up asynchronously); a pair that never reached its namespace is still here.
  for h in "${ALL_HOSTS[@]}"; do
    local veth peer
    veth=$(veth_of "$h") peer="${bridge}p$(index_of "$h")"
    ! link_exists "$veth" || ip link del "$veth" 2>/dev/null || true
    ! link_exists "$peer" || ip link del "$peer" 2>/dev/null || true
  done
  if link_exists "$bridge"; then
    ip link del "$bridge"
    say "bridge $bridge removed"
  fi
  rm -rf "$dir/run"
  if $opt_purge; then
    rm -rf "$dir"
    say "run directory $dir removed"
  fi
}

cmd_status() {
  local online_json="" coord_bin=${CIPHERFLEET_FLEET_COORDINATOR_BIN:-}
  local coordinator ca_cert
  coordinator=${CIPHERFLEET_COORDINATOR:-$(recorded coordinator)}
  ca_cert=${CIPHERFLEET_CA_CERT:-$(recorded ca_cert)}
  if [ -z "$coord_bin" ]; then
    for c in "$bin/x86_64-unknown-linux-musl/cipherfleet-coordinator" "$repo/target/release/cipherfleet-coordinator" \
             "$repo/target/debug/cipherfleet-coordinator"; do
      [ -x "$c" ] && { coord_bin=$c; break; }
    done
  fi
  local why=""
  if [ -z "$coordinator" ]; then why="no coordinator recorded (fleet not up)"
  elif [ -z "$coord_bin" ]; then why="no coordinator binary (CIPHERFLEET_FLEET_COORDINATOR_BIN)"
  elif [ -z "$opt_admin_token_file" ] && [ -z "${CIPHERFLEET_ADMIN_TOKEN:-}" ]; then why="no admin token (--admin-token-file)"
  else
    local args=(hosts --format json --coordinator "$coordinator")
    [ -z "$ca_cert" ] || args+=(--ca-cert "$ca_cert")
    [ -z "$opt_admin_token_file" ] || args+=(--admin-token-file "$opt_admin_token_file")
    online_json=$("$coord_bin" "${args[@]}" 2>"$dir/status.err") || { why="coordinator: $(tail -n 1 "$dir/status.err")"; online_json=""; }
    rm -f "$dir/status.err"
  fi
  printf '%-19s %-8s %-12s %-8s %s\n' host pid address agent coordinator
  local h pid seen
  for h in "${hosts[@]}"; do
    if pid=$(running_pid "$h"); then state=running; else pid=-; state=stopped; fi
    if [ -n "$online_json" ]; then
      seen=$(python3 -c 'import json,sys
hosts=[h for h in json.load(sys.stdin) if h["name"]==sys.argv[1]]
print("unknown host" if not hosts else "retired" if hosts[0]["retired"] else "online" if hosts[0]["online"] else "offline")' "$h" <<<"$online_json")
    else
      seen=unknown
    fi
    printf '%-19s %-8s %-12s %-8s %s\n' "$h" "$pid" "$(addr_of "$h")" "$state" "$seen"
  done
  [ -z "$why" ] || echo "(coordinator's view unknown: $why)"
  # Each VM's own check at its last boot (deploy/vm/init): which driver serves the kernel's AES.
  for h in "${hosts[@]}"; do
    is_vm "$h" || continue
    local check
    check=$(grep -a 'cipherfleet-vm: kernel aes:' "$dir/log/$h.log" 2>/dev/null | tail -n 1 | sed 's/.*cipherfleet-vm: //' || true)
    printf '%-19s %s\n' "$h" "${check:-kernel aes: not checked yet (no boot reached it; console $dir/log/$h.log)}"
  done
  link_exists "$bridge" && echo "bridge $bridge $bridge_ip/24, coordinator ${coordinator:-?}" || echo "bridge $bridge: absent"
}

cmd_link() { # HOST up|down
  [ $# -eq 2 ] || die "usage: fleet.sh link HOST up|down"
  index_of "$1" >/dev/null
  case "$2" in up|down) ;; *) die "link $1 $2: up or down" ;; esac
  link_exists "$(veth_of "$1")" || die "$1 has no link (fleet not up?)"
  # The root end: the host's eth0 loses its carrier, as when a cable is pulled.
  mkdir -p "$dir/run"
  if [ "$2" = down ]; then : >"$dir/run/$1.link-down"; else rm -f "$dir/run/$1.link-down"; fi
  ip link set "$(veth_of "$1")" "$2"
  say "$1: link $2"
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
command=$1; shift
opt_coordinator="" opt_ca_cert="" opt_token_file="" opt_admin_token_file="" opt_purge=false
link_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --coordinator|--ca-cert|--token-file|--admin-token-file)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --coordinator) opt_coordinator=$2 ;;
        --ca-cert) opt_ca_cert=$2 ;;
        --token-file) opt_token_file=$2 ;;
        --admin-token-file) opt_admin_token_file=$2 ;;
      esac
      shift ;;
    --purge) opt_purge=true ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) link_args+=("$1") ;;
  esac
  shift
done
case "$command" in
  link) ;;
  *) [ ${#link_args[@]} -eq 0 ] || die "$command: unexpected argument '${link_args[0]}' (see --help)" ;;
esac
case "$command" in
  up) cmd_up ;;
  net) cmd_net ;;
  down) cmd_down ;;
  status) cmd_status ;;
  link) cmd_link "${link_args[@]}" ;;
  -h|--help|help) usage ;;
  *) die "unknown command '$command' (up, down, status, net, link; see --help)" ;;
esac
