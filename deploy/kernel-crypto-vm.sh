#!/usr/bin/env bash
# Boots a real Debian kernel under qemu with its crypto modules and, when given, the static
# agent, and prints what the kernel crypto API offers there: the agent's probe (providers,
# chosen drivers, AF_ALG), its selftest (the kernel's answers through AF_ALG), `bench --provider
# kernel` on both paths, and /proc/crypto. It is how agent/fixtures/proc-crypto/*-6.1-*.txt
# were captured and how the AF_ALG measurements were tested: the development VM's own kernel
# has no AF_ALG. TCG (no KVM needed): the timings are emulated, only the behaviour counts.
#
#   ARCH      x86_64 (default) or arm64: the kernel's architecture (arm64 boots under
#             qemu-system-aarch64 -M virt -cpu max)
#   AGENT     a static agent of that architecture (deploy/build-static.sh puts one in dist/);
#             without it only the modules are loaded and /proc/crypto printed
#   KERNEL    the Debian kernel package (default linux-image-6.1.0-57-<arch>, bookworm's)
# Downloads the kernel and busybox-static packages with apt-get download (arm64 needs
# `dpkg --add-architecture arm64` and apt-get update first), and needs cpio and qemu-system-x86
# or qemu-system-arm. Output: the serial console, sections headed "==== name".
#
# Usage: deploy/kernel-crypto-vm.sh [AGENT]      (ARCH=arm64 deploy/kernel-crypto-vm.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${ARCH:-x86_64}
agent=${1:-}
case $arch in
  x86_64) deb_arch=amd64 qemu=(qemu-system-x86_64 -accel tcg -cpu max -smp 2) console=ttyS0 ;;
  arm64) deb_arch=arm64 qemu=(qemu-system-aarch64 -M virt -cpu max -smp 2) console=ttyAMA0 ;;
  *) echo "kernel-crypto-vm: ARCH must be x86_64 or arm64, not '$arch'" >&2; exit 2 ;;
esac
kernel_pkg=${KERNEL:-linux-image-6.1.0-57-$deb_arch}
for tool in cpio depmod "${qemu[0]}"; do
  command -v "$tool" >/dev/null || { echo "kernel-crypto-vm: $tool is missing" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q "$kernel_pkg:$deb_arch" "busybox-static:$deb_arch" >&2)
mkdir -p "$work/pkg" "$work/bb" "$work/root"
dpkg-deb -x "$work"/linux-image-*.deb "$work/pkg"
dpkg-deb -x "$work"/busybox-static_*.deb "$work/bb"
kver=$(ls "$work/pkg/lib/modules")
depmod -b "$work/pkg" "$kver"

root=$work/root
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp} "$root/lib/modules/$kver"
cp "$work/bb/bin/busybox" "$root/bin/busybox"
cp "$work/pkg/lib/modules/$kver"/modules.* "$root/lib/modules/$kver/"
# The AF_ALG types, the AES, GHASH, ChaCha20 and Poly1305 drivers of both architectures, the
# templates, and what they depend on (modules.dep names them; copying the tree is simpler).
(cd "$work/pkg/lib/modules/$kver" && find kernel/crypto kernel/arch kernel/lib -name '*.ko*' | cpio -pdm "$root/lib/modules/$kver" 2>/dev/null)
find "$root/lib/modules" -name '*.ko.xz' -exec xz -d {} +
sed -i 's/\.ko\.xz/.ko/g' "$root/lib/modules/$kver/modules.dep"
if [ -n "$agent" ]; then
  cp "$agent" "$root/bin/cipherfleet-agent"
fi
cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev 2>/dev/null
# The kernel loads crypto modules on demand (crypto-ghash-generic…) through /sbin/modprobe.
ln -s /bin/busybox /sbin/modprobe
for m in af_alg algif_skcipher algif_aead aesni_intel ghash_clmulni_intel chacha_x86_64 poly1305_x86_64 \
         aes_ce_blk aes_ce_cipher ghash_ce chacha_neon poly1305_neon aes_neon_bs gcm ctr xts chacha20poly1305; do
  modprobe $m 2>/dev/null
done
echo "==== uname"; uname -a
if [ -x /bin/cipherfleet-agent ]; then
  echo "==== probe"; /bin/cipherfleet-agent probe 2>&1
  echo "==== selftest"; /bin/cipherfleet-agent selftest 2>&1 | grep -E '^FAIL|kernel|known-answer'
  echo "==== bench"
  CIPHERFLEET_WORKER_TIME_LIMIT=120 /bin/cipherfleet-agent bench --provider kernel --path both \
    -a aes-128-cbc,aes-256-ctr,aes-256-gcm,chacha20-poly1305 --size 16,16KiB --direction both --seconds 0.3 2>&1
fi
echo "==== proc-crypto"; cat /proc/crypto
echo "==== end"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"
timeout 900 "${qemu[@]}" -m 2048 -kernel "$work/pkg/boot/vmlinuz-$kver" -initrd "$work/initrd.gz" \
  -append "console=$console quiet panic=-1" -nographic -no-reboot | tr -d '\r'
