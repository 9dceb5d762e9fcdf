#!/usr/bin/env bash
# Builds the sandbox image without a Docker daemon: sandbox/Dockerfile's
# "debian" stage, by buildah, on a Debian base that debootstrap makes from the
# apt mirror, with the agent make built: $AGENT, dist/agent unless set (make
# test gives it the race-detecting agent its suites run, built once). The
# build context is the Dockerfile and the agent alone. Everything goes under
# .cache/image: buildah's storage (vfs), the base (built once), the context,
# and "rootfs", a link to the image's root filesystem, mounted, for the
# process launcher (RA_SANDBOX_ROOTFS). Needs root, debootstrap and buildah
# (apt).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=$root/.cache/image
store=(--root "$cache/storage" --runroot "$cache/run" --storage-driver vfs)
base=localhost/remote-agents/debian:bookworm
image=localhost/remote-agents/agent:debian
mirror=${RA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
agent=${AGENT:-dist/agent}
mkdir -p "$cache"
cd "$root"
context=$cache/context
rm -rf "$context"
mkdir -p "$context/sandbox" "$context/dist"
cp sandbox/Dockerfile "$context/sandbox/Dockerfile"
cp "$agent" "$context/dist/agent"

began=$(date +%s)
if ! buildah "${store[@]}" inspect --type image "$base" >/dev/null 2>&1; then
  echo "image: debootstrap bookworm (minbase) from $mirror"
  rm -rf "$cache/base"
  debootstrap --variant=minbase bookworm "$cache/base" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log"; exit 1; }
  ctr=$(buildah "${store[@]}" from scratch)
  cp -a "$cache/base/." "$(buildah "${store[@]}" mount "$ctr")/"
  buildah "${store[@]}" umount "$ctr" >/dev/null
  buildah "${store[@]}" commit -q "$ctr" "$base" >/dev/null
  buildah "${store[@]}" rm "$ctr" >/dev/null
  rm -rf "$cache/base"
fi

# The previous image's root filesystem goes first (it is mounted).
buildah "${store[@]}" rm ra-rootfs >/dev/null 2>&1 || true
echo "image: buildah bud --target debian -f sandbox/Dockerfile"
buildah "${store[@]}" bud -q --pull-never --isolation chroot --layers=false --target debian \
  --build-arg DEBIAN_IMAGE="$base" -f "$context/sandbox/Dockerfile" -t "$image" "$context" >/dev/null
buildah "${store[@]}" rmi --prune >/dev/null 2>&1 || true # the images it replaced
buildah "${store[@]}" from -q --name ra-rootfs "$image" >/dev/null
ln -sfn "$(buildah "${store[@]}" mount ra-rootfs)" "$cache/rootfs"
size=$(buildah "${store[@]}" images --format '{{.Size}}' "$image")
echo "image: $image, $size, built in $(( $(date +%s) - began )) s; root filesystem at .cache/image/rootfs"
