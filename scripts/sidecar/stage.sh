#!/usr/bin/env bash
# Lays out the sidecar image's files from a build tree, as the Dockerfile's
# build stage does (and the sidecar test, to check that layout without a
# container engine):
#   DEST/bin/smc_run  DEST/bin/smcr_ctl  DEST/bin/smcr_stat
#   DEST/lib/smcr/libsmcr_preload.so     DEST/sidecar/entrypoint.sh
# smc_run finds the library in ../lib/smcr relative to itself.
#   usage: scripts/sidecar/stage.sh [--strip] BUILD_DIR SOURCE_DIR DEST
# smcr_stat is optional (copied when built); the others are required.
set -euo pipefail

strip=()
if [ "${1:-}" = --strip ]; then strip=(-s); shift; fi
[ $# -eq 3 ] || { echo "usage: $0 [--strip] BUILD_DIR SOURCE_DIR DEST" >&2; exit 2; }
build=$1 src=$2 dest=$3

need() { [ -f "$1" ] || { echo "stage.sh: $1 missing (build it first)" >&2; exit 1; }; }
need "$src/scripts/smc_run"
need "$src/scripts/sidecar/entrypoint.sh"
need "$build/bpf/smcr_ctl"
need "$build/preload/libsmcr_preload.so"

install -d -m 0755 "$dest/bin" "$dest/lib/smcr" "$dest/sidecar"
install -m 0755 "$src/scripts/smc_run" "$dest/bin/smc_run"
install -m 0755 "$src/scripts/sidecar/entrypoint.sh" "$dest/sidecar/entrypoint.sh"
install -m 0755 "${strip[@]}" "$build/bpf/smcr_ctl" "$dest/bin/smcr_ctl"
install -m 0755 "${strip[@]}" "$build/preload/libsmcr_preload.so" "$dest/lib/smcr/libsmcr_preload.so"
if [ -f "$build/tools/smcr_stat" ]; then
  install -m 0755 "${strip[@]}" "$build/tools/smcr_stat" "$dest/bin/smcr_stat"
else
  echo "stage.sh: $build/tools/smcr_stat not built; the image will not have it" >&2
fi
