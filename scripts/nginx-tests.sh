#!/usr/bin/env bash
# nginx's own test suite, over plain TCP and then under smc_run, compared.
# The suite is vendored (tests/third_party/nginx-tests: the nginx-tests
# snapshot 7ecb7ae5b694, the one that matches Debian's nginx 1.22.1; see its
# VENDORED file), so neither CI nor a user needs the network. Every test
# file starts its own nginx (TEST_NGINX_BINARY) and talks to it with Perl
# clients and backends; under smc_run both are under the shim, so their
# connections are SMC-R where both ends offer it (SMCR_SHORT_FLOWS=0: every
# connection tries).
#
#   usage: scripts/nginx-tests.sh [-j JOBS] [-k] [-x FILE:REASON]... [PATTERN...]
#     PATTERN   test files, as shell patterns (default: every *.t), e.g. 'proxy*' 'mail_*'
#     -j JOBS   prove's parallel jobs (default 2)
#     -k        keep the logs (printed path)
#     -x        a file whose difference from plain TCP is a known, documented
#               limitation: reported with its reason (and when it did not
#               differ), not counted against the verdict
#
# Prints, per run, the files with failures and the failed subtests; a file
# whose result differs is run again alone in both modes (the first result
# printed, the rerun's counted, "flaky" named); then the verdict: the same
# failures under smc_run as over plain TCP, the time ratio (target: at most
# 1.5x), and the shim's counters, which must show
# SMC-R connections on both ends. Exits 0 when the failures are the same
# and SMC-R carried connections, 1 otherwise, 2 on bad usage, 77 when it
# cannot run here (nginx, prove or the eBPF program missing).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite="$root/tests/third_party/nginx-tests"
jobs=2 keep=0
known=()
while getopts "j:kx:h" opt; do
  case $opt in
    j) jobs=$OPTARG ;;
    k) keep=1 ;;
    x) known+=("$OPTARG") ;;
    h) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))

nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx_bin" ] || { echo "nginx-tests: nginx not installed (scripts/install-deps.sh)"; exit 77; }
command -v prove >/dev/null || { echo "nginx-tests: prove (perl) not installed"; exit 77; }
ctl="$root/build/bpf/smcr_ctl"
[ -x "$ctl" ] && "$ctl" status >/dev/null 2>&1 || { echo "nginx-tests: the eBPF program is not loaded (smcr_ctl load, as root)"; exit 77; }
lib="${SMCR_PRELOAD_LIB:-$root/build/preload/libsmcr_preload.so}"
[ -f "$lib" ] || { echo "nginx-tests: $lib not built"; exit 77; }

work=$(mktemp -d /tmp/smcr-nginx-tests.XXXXXX)
chmod 755 "$work"
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT

cd "$suite" || exit 2
files=()
for pat in "${@:-*.t}"; do
  for f in $pat; do [ -f "$f" ] && files+=("$f"); done
