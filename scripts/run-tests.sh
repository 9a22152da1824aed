#!/usr/bin/env bash
# THE test command (see README.md): installs dependencies, builds build/ and
# build-asan/ (ASan+UBSan), loads the eBPF program (root), runs every ctest
# test of both builds, runs the fuzzers for 10 s each (if clang-14 exists),
# and unloads the eBPF program again if it loaded it.
# Prints `N passed, M failed` at the end; exits non-zero on any failure.
# Tests that cannot run here are reported as skipped, with the reason, by ctest.
#   usage: scripts/run-tests.sh
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
t0=$(date +%s)
PASSED=0 FAILED=0 SKIPPED=0
FAILURES=() SKIPS=() DETAILS=()
LOGDIR=$(mktemp -d /tmp/smcr-run-tests.XXXXXX)

banner() { printf '\n===== %s =====\n' "$*"; }
fail_step() { FAILED=$((FAILED + 1)); FAILURES+=("$1"); echo "run-tests: FAILED: $1" >&2; }

LOADED_HERE=0
CTL="$root/build/bpf/smcr_ctl"
on_exit() {
  if [ "$LOADED_HERE" = 1 ] && [ -x "$CTL" ]; then
    "$CTL" unload >/dev/null 2>&1 && echo "run-tests: unloaded the eBPF program (it was loaded by this run)"
  fi
  rm -rf "$LOGDIR"
}
trap on_exit EXIT

# --- 1. dependencies ----------------------------------------------------------
banner "dependencies"
bash "$root/scripts/install-deps.sh" || fail_step "install-deps.sh"
# The guest suite (label guest) boots Debian's 6.12 kernel in QEMU with rdma_rxe.
if [ "$(id -u)" -eq 0 ]; then
  bash "$root/scripts/guest/install-guest-deps.sh" >/dev/null || fail_step "install-guest-deps.sh"
fi

# --- 2. builds ----------------------------------------------------------------
banner "build (build/)"
BUILD_OK=1
bash "$root/scripts/build.sh" || { BUILD_OK=0; fail_step "build of build/"; }
banner "build (build-asan/, ASan+UBSan)"
ASAN_OK=1
bash "$root/scripts/build.sh" --asan || { ASAN_OK=0; fail_step "build of build-asan/"; }

# --- 3. eBPF program ------------------------------------------------------------
banner "eBPF program"
if [ "$(id -u)" -ne 0 ]; then
  echo "run-tests: not root: the eBPF program is not loaded; tests that need it will be skipped"
elif [ ! -x "$CTL" ]; then
  echo "run-tests: $CTL not built; tests that need it will fail or skip"
else
  if ! mountpoint -q /sys/fs/bpf; then
    mkdir -p /sys/fs/bpf && mount -t bpf bpf /sys/fs/bpf || echo "run-tests: could not mount bpffs on /sys/fs/bpf"
  fi
  if "$CTL" status >/dev/null 2>&1; then
    echo "run-tests: eBPF program already loaded (left loaded at the end)"
  elif "$CTL" load; then
    LOADED_HERE=1
    echo "run-tests: eBPF program loaded (will be unloaded at the end)"
  else
    fail_step "smcr_ctl load"
  fi
fi

