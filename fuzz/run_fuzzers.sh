#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz/ and runs each for N seconds
# (default 20). Exits non-zero if any target finds a crash, leak or
# sanitizer report (or, for the stateful targets, an invariant violation);
# the reproducer lands in build-fuzz/artifacts/. Each target starts from its
# checked-in seeds (fuzz/corpus/<target>/, written by the target itself with
# --write-seeds=DIR) plus what earlier runs left in build-fuzz/corpus/.
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
for target in clc llc cdc cdc_sequence llc_sequence cdc_control_page; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  if [[ -d "$root/fuzz/corpus/$target" ]]; then
    cp "$root/fuzz/corpus/$target"/* "$corpus"/
  fi
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
