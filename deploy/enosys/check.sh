#!/usr/bin/env bash
# Checks the old-kernel host as the emulated fleet runs it: the static x86-64 agent under
# run-under-3.10 (ENOSYS for every system call added after Linux 3.10) and
# qemu-x86_64-static -cpu Westmere -r 3.10.0-1160.el7.x86_64 (AES-NI, no AVX, CentOS 7's uname).
#   - the filter itself: a listed call (getrandom, and mseal, newer than libseccomp's table)
#     answers ENOSYS under it, natively and under qemu, and works without it; no_new_privs and
#     seccomp mode 2 are set; a missing list file or python3-seccomp is a clear error;
#   - the agent under both: probe (kernel 3.10, AES-NI usable, AVX not), selftest, a bench
#     point on each path (workers and the software sibling inherit the filter).
# The daemon's job cycle under both is the e2e test `old_kernel` (coordinator/tests/e2e/old_kernel.rs).
# Usage: deploy/enosys/check.sh   (after deploy/build-static.sh; x86-64 only; deploy/qemu-check.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/../.."

helper=deploy/enosys/run-under-3.10
agent=dist/x86_64-unknown-linux-musl/cipherfleet-agent
WESTMERE=(qemu-x86_64-static -cpu Westmere -r 3.10.0-1160.el7.x86_64)
OLD=("$helper" "${WESTMERE[@]}")
[ -x "$agent" ] && [ -x "$agent-soft" ] || { echo "missing $agent(-soft): run deploy/build-static.sh first" >&2; exit 1; }

fail=0
ok() { echo "ok   old kernel: $*"; }
bad() { echo "FAIL old kernel: $*"; fail=1; }

# The list: every call newer than 3.10, each name and number once, the issue's examples there.
if err=$(/usr/bin/python3 - deploy/enosys/syscalls-after-3.10.txt <<'PY'
import sys
rows = [r for r in (l.split("#")[0].split() for l in open(sys.argv[1])) if r]
problems = [f"{r[0]}: {r[1]} is not after 3.10" for r in rows if tuple(map(int, r[1].split("."))) <= (3, 10)]
for column, what in [(0, "name"), (2, "x86_64 number"), (3, "aarch64 number")]:
    values = [r[column] for r in rows if r[column] != "-"]
    problems += [f"{what} {v} listed twice" for v in sorted(set(values)) if values.count(v) > 1]
wanted = {"getrandom", "memfd_create", "copy_file_range", "statx", "rseq", "io_uring_setup", "clone3", "pidfd_open"}
problems += [f"{n} missing" for n in sorted(wanted - {r[0] for r in rows})]
print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
); then ok "the list: $(grep -cv '^#' deploy/enosys/syscalls-after-3.10.txt) calls, all after 3.10"; else bad "the list: $err"; fi

# errno_of NR [PREFIX…]: the errno name system call NR gets (or "ok"), asked by Debian's python
# (the agent has no such probe) run as PREFIX… /usr/bin/python3.
errno_of() {
  local nr="$1"; shift
  "$@" /usr/bin/python3 -c '
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(16)  # qemu checks pointers before it passes a call on
r = libc.syscall(int(sys.argv[1]), buf, 16, 0, 0, 0, 0)
print("ok" if r >= 0 else errno.errorcode[ctypes.get_errno()])' "$nr"
}
# enosys_check NAME NR PREFIX…: NR answers ENOSYS under the filter (PREFIX… before python), and
# not without it; else the check proves nothing.
enosys_check() {
  local name="$1" nr="$2"; shift 2
  local without with
  without=$(errno_of "$nr" "$@") with=$(errno_of "$nr" "$helper" "$@")
  if [ "$without" = ENOSYS ]; then
    bad "$name answers ENOSYS ${*:+under $* }without the filter: this cannot show the filter works"
  elif [ "$with" = ENOSYS ]; then
    ok "$name answers ENOSYS under the filter${*:+ and $*} (without it: $without)"
  else
    bad "$name under the filter${*:+ and $*}: $with, want ENOSYS"
  fi
}
# getrandom (3.17, the most used new call), natively and through qemu; mseal (6.10), newer than
# Debian 12's libseccomp (filtered by its number from the list), natively: qemu 7.2 does not
# know it and answers ENOSYS by itself.
enosys_check getrandom 318
enosys_check getrandom 318 "${WESTMERE[@]}"
enosys_check mseal 462
status=$("$helper" cat /proc/self/status)
if grep -qx $'NoNewPrivs:\t1' <<<"$status" && grep -qx $'Seccomp:\t2' <<<"$status"; then
  ok "no_new_privs set, seccomp filter mode"
else
  bad "no_new_privs or seccomp mode missing:"; grep -E 'NoNewPrivs|Seccomp' <<<"$status"
fi
# seccomp(2) is filtered too; a filter is still installed as on 3.10, with prctl (libseccomp falls back).
if "$helper" "$helper" cat /proc/self/status | grep -qx $'Seccomp_filters:\t2'; then
  ok "under the filter a second one installs (seccomp(2) answers ENOSYS, prctl remains)"
else
  bad "the helper cannot install a filter under its own"
fi
# Bad setups fail with the reason: a copy of the helper without its list, and the helper run by
# a python without its site packages (as without python3-seccomp).
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$helper" "$tmp/"
code=0; err=$("$tmp/run-under-3.10" true 2>&1) || code=$?
if [ "$code" = 125 ] && [[ "$err" == *"cannot read the system call list"* ]]; then ok "a missing list is refused"; else bad "missing list: exit $code: $err"; fi
code=0; err=$(/usr/bin/python3 -S "$helper" true 2>&1) || code=$?
if [ "$code" = 125 ] && [[ "$err" == *"python3-seccomp"* ]]; then ok "a missing python3-seccomp is named"; else bad "missing python3-seccomp: exit $code: $err"; fi

# The agent on the old kernel.
if json=$("${OLD[@]}" "$agent" probe --format json) && /usr/bin/python3 -c '
import json, sys
f = json.load(sys.stdin)
sys.exit(0 if f["kernel_release"] == "3.10.0-1160.el7.x86_64" and "aes" in f["features"]["usable"]
         and "avx" not in f["features"]["usable"] and f["crypto"]["backends"]["aes"] == "aes-ni" else 1)' <<<"$json"; then
  ok "probe: kernel 3.10.0-1160.el7.x86_64, AES-NI usable, AVX not"
else
  bad "probe"; echo "${json:-}" | head -40
fi
if out=$("${OLD[@]}" "$agent" selftest 2>&1); then ok "selftest: $(tail -n 1 <<<"$out")"; else bad "selftest"; grep -v '^ok' <<<"$out" | head -20; fi
# Workers inherit the filter; the prefix keeps them on the emulated CPU.
if out=$(CIPHERFLEET_WORKER_PREFIX="${WESTMERE[*]}" "${OLD[@]}" "$agent" bench -a aes-128-ctr --size 1k --seconds 0.05 --path both --format json 2>&1) \
   && /usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
sys.exit(0 if [(r["status"], r["path_used"]) for r in rows] == [("ok", "accelerated"), ("ok", "software")] else 1)' <<<"$out"; then
  ok "bench aes-128-ctr 1k, accelerated and software paths"
else
  bad "bench"; echo "$out" | head -5
fi
exit $fail
