#!/usr/bin/env bash
# Runs `probe` and `selftest` of the static builds on emulated hosts and checks
# what they detect. Emulated timings are not real; this checks detection and
# correctness only:
#   ARM64 Cortex-A72                       → arch aarch64, AES usable, emulation seen in cpuinfo,
#                                            selftest passes (both flavours; the soft one all-soft, Poly1305 included)
#   x86-64 Nehalem (no AES-NI)             → AES not advertised/usable, soft backend, selftest passes;
#                                            ring and the host openssl (under the emulator) say software
#   x86-64 Westmere, old kernel release    → AES-NI usable, AVX absent, kernel 3.10.0-1160.el7.x86_64;
#                                            a CBC-HMAC point (no SHA-NI) says path_used=partial;
#                                            then the same without the system calls newer than 3.10
#                                            (deploy/enosys/check.sh: the ENOSYS filter)
# Usage: deploy/qemu-check.sh   (after deploy/build-static.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
check() { # name, python expression over `f` (probe JSON), binary…
  local name="$1" expr="$2"; shift 2
  local json
  if ! json=$("$@" probe --format json); then
    echo "FAIL $name: probe exited non-zero"; fail=1; return
  fi
  if python3 -c "import json,sys; f=json.load(sys.stdin); sys.exit(0 if ($expr) else 1)" <<<"$json"; then
    echo "ok   $name: probe"
  else
    echo "FAIL $name: probe facts do not satisfy: $expr"; echo "$json" | head -80; fail=1
  fi
}
selftest() { # name, binary…
  local name="$1"; shift
  local out
  if out=$("$@" selftest 2>&1); then
    echo "ok   $name: $(tail -n 1 <<<"$out")"
  else
    echo "FAIL $name: selftest"; echo "$out" | grep -v '^ok' | head -20; fail=1
  fi
}

arm=dist/aarch64-unknown-linux-musl
x86=dist/x86_64-unknown-linux-musl
for f in "$arm/cipherfleet-agent" "$arm/cipherfleet-agent-soft" "$x86/cipherfleet-agent" "$x86/cipherfleet-agent-soft"; do
  [ -x "$f" ] || { echo "missing $f: run deploy/build-static.sh first" >&2; exit 1; }
done

A72=(qemu-aarch64-static -cpu cortex-a72)
check "aarch64 cortex-a72" 'f["arch"]=="aarch64" and "aes" in f["features"]["usable"] and f["crypto"]["backends"]["aes"]=="armv8-aes" and f["virtualization"]["cpuinfo_foreign"]' "${A72[@]}" "$arm/cipherfleet-agent"
check "aarch64 cortex-a72 soft build" 'f["build"]["flavour"]=="software" and set(f["crypto"]["backends"].values())=={"soft"} and "poly1305" in f["crypto"]["backends"]' "${A72[@]}" "$arm/cipherfleet-agent-soft"
selftest "aarch64 cortex-a72" "${A72[@]}" "$arm/cipherfleet-agent"
selftest "aarch64 cortex-a72 soft build" "${A72[@]}" "$arm/cipherfleet-agent-soft"

NEHALEM=(qemu-x86_64-static -cpu Nehalem)
check "x86-64 Nehalem (no AES-NI)" '"aes" not in f["features"]["advertised"] and "aes" not in f["features"]["usable"] and f["crypto"]["backends"]["aes"]=="soft" and not f["crypto"]["aes_hardware_accelerated"]' "${NEHALEM[@]}" "$x86/cipherfleet-agent"
selftest "x86-64 Nehalem accelerated build on software fallback" "${NEHALEM[@]}" "$x86/cipherfleet-agent"
selftest "x86-64 Nehalem soft build" "${NEHALEM[@]}" "$x86/cipherfleet-agent-soft"