# --- 4. ctest -------------------------------------------------------------------
# run_ctest NAME DIR [VAR=value...]: runs the suite, adds its totals (from ctest's
# JUnit report) to PASSED/FAILED/SKIPPED.
run_ctest() {
  local name=$1 dir=$2; shift 2
  local junit="$LOGDIR/$name.xml" rc=0
  banner "ctest: $name ($dir)"
  # The quick benchmark (label bench) runs on its own afterwards, with the
  # machine to itself: its ratios would measure the other tests' load.
  # CTEST_SELECT: one label filter (ctest keeps only the last -LE given).
  env "$@" ctest --test-dir "$dir" --output-on-failure ${CTEST_SELECT:--j2 -LE bench} --output-junit "$junit" \
    || rc=$?
  if [ ! -s "$junit" ]; then
    fail_step "ctest $name (no results, rc=$rc)"
    return
  fi
  local counts
  counts=$(python3 - "$junit" "$name" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
p = f = s = 0
for tc in root.iter("testcase"):
    name = tc.get("name")
    if tc.find("failure") is not None or tc.find("error") is not None or tc.get("status") == "fail":
        f += 1; print(f"F {sys.argv[2]}:{name}")
        # Why, for the summary (CI shows only the log's tail): the failed
        # checks, sanitizer reports and GoogleTest failures, a few lines.
        out = "".join(e.text or "" for e in tc.iter("system-out"))
        keys = ("FAIL", "Failure", "Sanitizer", "runtime error", "Expected", "Which is", "Value of")
        why = [l.strip() for l in out.splitlines() if any(k in l for k in keys)]
        for l in why[:12]:
            print(f"D {sys.argv[2]}:{name}: {l[:300]}")
    elif tc.find("skipped") is not None or tc.get("status") in ("notrun", "disabled"):
        s += 1
        out = "".join(e.text or "" for e in tc.iter("system-out"))
        why = [l.strip() for l in out.splitlines() if "SKIP" in l or "Skipped" in l or "skipped" in l]
        print(f"S {sys.argv[2]}:{name}" + (f" -- {why[-1][:200]}" if why else ""))
    else:
        p += 1
print(f"T {p} {f} {s}")
PY
) || { fail_step "ctest $name (unreadable JUnit report)"; return; }
  local line
  while IFS= read -r line; do
    case "$line" in
      "F "*) FAILURES+=("${line#F }") ;;
      "S "*) SKIPS+=("${line#S }") ;;
      "D "*) DETAILS+=("${line#D }") ;;
      "T "*) set -- ${line#T }
             PASSED=$((PASSED + $1)); FAILED=$((FAILED + $2)); SKIPPED=$((SKIPPED + $3))
             echo "run-tests: ctest $name: $1 passed, $2 failed, $3 skipped" ;;
    esac
  done <<<"$counts"
  # ctest failing with no failed test case (e.g. no tests found) is a failure too.
  if [ "$rc" -ne 0 ] && ! grep -q '^F ' <<<"$counts"; then fail_step "ctest $name (rc=$rc)"; fi
}

[ "$BUILD_OK" = 1 ] && run_ctest build "$root/build"
# The regression guard of scripts/bench.sh -q (docs/PERFORMANCE.md, "Quick
# mode"): every benchmark pair once, failing on a void run or a collapsed ratio.
[ "$BUILD_OK" = 1 ] && CTEST_SELECT="-L bench" run_ctest bench "$root/build"
# ASan build: leak checking off (the shim's engine thread and fabric mappings
# live until exit by design); UBSan reports abort the test. The guest suite
# runs once, from the normal build (it runs redis, which an ASan shim cannot
# be preloaded into, and each guest boot costs CI minutes).
[ "$ASAN_OK" = 1 ] && CTEST_SELECT="-j2 -LE bench|guest" run_ctest build-asan "$root/build-asan" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# --- 5. fuzzers -----------------------------------------------------------------
if command -v clang-14 >/dev/null 2>&1 && command -v clang++-14 >/dev/null 2>&1; then
  banner "fuzzers (10 s each)"
  flog="$LOGDIR/fuzz.log"
  frc=0
  bash "$root/fuzz/run_fuzzers.sh" 10 2>&1 | tee "$flog" || frc=$?
  ran=$(grep -c '^=== .*_fuzz for' "$flog" || true)
  bad=$(sed -n 's/^fuzzers that failed: //p' "$flog")
  nbad=$(wc -w <<<"$bad")
  if [ "$ran" -eq 0 ]; then
    fail_step "fuzzers (none ran, rc=$frc)"
  else
    PASSED=$((PASSED + ran - nbad)); FAILED=$((FAILED + nbad))
    for t in $bad; do FAILURES+=("fuzz:${t}_fuzz"); done
    if [ "$frc" -ne 0 ] && [ "$nbad" -eq 0 ]; then fail_step "fuzzers (rc=$frc)"; fi
  fi
else
  banner "fuzzers"
  echo "run-tests: SKIP fuzzers: clang-14 not installed"
  SKIPPED=$((SKIPPED + 1)); SKIPS+=("fuzz (clang-14 not installed)")
fi

# --- summary --------------------------------------------------------------------
banner "summary"
elapsed=$(( $(date +%s) - t0 ))
((${#SKIPS[@]})) && printf 'skipped: %s\n' "${SKIPS[@]}"
((${#DETAILS[@]})) && printf 'why:     %s\n' "${DETAILS[@]}"
((${#FAILURES[@]})) && printf 'FAILED:  %s\n' "${FAILURES[@]}"
echo "$PASSED passed, $FAILED failed ($SKIPPED skipped; $((elapsed / 60))m$((elapsed % 60))s)"
[ "$FAILED" -eq 0 ]
