#!/usr/bin/env bash
# CPython's own socket test suites, over plain TCP and then under smc_run,
# compared test by test. Both ends of every connection these suites make
# are in the one Python process, so under smc_run both are under the shim
# and their connections are SMC-R where the handshake can run (a client and
# server in one asyncio loop stay TCP: fallback.own_listener, by design).
#
#   usage: scripts/cpython-tests.sh [-k] [-p PYTHON] [SUITE...]
#     SUITE     regrtest names (default: test_socket test_selectors
#               test_socketserver test_httplib test_ssl test_asyncio)
#     -p        the interpreter (default python3); it needs its test package
#     -k        keep the logs (printed path)
#
# Each suite runs serially with -v (test_socketserver with -u network, which
# it needs to run at all; test_socket without its VSOCK tests, which hang
# over plain TCP too where /dev/vsock exists without a host), then the
# per-test results (ok, FAIL, ERROR, skipped, expected failure) are
# compared: a test that fails or is skipped only under smc_run, or ran in
# one run only, is a difference. A suite that differs runs again in both
# modes, and only a difference that stays counts (one that goes is named
# as flaky). Prints counts and time per run and the shim's counters
# (SMCR_SHORT_FLOWS=0: every connection tries SMC-R).
# Exits 0 when no suite differs and SMC-R carried connections, 1 otherwise,
# 2 on bad usage, 77 when it cannot run here.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=python3 keep=0
while getopts "kp:h" opt; do
  case $opt in
    k) keep=1 ;;
    p) py=$OPTARG ;;
    h) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(test_socket test_selectors test_socketserver test_httplib test_ssl test_asyncio)

"$py" -c 'import test.regrtest' 2>/dev/null || { echo "cpython-tests: $py has no test package"; exit 77; }
ctl="$root/build/bpf/smcr_ctl"
[ -x "$ctl" ] && "$ctl" status >/dev/null 2>&1 || { echo "cpython-tests: the eBPF program is not loaded (smcr_ctl load, as root)"; exit 77; }
lib="${SMCR_PRELOAD_LIB:-$root/build/preload/libsmcr_preload.so}"
[ -f "$lib" ] || { echo "cpython-tests: $lib not built"; exit 77; }
[ -f "${lib}.asan" ] && { echo "cpython-tests: an ASan shim cannot be preloaded into python"; exit 77; }

work=$(mktemp -d /tmp/smcr-cpython-tests.XXXXXX)
[ "$keep" = 1 ] && echo "cpython-tests: logs in $work" || trap 'rm -rf "$work"' EXIT

# results LOG: "test-id result" lines. A verbose line's result can follow
# output the test printed (test_ssl's server chatter) on later lines; the
# FAIL:/ERROR: headers of the summary are authoritative.
results() {
  "$py" - "$1" <<'EOF'
import re, sys
start = re.compile(r'^(\w+) \(([\w.]+)\)(?: \.\.\. ?(.*))?$')
verdict = re.compile(r"^(ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b")
res, cur = {}, None
lines = open(sys.argv[1], errors='replace').read().splitlines()
for line in lines:
    m = start.match(line)
    if m:  # without " ... ", the test's docstring line follows with it
        # 3.11 writes "name (module.Class.name)", older versions "name (module.Class)"
        cur = m.group(2) if m.group(2).endswith('.' + m.group(1)) else f'{m.group(2)}.{m.group(1)}'
        line = m.group(3) or ''
    if cur is None:
        continue
    v = verdict.match(line.rsplit(' ... ', 1)[-1].strip())
    if v is None and re.search(r'(^|\s|\.\.\.)(ok|FAIL|ERROR)$', line):
        v = re.search(r'(ok|FAIL|ERROR)$', line)
    if v:
        res[cur], cur = v.group(1), None
for line in lines:
    m = re.match(r'^(FAIL|ERROR): (\w+) \(([\w.]+)\)', line)
    if m:
        name, tid = m.group(2), m.group(3)
        res[tid if tid.endswith('.' + name) else f'{tid}.{name}'] = m.group(1)
for k in sorted(res):
    print(k, res[k])
EOF
}

run() {  # run MODE SUITE [TAG]: the suite's verbose log in $work/MODE[TAG]-SUITE.log
  local mode=$1 suite=$2 tag=${3:-} extra=()
  case $suite in
    test_socketserver) extra=(-u network) ;;
    test_socket) extra=(-i '*VSOCK*') ;;
  esac
  local t0=$SECONDS
  if [ "$mode" = smc ]; then
    SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$lib" timeout 1800 "$root/scripts/smc_run" -s "$work/stats$tag-$suite" \
      "$py" -m test -v "${extra[@]}" "$suite" >"$work/$mode$tag-$suite.log" 2>&1
  else
    timeout 1800 "$py" -m test -v "${extra[@]}" "$suite" >"$work/$mode$tag-$suite.log" 2>&1
  fi
  echo "$mode$tag: rc=$? $(grep -m1 '^Total tests:' "$work/$mode$tag-$suite.log") in $((SECONDS - t0)) s"
}

counter() {  # counter DIR NAME: summed over the processes' files
  cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }'
}

differ=0 smc_total=0 flaky=()
cd "$work" || exit 2
for s in "${suites[@]}"; do
  echo "== $s"
  run plain "$s"
  run smc "$s"
  results "plain-$s.log" >"plain-$s.res"
  results "smc-$s.log" >"smc-$s.res"
  for m in plain smc; do
    echo "  $m: $(awk '{ n[$2]++ } END { for (k in n) printf "%s=%d ", k, n[k] }' "$m-$s.res")"
  done
  d="stats-$s"
  echo "  counters: smc_active=$(counter "$d" smc_active) smc_passive=$(counter "$d" smc_passive)" \
    "fallback_total=$(counter "$d" fallback_total) own_listener=$(counter "$d" fallback.own_listener)" \
    "aborts=$(counter "$d" aborts)"
  smc_total=$((smc_total + $(counter "$d" smc_active)))
  if ! diff "plain-$s.res" "smc-$s.res" >"diff-$s.txt"; then
    echo "  first run differs (< plain, > smc_run):"
    sed 's/^/    /' "diff-$s.txt"
    # A timed test can fail now and then in either mode, under load (ctest
    # runs beside other work): the suite runs again in both modes, and only
    # a difference that stays counts.
    echo "  running $s again in both modes"
    run plain "$s" -again
    run smc "$s" -again
    results "plain-again-$s.log" >"plain-again-$s.res"
    results "smc-again-$s.log" >"smc-again-$s.res"
    if diff "plain-again-$s.res" "smc-again-$s.res" >"diff-again-$s.txt" && [ -s "plain-again-$s.res" ]; then
      echo "  flaky: $s (the rerun agrees)"
      flaky+=("$s")
    else
      differ=1
      echo "  DIFFERENT again (< plain, > smc_run):"
      sed 's/^/    /' "diff-again-$s.txt"
    fi
  elif [ ! -s "plain-$s.res" ]; then
    differ=1
    echo "  no test results read from the logs"
  fi
done
[ ${#flaky[@]} -gt 0 ] && echo "cpython-tests: flaky (differed once, agreed when run again): ${flaky[*]}"
if [ "$differ" = 0 ] && [ "$smc_total" -gt 0 ]; then
  echo "cpython-tests: the same results under smc_run as over plain TCP; $smc_total SMC-R connections"
  exit 0
fi
echo "cpython-tests: differences above (or no SMC-R connection: $smc_total)"
exit 1
