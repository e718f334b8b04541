#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine (idempotent):
#   Debian: qemu-user-static (emulated ARM64 and non-AES-NI x86 hosts),
#           postgresql (the coordinator's tests run a private cluster from its binaries),
#           clang and llvm (ring, under the agent's TLS, has C and assembly that the static
#           musl builds cross-compile with clang and archive with llvm-ar; llvm-strip strips them),
#           openssl (the TLS tests make throwaway certificates with it),
#           iproute2 (the findings test puts each agent in a network namespace of its own),
#           chromium (the report's browser and XSS tests drive it headless over the DevTools pipe),
#           python3-seccomp (deploy/enosys/run-under-3.10: the old-kernel host's ENOSYS filter),
#           tmux (deploy/check-stop.sh presses Ctrl-C on the quickstart's terminal)
#   Debian, for deploy/check-deploy.sh (without recommended packages, and without starting the
#   Prometheus server the package ships): systemd (systemd-analyze, systemd-sysusers),
#           prometheus (promtool), kubernetes-client (kubectl kustomize), python3-yaml,
#           buildah (the FROM-scratch images)
#   rustup: musl targets for the static builds, rustfmt and clippy
#   Debian: python3-seccomp (deploy/enosys/run-under-3.10, the old-kernel host's ENOSYS filter)
#   Debian, for the fleet's VM hosts (without recommended packages): qemu-system-x86, busybox-static
#           and kmod (their initramfs), e2fsprogs (their state disks), xz-utils (to take the kernel
#           out of its vmlinuz); and Debian's kernel package,
#           downloaded and unpacked into the VM cache by deploy/vm/image.sh fetch (not installed:
#           this machine keeps its own kernel)
# --quickstart: only what deploy/quickstart.sh needs (PostgreSQL, clang/llvm, python3, iproute2,
# qemu-user-static and python3-seccomp, the VM hosts' packages and kernel, the musl targets);
# --no-qemu leaves out the emulators and the VM hosts' packages, --no-vm only the VM hosts' ones.
#
# Usage: deploy/install-deps.sh [--quickstart [--no-qemu | --no-vm]]
set -euo pipefail

quickstart=false qemu=true vm=true
for arg in "$@"; do
  case "$arg" in
    --quickstart) quickstart=true ;;
    --no-qemu) qemu=false vm=false ;;
    --no-vm) vm=false ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "install-deps: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
$vm || $quickstart || { echo "install-deps: --no-qemu and --no-vm go with --quickstart" >&2; exit 2; }

# apt_install [APT-OPTION…] -- PACKAGE…: as root, or says what to run.
apt_install() {
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: please install as root: apt-get install ${opts[*]}${opts[*]:+ }$*" >&2
    exit 1
  fi
  echo "install-deps: apt-get install ${opts[*]}${opts[*]:+ }$*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${opts[@]}" "$@" >/dev/null
}

need_apt=()
! $qemu || command -v qemu-aarch64-static >/dev/null || need_apt+=(qemu-user-static)
command -v python3 >/dev/null || need_apt+=(python3)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_apt+=(postgresql)
command -v clang >/dev/null || need_apt+=(clang)
command -v llvm-ar >/dev/null && command -v llvm-strip >/dev/null || need_apt+=(llvm)
command -v ip >/dev/null || need_apt+=(iproute2)
# deploy/enosys/run-under-3.10 (the old-kernel host's ENOSYS filter) runs Debian's python3.
! $qemu || /usr/bin/python3 -c 'import seccomp' 2>/dev/null || need_apt+=(python3-seccomp)
if ! $quickstart; then
  command -v openssl >/dev/null || need_apt+=(openssl)
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need_apt+=(chromium)
  command -v tmux >/dev/null || need_apt+=(tmux)
fi
[ ${#need_apt[@]} -eq 0 ] || apt_install -- "${need_apt[@]}"

if $vm; then
  need_vm=()
  command -v qemu-system-x86_64 >/dev/null || need_vm+=(qemu-system-x86)
  # The static busybox (deploy/vm/image.sh copies it into the initramfs), not a dynamic one.
  dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need_vm+=(busybox-static)
  command -v depmod >/dev/null && command -v kmod >/dev/null || need_vm+=(kmod)
  command -v mke2fs >/dev/null || need_vm+=(e2fsprogs)
  command -v xz >/dev/null || need_vm+=(xz-utils)
  [ ${#need_vm[@]} -eq 0 ] || apt_install --no-install-recommends -- "${need_vm[@]}"
  # Debian's kernel for the VM hosts, unpacked into the VM cache (a no-op when it is there).
  "$(dirname "$0")/vm/image.sh" fetch amd64
fi

if $quickstart; then
  installed=$(rustup target list --installed)
  for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
  done
  exit 0
fi

need_deploy=()
command -v systemd-analyze >/dev/null && command -v systemd-sysusers >/dev/null || need_deploy+=(systemd)
command -v promtool >/dev/null || need_deploy+=(prometheus)
command -v kubectl >/dev/null || need_deploy+=(kubernetes-client)
python3 -c 'import yaml' 2>/dev/null || need_deploy+=(python3-yaml)
command -v buildah >/dev/null || need_deploy+=(buildah)
if [ ${#need_deploy[@]} -gt 0 ]; then
  # Only promtool is wanted from the prometheus package: keep its server from being started
  # (policy-rc.d answers 101, "action forbidden"), unless a policy is already in place…
  policy=/usr/sbin/policy-rc.d
  own_policy=false
  if [ "$(id -u)" -eq 0 ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && own_policy=true
  fi
  status=0
  (apt_install --no-install-recommends -- "${need_deploy[@]}") || status=$?
  if $own_policy; then rm -f "$policy"; fi
  # …nor started at the next boot.
  if [[ " ${need_deploy[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
  [ "$status" -eq 0 ] || exit "$status"
fi

installed=$(rustup target list --installed)
for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done
components=$(rustup component list --installed)
for c in rustfmt clippy; do
  grep -q "^$c" <<<"$components" || rustup component add "$c"
done
