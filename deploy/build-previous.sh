#!/usr/bin/env bash
# Builds the previous release's coordinator and agent, for the rolling-upgrade test
# (coordinator/tests/e2e/upgrade.rs): target/previous/{cipherfleet-coordinator,cipherfleet-agent}.
#
# The previous release is the pinned commit below: the one that partitioned `results` (migration
# 0040), its newest migration (the upgrade test's PREVIOUS_SCHEMA names it); its agents speak
# protocol 3, as today's.
# See docs/operations.md, "Upgrading".
# Move the pin when a release changes the protocol or the schema again.
#
# Its source comes from git (git archive into target/previous/src: no worktree is registered) and
# builds into this workspace's target/ with the same debug profile, so every dependency whose
# version and features it shares with today's is compiled once for both; only its own crates (built
# without debug info: the test only runs them) and the dependencies that differ are compiled
# for it. That build also uplifts its binaries to target/debug/, where this workspace's are: they
# are put back after. The two binaries are kept while target/previous/COMMIT names the pin, so a
# later run takes no time. Its time: docs/performance.md, "Scripts: time and disk".
#
# Usage: deploy/build-previous.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."

PIN=90d6bd2476e382466bc9dae3e583da93abf144e6
out=target/previous
bins=(cipherfleet-coordinator cipherfleet-agent)

force=false
case "${1:-}" in
  --force) force=true ;;
  "") ;;
  -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
  *) echo "build-previous.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

cached() {
  [ "$(cat "$out/COMMIT" 2>/dev/null)" = "$PIN" ] || return 1
  for b in "${bins[@]}"; do [ -x "$out/$b" ] || return 1; done
}
if ! $force && cached; then
  echo "previous release ${PIN:0:7}: $out/ (cached)"
  exit 0
fi

if ! git cat-file -e "$PIN^{commit}" 2>/dev/null; then
  echo "build-previous.sh: commit $PIN is not in this clone (a shallow clone?); fetch the history: git fetch --unshallow" >&2
  exit 1
fi

rm -rf "$out"
mkdir -p "$out/src" target/debug
git archive "$PIN" | tar -x -C "$out/src"
# This workspace's binaries, by a second link, to put back over the ones the old build uplifts.
kept=()
for b in "${bins[@]}"; do
  if [ -e "target/debug/$b" ]; then
    ln -f "target/debug/$b" "target/debug/$b.current"
    kept+=("$b")
  fi
done
restore_current() {
  for b in "${kept[@]}"; do mv -f "target/debug/$b.current" "target/debug/$b"; done
  kept=()
}
trap restore_current EXIT

echo "building the previous release ${PIN:0:7} from $out/src"
target_dir=$(pwd)/target
no_debug=()
for crate in cipherfleet-core cipherfleet-proto cipherfleet-coordinator cipherfleet-agent; do
  no_debug+=(--config "profile.dev.package.$crate.debug=0")
done
(
  cd "$out/src"
  CARGO_TARGET_DIR="$target_dir" CARGO_INCREMENTAL=0 cargo build --locked "${no_debug[@]}" \
    -p cipherfleet-coordinator --bin cipherfleet-coordinator -p cipherfleet-agent --bin cipherfleet-agent
)
# Moved, not copied: the file stays a second link of the one in target/debug/deps.
for b in "${bins[@]}"; do mv "target/debug/$b" "$out/$b"; done
restore_current
trap - EXIT
echo "$PIN" > "$out/COMMIT"
echo "previous release ${PIN:0:7}: built $out/${bins[0]} and $out/${bins[1]}"