done
[ ${#files[@]} -gt 0 ] || { echo "nginx-tests: no test file matches: $*"; exit 2; }

# memcached refuses to run as root without -u: the suite's memcached tests
# start it by name.
mkdir -p "$work/bin"
if [ "$(id -u)" = 0 ] && [ -x /usr/bin/memcached ]; then
  printf '#!/bin/sh\nexec /usr/bin/memcached -u nobody "$@"\n' > "$work/bin/memcached"
  chmod 755 "$work/bin/memcached"
fi

# Test::Nginx clears the environment of nginx's workers except what `env`
# names: LD_PRELOAD must reach them (the shim reads its settings when it
# loads, before that).
export TEST_NGINX_BINARY="$nginx_bin" TEST_NGINX_MODULES=/usr/lib/nginx/modules
export TEST_NGINX_GLOBALS="user root; env LD_PRELOAD;"
export PATH="$work/bin:$PATH"

# failures LOG: one line per file that did not pass, from prove's summary.
failures() {
  awk '
    /^Test Summary Report/ { on = 1; next }
    on && /^Files=/ { on = 0 }
    on && /^-+ *$/ { next }
    on && /^[^ ]/ { if (f != "") print f " " what; f = $1; what = ""; next }
    on && /Failed tests?:/ { sub(/.*Failed tests?: */, ""); what = what " failed=" $0 }
    on && /Non-zero exit status/ { sub(/.*status: */, ""); what = what " exit=" $0 }
    on && /Parse errors/ { what = what " parse_error" }
    END { if (f != "") print f " " what }' "$1" | sed 's/  */ /g' | sort
}

failed_subtests() {  # failed_subtests FILE LOG: FILE's failure lines in prove's LOG
  awk -v f="$1" 'index($0, f) == 1 { on = 1 } on { print } /^(Dubious|Failed|.* ok$)/ && on { on = 0 }' "$2" |
    grep -E "^#|Failed|Dubious" | head -20
}

run() {  # run NAME [wrapper...]: prove the files, log in $work/NAME.log
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  "$@" prove -j "$jobs" "${files[@]}" > "$work/$name.log" 2>&1
  local t1; t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{ printf "%.1f\n", $2 - $1 }' > "$work/$name.time"
  failures "$work/$name.log" > "$work/$name.failures"
  echo "== $name: $(tail -1 "$work/$name.log") in $(cat "$work/$name.time") s; $(grep -c . "$work/$name.failures") file(s) with failures"
  sed 's/^/   /' "$work/$name.failures"
}

echo "nginx-tests: ${#files[@]} file(s), prove -j $jobs, nginx $("$nginx_bin" -v 2>&1 | sed 's/.*\///')"
run plain env
stats="$work/stats"
mkdir -p "$stats" && chmod 1777 "$stats"
run smc_run env SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$lib" "$root/scripts/smc_run" --stats "$stats"

sum() { cat "$stats"/smcr-*.txt 2>/dev/null | awk -v k="$1" '$1 == k { s += $2 } END { printf "%.0f\n", s }'; }
active=$(sum smc_active) passive=$(sum smc_passive)
ratio=$(awk '{ print $1 }' "$work/smc_run.time" | awk -v p="$(cat "$work/plain.time")" '{ printf "%.2f", (p > 0 ? $1 / p : 0) }')
echo "== counters under smc_run: smc_active=$active smc_passive=$passive rx_bytes=$(sum rx_bytes) tx_bytes=$(sum tx_bytes) aborts=$(sum aborts)"
echo "   fallbacks: $(cat "$stats"/smcr-*.txt 2>/dev/null | awk '$1 ~ /^fallback\./ && $2 > 0 { s[$1] += $2 } END { for (k in s) printf "%s=%d ", k, s[k] }')"
echo "== time: smc_run / plain = $ratio (target <= 1.5)"
[ "$keep" = 1 ] && echo "== logs kept in $work"

rc=0
# Known differences: reported, then left out of the comparison.
for k in "${known[@]}"; do
  f=${k%%:*} why=${k#*:}
  if [ "$(grep "^$f " "$work/plain.failures")" != "$(grep "^$f " "$work/smc_run.failures")" ]; then
    echo "== known difference: $f ($why): $(grep "^$f " "$work/smc_run.failures" || echo passes) under smc_run"
  else
    echo "== known difference did not occur this time: $f ($why)"
  fi
  for r in plain smc_run; do grep -v "^$f " "$work/$r.failures" > "$work/$r.tmp"; mv "$work/$r.tmp" "$work/$r.failures"; done
done
# A file that failed in one run and not the other is run again, alone and in
# both modes, before the verdict: several of the suite's files time their
# backends (delays of a second or less) and fail now and then under load
# over plain TCP too. The first result is printed in full either way, so a
# difference that goes away on the rerun is visible, never silent.
differing=$(diff "$work/plain.failures" "$work/smc_run.failures" | sed -n 's/^[<>] \([^ ]*\).*/\1/p' | sort -u)
flaky=""
if [ -n "$differing" ]; then
  echo "== first run differs in: $(echo $differing); its failed subtests:"
  for f in $differing; do
    for r in plain smc_run; do
      grep -q "^$f " "$work/$r.failures" || continue
      echo "--- $f over $r:"
      failed_subtests "$f" "$work/$r.log"
    done
  done
  saved_files=("${files[@]}")
  files=($differing) jobs=1
  for r in plain smc_run; do mv "$work/$r.failures" "$work/$r.first"; mv "$work/$r.log" "$work/$r.first.log"; done
  echo "== rerun of $(echo $differing), one at a time:"
  run plain env
  run smc_run env SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$lib" "$root/scripts/smc_run" --stats "$stats"
  for r in plain smc_run; do
    # The first run's lines for the other files (a line's first field is its file), then the rerun's.
    awk -v rerun=" $(echo $differing) " 'index(rerun, " " $1 " ") == 0' "$work/$r.first" | cat - "$work/$r.failures" | sort > "$work/$r.merged"
    mv "$work/$r.merged" "$work/$r.failures"
  done
  files=("${saved_files[@]}")
  for f in $differing; do
    [ "$(grep "^$f " "$work/plain.failures")" = "$(grep "^$f " "$work/smc_run.failures")" ] && flaky="$flaky $f"
  done
  [ -n "$flaky" ] && echo "== flaky: differed in the first run only:$flaky"
fi
if diff -u "$work/plain.failures" "$work/smc_run.failures" > "$work/diff"; then
  echo "== verdict: the same failures under smc_run as over plain TCP${flaky:+ (after a rerun of$flaky)}"
else
  echo "== verdict: DIFFERENT failures under smc_run:"
  sed 's/^/   /' "$work/diff"
  for f in $(diff "$work/plain.failures" "$work/smc_run.failures" | sed -n 's/^> \([^ ]*\).*/\1/p'); do
    echo "--- $f under smc_run:"
    failed_subtests "$f" "$work/smc_run.log"
  done
  rc=1
fi
if [ "$active" -lt 1 ] || [ "$passive" -lt 1 ]; then
  echo "== verdict: no SMC-R connection under smc_run (smc_active=$active smc_passive=$passive)"
  rc=1
fi
exit $rc
