#!/usr/bin/env bash
# Quick benchmark as a regression guard: every pair of scripts/bench.sh once
# for about a second, TCP and SMC-R interleaved; fails (exit 1) on a VOID or
# FAILED run or a collapsed ratio (see docs/PERFORMANCE.md, "Quick mode").
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
[ "${SMCR_SANITIZE:-OFF}" = ON ] && skip "ASan build: the benchmark preloads build/'s shim into uninstrumented programs"
[ "$(readlink -f "$SMCR_BUILD_DIR")" = "$(readlink -f "$SMCR_SOURCE_DIR/build")" ] ||
  skip "the benchmark uses $SMCR_SOURCE_DIR/build, not this tree ($SMCR_BUILD_DIR)"
for tool in sockperf redis-server redis-benchmark wrk ss python3; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed"
done
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || skip "nginx not installed"
require_bpf
OUT="$TEST_TMP/bench"
bash "$SMCR_SOURCE_DIR/scripts/bench.sh" -q -B -o "$OUT"
rc=$?
check "bench.sh -q: no VOID or FAILED run, no collapsed SMC-R/TCP ratio (rc=$rc)" [ "$rc" = 0 ]
check "bench.sh -q wrote its table" [ -s "$OUT/table.txt" ]
finish
