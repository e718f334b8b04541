#!/usr/bin/env bash
# Builds the container images FROM scratch out of the static binaries in dist/ (deploy/build-static.sh)
# with buildah, then checks each one: the binaries are where the entry point says, the image's
# architecture and user are right, and it runs `--version` (amd64 in the image through `buildah run
# --isolation chroot`, which needs no OCI runtime or cgroups; arm64 from the image's own file under
# qemu-aarch64-static); the amd64 agent also measures a point on both paths inside its image.
#   localhost/cipherfleet-agent:VERSION-{amd64,arm64}        deploy/containers/agent.<arch>.Containerfile
#   localhost/cipherfleet-coordinator:VERSION-{amd64,arm64}  …/coordinator.<arch>.Containerfile, when
#                                                  dist/<triple>/cipherfleet-coordinator exists
#                                                  (deploy/build-static.sh --coordinator)
#   localhost/cipherfleet-{agent,coordinator}:VERSION        a manifest list of the arches built
# Storage is vfs under target/containers/ (no daemon, no overlay mounts, nothing under /var/lib).
#
# Usage: deploy/build-images.sh [--push REGISTRY]   e.g. --push registry.example/cipherfleet
set -euo pipefail
cd "$(dirname "$0")/.."

push=""
while [ $# -gt 0 ]; do
  case "$1" in
    --push) [ $# -ge 2 ] || { echo "build-images.sh: --push needs a registry" >&2; exit 2; }; push=$2; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "build-images.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

command -v buildah >/dev/null || { echo "build-images.sh: buildah is missing (apt-get install buildah)" >&2; exit 1; }
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
store=$PWD/target/containers
mkdir -p "$store"
b() { buildah --root "$store/storage" --runroot "$store/run" --storage-driver vfs "$@"; }
# Images a previous run left untagged (vfs keeps a full copy of each).
b rmi --prune >/dev/null 2>&1 || true
bundle=/etc/ssl/certs/ca-certificates.crt
[ -f "$bundle" ] || { echo "build-images.sh: $bundle is missing (apt-get install ca-certificates)" >&2; exit 1; }

# The build context: dist/ as built, plus the CA bundle (the scratch images have no other).
context=$store/context
rm -rf "$context"
mkdir -p "$context"
cp "$bundle" "$context/ca-certificates.crt"

declare -A triple_of=([amd64]=x86_64-unknown-linux-musl [arm64]=aarch64-unknown-linux-musl)
declare -A binaries_of=([agent]="cipherfleet-agent cipherfleet-agent-soft" [coordinator]="cipherfleet-coordinator")
built=()
for program in agent coordinator; do
  arches=()
  for arch in amd64 arm64; do
    triple=${triple_of[$arch]}
    missing=""
    for bin in ${binaries_of[$program]}; do
      [ -x "dist/$triple/$bin" ] || missing=${missing:-$bin}
    done
    if [ -n "$missing" ]; then
      hint="deploy/build-static.sh $triple"
      [ "$program" = agent ] || hint="deploy/build-static.sh --coordinator $triple"
      echo "build-images: skipped $program for $arch: no dist/$triple/$missing ($hint)"
      continue
    fi
    mkdir -p "$context/$triple"
    for bin in ${binaries_of[$program]}; do cp "dist/$triple/$bin" "$context/$triple/"; done
    image=localhost/cipherfleet-$program:$version-$arch
    b build --quiet --platform "linux/$arch" --layers=false -f "deploy/containers/$program.$arch.Containerfile" \
      --label org.opencontainers.image.title="cipherfleet-$program" \
      --label org.opencontainers.image.version="$version" -t "$image" "$context" >/dev/null
    arches+=("$arch")
    built+=("$image")
  done
  if [ ${#arches[@]} -gt 0 ]; then
    list=localhost/cipherfleet-$program:$version
    b manifest rm "$list" >/dev/null 2>&1 || true
    b manifest create "$list" >/dev/null
    for arch in "${arches[@]}"; do b manifest add "$list" "localhost/cipherfleet-$program:$version-$arch" >/dev/null; done
    echo "build-images: $list (${arches[*]})"
    if [ -n "$push" ]; then
      b manifest push --all "$list" "docker://$push/cipherfleet-$program:$version"
    fi
  fi
done

# Check every image built: its config, its files, and that its entry point runs.
failed=0
for image in "${built[@]}"; do
  program=${image#localhost/cipherfleet-}; program=${program%%:*}
  arch=${image##*-}
  config=$(b inspect --type image --format '{{.OCIv1.Architecture}} {{.OCIv1.Config.User}} {{index .OCIv1.Config.Entrypoint 0}}' "$image")
  want="$arch 65532:65532 /usr/local/bin/cipherfleet-$program"
  if [ "$config" != "$want" ]; then
    echo "build-images: $image: architecture, user, entry point are '$config', want '$want'" >&2
    failed=1
    continue
  fi
  ctr=$(b from --quiet --platform "linux/$arch" "$image")
  mnt=$(b mount "$ctr")
  for bin in ${binaries_of[$program]}; do
    [ -x "$mnt/usr/local/bin/$bin" ] || { echo "build-images: $image has no /usr/local/bin/$bin" >&2; failed=1; }
  done
  if [ "$arch" = amd64 ]; then
    # buildah 1.28 now and then loses the output of a process this short (exit 0, nothing printed
    # once in some dozen runs here): ask again, up to three times, while it prints nothing.
    for _ in 1 2 3; do
      out=$(b run --isolation chroot "$ctr" -- "/usr/local/bin/cipherfleet-$program" --version 2>&1) || out="failed: $out"
      [ -z "$out" ] || break
    done
    how="buildah run"
    # A point on each path: the worker processes, and the -soft sibling found beside the agent.
    if [ "$program" = agent ] && ! bench=$(b run --isolation chroot "$ctr" -- /usr/local/bin/cipherfleet-agent \
      bench -a aes-128-gcm -s 1k --seconds 0.1 --path both --format csv 2>&1); then
      echo "build-images: $image: a bench point on both paths failed: $bench" >&2
      failed=1
    fi
  else
    out=$(qemu-aarch64-static "$mnt/usr/local/bin/cipherfleet-$program" --version 2>&1) || out="failed: $out"
    how="qemu-aarch64-static on the image's file"
  fi
  size=$(du -sm "$mnt" | cut -f1)
  b umount "$ctr" >/dev/null
  b rm "$ctr" >/dev/null
  if [ "$out" = "cipherfleet-$program $version" ]; then
    echo "build-images: $image ok: $out ($how), $size MB"
  else
    echo "build-images: $image: --version printed '$out' ($how), want 'cipherfleet-$program $version'" >&2
    failed=1
  fi
done
[ ${#built[@]} -gt 0 ] || { echo "build-images: no image built: run deploy/build-static.sh first" >&2; exit 1; }
exit "$failed"
