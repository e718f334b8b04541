#!/usr/bin/env bash
# The boot files of deploy/fleet.sh's VM hosts, made at run time from Debian's own packages:
#   fetch [ARCH]   downloads Debian's kernel package (linux-image-amd64's current ABI) with
#                  `apt-get download` and unpacks the kernel, its config and the modules the VM hosts
#                  load into the cache; the package itself is not kept (deploy/install-deps.sh runs this)
#   build [ARCH]   prints `KERNEL INITRAMFS RELEASE`, making the initramfs when one of its inputs changed
#                  (KERNEL is the uncompressed ELF kernel, extracted once from Debian's vmlinuz: qemu boots
#                  it through its PVH entry, so TCG does not run the XZ decompressor at every boot):
#                  busybox-static; the static agent and its software sibling (CIPHERFLEET_FLEET_BIN/<triple>/);
#                  kmod as modprobe, so that `modprobe.blacklist=` on the kernel command line holds as on
#                  any Debian host; the modules with their dependencies (virtio, ext4 for the state disk,
#                  the arch's crypto drivers such as aesni_intel, af_alg and algif_*); the machine's own
#                  openssl, bash, getent, useradd, install and setpriv with their libraries (openssl for the
#                  kernel-crypto comparisons, the rest for deploy/install-agent.sh and the unit it installs); deploy/vm/init as /init and
#                  deploy/install-agent.sh with its systemd files.
#   clean          removes the cache
# ARCH is amd64 (the default); the arm64 host is not built by this script yet.
# The initramfs is an uncompressed cpio: under TCG the kernel copies it faster than it would inflate it.
#
# Environment: CIPHERFLEET_VM_CACHE  the cache (/var/cache/cipherfleet-vm)
#              CIPHERFLEET_FLEET_BIN where <triple>/cipherfleet-agent{,-soft} are (dist)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${CIPHERFLEET_VM_CACHE:-/var/cache/cipherfleet-vm}
bin=${CIPHERFLEET_FLEET_BIN:-$repo/dist}

die() { echo "vm-image: $*" >&2; exit 2; }
# Scratch directories, removed however the script ends.
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# The modules a VM host may load, as paths under lib/modules/RELEASE/kernel/ (tar wildcards). The
# crypto directories come whole: the kernel instantiates templates (gcm, ccm, ctr…) on demand.
modules_of() {
  case "$1" in
    amd64) printf '%s\n' 'crypto/*' 'arch/x86/crypto/*' 'lib/crypto/*' 'lib/crc*' 'lib/libcrc32c.ko' \
      'drivers/virtio/*' 'drivers/net/virtio_net.ko' 'drivers/net/net_failover.ko' 'net/core/failover.ko' \
      'drivers/block/virtio_blk.ko' 'drivers/char/hw_random/virtio-rng.ko' 'fs/ext4/*' 'fs/jbd2/*' 'fs/mbcache.ko' ;;
    *) die "unknown architecture '$1' (amd64)" ;;
  esac
}
triple_of() {
  case "$1" in
    amd64) echo x86_64-unknown-linux-musl ;;
    *) die "unknown architecture '$1' (amd64)" ;;
  esac
}

