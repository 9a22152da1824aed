#!/usr/bin/env bash
# Configures and builds smcr.
#   scripts/build.sh          -> build/       (RelWithDebInfo)
#   scripts/build.sh --asan   -> build-asan/  (-DSMCR_SANITIZE=ON: ASan + UBSan)
# Extra arguments after the options are passed to `cmake -S -B` (e.g. -DFOO=BAR).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=build
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --asan) dir=build-asan; args+=(-DSMCR_SANITIZE=ON); shift ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done

cmake -S "$root" -B "$root/$dir" "${args[@]}"
cmake --build "$root/$dir" -j2
echo "build.sh: built $root/$dir"