WESTMERE=(qemu-x86_64-static -cpu Westmere -r 3.10.0-1160.el7.x86_64)
check "x86-64 Westmere, kernel 3.10" '"aes" in f["features"]["usable"] and "avx" not in f["features"]["usable"] and f["kernel_release"]=="3.10.0-1160.el7.x86_64" and f["crypto"]["backends"]["aes"]=="aes-ni" and f["crypto"]["backends"]["ghash"]=="soft"' "${WESTMERE[@]}" "$x86/cipherfleet-agent"
selftest "x86-64 Westmere, kernel 3.10" "${WESTMERE[@]}" "$x86/cipherfleet-agent"

# A short emulated benchmark: proves the worker/sibling machinery runs on the emulated host.
# Workers are child processes; the prefix keeps them inside the same emulated CPU.
if out=$(CIPHERFLEET_WORKER_PREFIX="${A72[*]}" "${A72[@]}" "$arm/cipherfleet-agent" bench -a aes-128-gcm --size 1k --seconds 0.05 --path both --format json 2>&1) \
   && python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; sys.exit(0 if len(rows)==2 and all(r["status"]=="ok" for r in rows) and rows[1]["path_used"]=="software" else 1)' <<<"$out"; then
  echo "ok   aarch64 cortex-a72: bench both paths under emulation"
else
  echo "FAIL aarch64 cortex-a72: bench"; echo "$out" | head -5; fail=1
fi

# AES-NI without SHA-NI: CBC-HMAC-SHA256 ran partly in hardware, and says so.
if out=$(CIPHERFLEET_WORKER_PREFIX="${WESTMERE[*]}" "${WESTMERE[@]}" "$x86/cipherfleet-agent" bench -a aes-128-cbc-hmac-sha256 --size 1k --seconds 0.05 --format json 2>&1) \
   && python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); sys.exit(0 if r["status"]=="ok" and r["path_used"]=="partial" and r["backends"]["aes"]=="aes-ni" and r["backends"]["sha256"]=="soft" else 1)' <<<"$out"; then
  echo "ok   x86-64 Westmere: CBC-HMAC measured as path_used=partial"
else
  echo "FAIL x86-64 Westmere: CBC-HMAC bench"; echo "$out" | head -5; fail=1
fi

# Without AES-NI the accelerated build must report the software path it really took.
if out=$(CIPHERFLEET_WORKER_PREFIX="${NEHALEM[*]}" "${NEHALEM[@]}" "$x86/cipherfleet-agent" bench -a aes-128-gcm --size 1k --seconds 0.05 --format json 2>&1) \
   && python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); sys.exit(0 if r["status"]=="ok" and r["path_requested"]=="accelerated" and r["path_used"]=="software" and r["backends"]["aes"]=="soft" else 1)' <<<"$out"; then
  echo "ok   x86-64 Nehalem: accelerated request measured as path_used=software"
else
  echo "FAIL x86-64 Nehalem: bench"; echo "$out" | head -5; fail=1
fi

# ring and the host's OpenSSL on a CPU without AES-NI: ring's inferred path is software (vpaes,
# it has no software build), and the host's openssl runs under the same emulator (the prefix),
# so its software path is Nehalem's too. OpenSSL's point takes three runs of a second.
if command -v openssl >/dev/null; then
  if out=$(CIPHERFLEET_WORKER_PREFIX="${NEHALEM[*]}" "${NEHALEM[@]}" "$x86/cipherfleet-agent" bench --provider ring,openssl -a aes-256-gcm --size 1k --seconds 1 --format json 2>&1) \
     && python3 -c 'import json,sys; rows={r["provider"]: r for r in map(json.loads, sys.stdin)}; ok=lambda p: rows[p]["status"]=="ok" and rows[p]["path_used"]=="software" and rows[p]["path_basis"]=="inferred" and rows[p]["backends"]["aes"]=="vpaes"; sys.exit(0 if ok("ring") and ok("openssl") else 1)' <<<"$out"; then
    echo "ok   x86-64 Nehalem: ring and the host's openssl measured, path_used=software (inferred)"
  else
    echo "FAIL x86-64 Nehalem: bench --provider ring,openssl"; echo "$out" | head -5; fail=1
  fi
fi

# The old-kernel host as the emulated fleet runs it: also without the system calls added after 3.10.
deploy/enosys/check.sh || fail=1

exit $fail