# The kernel unpacked by `fetch`: prints its release (the newest, if several).
kernel_release() {
  local d
  d=$(ls -d "$cache/kernel-$1"/lib/modules/*/ 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] || die "no $1 kernel in $cache: run deploy/install-deps.sh (or deploy/vm/image.sh fetch $1)"
  basename "$d"
}

# The uncompressed kernel inside Debian's vmlinuz (an XZ stream after the setup code), as
# the kernel's scripts/extract-vmlinux finds it; made once per release.
vmlinux_of() { # KERNEL-DIR RELEASE: prints the path of vmlinux-RELEASE
  local boot=$1/boot release=$2 off
  if [ ! -s "$boot/vmlinux-$release" ]; then
    off=$(grep -abo $'\xfd7zXZ\x00' "$boot/vmlinuz-$release" | head -n 1 | cut -d: -f1)
    [ -n "$off" ] || die "$boot/vmlinuz-$release has no XZ stream: not a Debian x86 kernel?"
    # xz stops with an error at the bytes after the stream; what it wrote is the whole kernel.
    tail -c +$((off + 1)) "$boot/vmlinuz-$release" | xz -dc >"$boot/vmlinux-$release.tmp" 2>/dev/null || true
    [ "$(head -c 4 "$boot/vmlinux-$release.tmp" | od -An -c | tr -d ' ')" = '177ELF' ] \
      || die "could not extract the kernel from $boot/vmlinuz-$release (xz-utils installed?)"
    mv "$boot/vmlinux-$release.tmp" "$boot/vmlinux-$release"
  fi
  echo "$boot/vmlinux-$release"
}

cmd_fetch() {
  local arch=$1 abi deb tmp
  [ "$(id -u)" -eq 0 ] || die "fetch runs apt-get: run as root"
  [ "$arch" = "$(dpkg --print-architecture)" ] || die "fetch $arch: only this machine's architecture"
  # The metapackage names the current ABI's package: linux-image-6.1.0-NN-amd64.
  current_abi() {
    apt-cache depends "linux-image-$arch" 2>/dev/null | sed -n "s/^ *Depends: \(linux-image-[^ ]*-$arch\)$/\1/p" | head -n 1
  }
  abi=$(current_abi)
  if [ -z "$abi" ]; then
    apt-get update -qq
    abi=$(current_abi)
  fi
  [ -n "$abi" ] || die "apt-cache knows no linux-image-$arch, even after apt-get update"
  if [ -d "$cache/kernel-$arch/lib/modules/${abi#linux-image-}" ]; then
    echo "vm-image: $abi already unpacked in $cache/kernel-$arch"
    return
  fi
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/fetch.XXXXXX")
  scratch+=("$tmp")
  # apt's sandbox user must be able to write where it downloads.
  chmod 0755 "$tmp"
  (cd "$tmp" && apt-get download -q "$abi" >/dev/null 2>&1) || (cd "$tmp" && apt-get download "$abi")
  deb=$(ls "$tmp"/*.deb)
  local release=${abi#linux-image-} patterns=() m
  while read -r m; do patterns+=("./lib/modules/$release/kernel/$m"); done < <(modules_of "$arch")
  mkdir "$tmp/root"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/root" --wildcards \
    "./boot/vmlinuz-$release" "./boot/config-$release" "./lib/modules/$release/modules.*" "${patterns[@]}"
  rm -rf "$cache/kernel-$arch"
  mv "$tmp/root" "$cache/kernel-$arch"
  echo "vm-image: unpacked $abi ($(du -sh "$cache/kernel-$arch" | cut -f1)) into $cache/kernel-$arch"
}

# copy_with_libs ROOT PROGRAM…: each program and the shared libraries ldd names, at their own paths.
copy_with_libs() {
  local root=$1 p lib
  shift
  for p in "$@"; do
    p=$(command -v "$p") || die "$p is missing: run deploy/install-deps.sh"
    install -D -m 0755 "$p" "$root$p"
    for lib in $(ldd "$p" | grep -o '/[^ ]*'); do
      [ -e "$root$lib" ] || install -D -m 0755 "$(realpath "$lib")" "$root$lib"
    done
  done
}

cmd_build() {
  local arch=$1 release triple kdir
  release=$(kernel_release "$arch")
  kdir=$cache/kernel-$arch
  triple=$(triple_of "$arch")
  local agent=$bin/$triple/cipherfleet-agent busybox=/bin/busybox
  for f in "$agent" "$agent-soft"; do [ -x "$f" ] || die "$f is missing: run deploy/build-static.sh"; done
  # (The list captured first: `grep -q` ending a pipe early fails it under pipefail.)
  local applets
  applets=$("$busybox" --list 2>/dev/null) && grep -qx cpio <<<"$applets" || die "busybox-static is missing: run deploy/install-deps.sh"
  command -v depmod >/dev/null && command -v kmod >/dev/null || die "kmod is missing: run deploy/install-deps.sh"
  # What the image is made of: a change to any of these makes a new one.
  local inputs key out
  inputs=("$agent" "$agent-soft" "$busybox" "$(command -v kmod)" "$(command -v openssl)" "$(command -v bash)"
    "$(command -v getent)" "$(command -v useradd)" "$(command -v install)" "$(command -v setpriv)" "$repo/deploy/vm/init" "$repo/deploy/vm/image.sh"
    "$repo/deploy/install-agent.sh" "$repo/deploy/systemd/cipherfleet-agent.service"
    "$repo/deploy/systemd/cipherfleet-agent.sysusers" "$kdir/boot/vmlinuz-$release")
  key=$(stat -L -c '%n %s %Y' "${inputs[@]}" | sha256sum | cut -c1-16)
  out=$cache/initramfs-$arch-$key.cpio
  if [ ! -s "$out" ]; then
    local root
    root=$(mktemp -d "$cache/root.XXXXXX")
    scratch+=("$root")
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,root,etc/modprobe.d,var/lib,opt/cipherfleet/bin}
    install -m 0755 "$busybox" "$root/bin/busybox"
    local applet
    for applet in $("$busybox" --list); do
      case "$applet" in modprobe|insmod|rmmod|lsmod|modinfo|depmod|bash) continue ;; esac
      [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
    done
    # Only /bin exists in the image's PATH for busybox; the copied programs keep their own paths.
    copy_with_libs "$root" kmod openssl bash getent useradd install setpriv
    for applet in modprobe insmod rmmod lsmod modinfo depmod; do ln -sf "$(command -v kmod)" "$root/sbin/$applet"; done
    # Scripts start with #!/usr/bin/env bash; system users get /usr/sbin/nologin.
    ln -sf /bin/busybox "$root/usr/bin/env"
    ln -sf /bin/busybox "$root/usr/sbin/nologin"
    # openssl's configuration and providers (legacy, fips when present).
    [ ! -d /usr/lib/ssl ] || cp -a /usr/lib/ssl "$root/usr/lib/"
    local mods
    mods=$(openssl version -m | sed -n 's/^MODULESDIR: "\(.*\)"$/\1/p')
    [ -z "$mods" ] || [ ! -d "$mods" ] || { mkdir -p "$root$mods"; cp -a "$mods/." "$root$mods/"; }
    install -m 0755 "$agent" "$agent-soft" "$root/opt/cipherfleet/bin/"
    install -m 0755 "$repo/deploy/vm/init" "$root/init"
    mkdir -p "$root/opt/cipherfleet/deploy/systemd"
    install -m 0755 "$repo/deploy/install-agent.sh" "$root/opt/cipherfleet/deploy/"
    install -m 0644 "$repo/deploy/systemd/cipherfleet-agent.service" "$repo/deploy/systemd/cipherfleet-agent.sysusers" \
      "$root/opt/cipherfleet/deploy/systemd/"
    mkdir -p "$root/lib/modules"
    cp -a "$kdir/lib/modules/$release" "$root/lib/modules/"
    depmod -b "$root" "$release"
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
    printf 'root:x:0:\n' >"$root/etc/group"
    printf 'root:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
    printf 'passwd: files\ngroup: files\nshadow: files\n' >"$root/etc/nsswitch.conf"
    : >"$root/etc/login.defs"
    rm -f "$cache/initramfs-$arch-"*.cpio
    (cd "$root" && find . -mindepth 1 | LC_ALL=C sort | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null) >"$out.tmp"
    mv "$out.tmp" "$out"
  fi
  echo "$(vmlinux_of "$kdir" "$release") $out $release"
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in
  fetch) cmd_fetch "${2:-amd64}" ;;
  build) cmd_build "${2:-amd64}" ;;
  clean) rm -rf "$cache"; echo "vm-image: removed $cache" ;;
  -h|--help|help) usage ;;
  *) die "unknown command '$1' (fetch, build, clean; see --help)" ;;
esac
