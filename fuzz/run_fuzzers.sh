#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz/ and runs each for N seconds
# (default 20). Exits non-zero if any target finds a crash, leak or
# sanitizer report; the reproducer lands in build-fuzz/artifacts/.
#   usage: fuzz/run_fuzzers.sh [seconds]
set -euo pipefail

seconds="${1:-20}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"

export CC="${CC:-clang-14}"
export CXX="${CXX:-clang++-14}"
cmake -S "$root/fuzz" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)"

mkdir -p "$build/artifacts"
failed=()
for target in clc llc cdc; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  echo "=== ${target}_fuzz for ${seconds}s"
  if ! "$build/${target}_fuzz" "$corpus" \
      -max_len=1100 -max_total_time="$seconds" -timeout=10 \
      -artifact_prefix="$build/artifacts/${target}-" -print_final_stats=1; then
    failed+=("$target")
  fi
done

if ((${#failed[@]})); then
  echo "fuzzers that failed: ${failed[*]}" >&2
  exit 1
fi
echo "all fuzzers ran ${seconds}s without a crash"
