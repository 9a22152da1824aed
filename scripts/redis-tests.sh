#!/usr/bin/env bash
# redis' own Tcl test suite (`runtest`), over plain TCP and then under
# smc_run, compared test by test. Every unit starts its own redis-server
# (Debian's binary, linked into the tree's src/) and talks to it with Tcl
# clients; replication, MIGRATE and cluster units connect servers to each
# other. Under smc_run every one of those processes is under the shim, so
# their connections are SMC-R where both ends offer it (SMCR_SHORT_FLOWS=0:
# every connection tries).
#
#   usage: scripts/redis-tests.sh [-k] [-c CLIENTS] [-s SRCDIR] [UNIT...]
#     UNIT      runtest units (default: all of them), e.g. unit/type/list integration/replication
#     -c        runtest's parallel clients (default 4)
#     -s        a redis source tree of the installed server's version; by
#               default the upstream tarball of Debian's source package is
#               fetched from the Debian archive (apt-get source, with a
#               deb-src list of its own: the system's apt configuration is
#               not touched)
#     -k        keep the logs (printed path)
#
# Prints, per run, the failed tests, the time, and the shim's counters; the
# verdict is the same failures under smc_run as over plain TCP, with SMC-R
# connections on both ends. Exits 0 then, 1 otherwise, 2 on bad usage, 77
# when it cannot run here (redis-server, tclsh, the eBPF program or the
# source missing).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
clients=4 keep=0 src=""
while getopts "c:ks:h" opt; do
  case $opt in
    c) clients=$OPTARG ;;
    k) keep=1 ;;
    s) src=$OPTARG ;;
    h) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
units=()
for u in "$@"; do units+=(--single "$u"); done

command -v redis-server >/dev/null || { echo "redis-tests: redis-server not installed"; exit 77; }
command -v tclsh >/dev/null || { echo "redis-tests: tclsh not installed (apt-get install tcl)"; exit 77; }
ctl="$root/build/bpf/smcr_ctl"
[ -x "$ctl" ] && "$ctl" status >/dev/null 2>&1 || { echo "redis-tests: the eBPF program is not loaded (smcr_ctl load, as root)"; exit 77; }
lib="${SMCR_PRELOAD_LIB:-$root/build/preload/libsmcr_preload.so}"
[ -f "$lib" ] || { echo "redis-tests: $lib not built"; exit 77; }

work=$(mktemp -d /tmp/smcr-redis-tests.XXXXXX)
[ "$keep" = 1 ] && echo "redis-tests: logs in $work" || trap 'rm -rf "$work"' EXIT

version=$(redis-server --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')
if [ -z "$src" ]; then
  # The upstream tarball inside Debian's source package of the installed
  # version (its tests match the binary; Debian's patches are packaging).
  apt="$work/apt"
  mkdir -p "$apt/lists/partial" "$apt/archives/partial"
  printf 'deb-src http://deb.debian.org/debian bookworm main\ndeb-src http://deb.debian.org/debian bookworm-updates main\ndeb-src http://deb.debian.org/debian-security bookworm-security main\n' >"$apt/sources.list"
  opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$apt/lists"
        -o "Dir::Cache::Archives=$apt/archives" -o APT::Sandbox::User=root)
  if ! apt-get "${opts[@]}" update >"$work/apt.log" 2>&1 ||
     ! (cd "$work" && apt-get "${opts[@]}" source --download-only redis >>"$work/apt.log" 2>&1); then
    echo "redis-tests: could not fetch Debian's redis source (log: $work/apt.log)"; keep=1; exit 77
  fi
  tarball=$(ls "$work"/redis_*.orig.tar.* 2>/dev/null | head -1)
  [ -n "$tarball" ] || { echo "redis-tests: no upstream tarball in Debian's source package"; exit 77; }
  mkdir -p "$work/src" && tar -xf "$tarball" -C "$work/src" --strip-components=1 || exit 77
  src="$work/src"
fi
[ -x "$src/runtest" ] || { echo "redis-tests: $src has no runtest"; exit 77; }
grep -q "\"$version\"" "$src/src/version.h" 2>/dev/null ||
  echo "redis-tests: warning: $src is not redis $version (the installed server)"
# The suite runs src/redis-server and friends: the installed ones.
for b in redis-server redis-cli redis-benchmark redis-check-aof redis-check-rdb redis-sentinel; do
  p=$(command -v "$b") && ln -sf "$p" "$src/src/$b"
done

run() {  # run MODE: the suite's log in $work/MODE.log
  local mode=$1 t0=$SECONDS
  rm -rf "$src/tests/tmp"/*
  if [ "$mode" = smc ]; then
    (cd "$src" && SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$lib" timeout 3600 "$root/scripts/smc_run" -s "$work/stats" \
      ./runtest --clients "$clients" "${units[@]}") >"$work/$mode.log" 2>&1
  else
    (cd "$src" && timeout 3600 ./runtest --clients "$clients" "${units[@]}") >"$work/$mode.log" 2>&1
  fi
  local rc=$?
  sed 's/\x1b\[[0-9;]*m//g' "$work/$mode.log" | sed -n 's/^\[\(err\|exception\|timeout\)\]: \(.*\)/\1 \2/p' | sed 's/ ([0-9]* ms)$//' | sort -u >"$work/$mode.fail"
  local oks; oks=$(sed 's/\x1b\[[0-9;]*m//g' "$work/$mode.log" | grep -c '^\[ok\]: ')
  echo "$mode: rc=$rc, $oks ok, $(wc -l <"$work/$mode.fail") failed, in $((SECONDS - t0)) s"
  sed 's/^/    /' "$work/$mode.fail"
}

counter() {  # counter NAME: summed over the processes' files
  cat "$work/stats"/smcr-*.txt 2>/dev/null | awk -v k="$1" '$1 == k { s += $2 } END { print s + 0 }'
}

mkdir -p "$work/stats"
run plain
run smc
active=$(counter smc_active) passive=$(counter smc_passive)
echo "counters: smc_active=$active smc_passive=$passive fallback_total=$(counter fallback_total)" \
  "clc_connect_async=$(counter clc_connect_async) clc_early_bytes=$(counter clc_early_bytes) aborts=$(counter aborts)" \
  "protocol_violations=$(counter protocol_violations)"
if diff "$work/plain.fail" "$work/smc.fail" >"$work/diff.txt" && [ "$active" -gt 0 ] && [ "$passive" -gt 0 ] &&
   [ "$(sed 's/\x1b\[[0-9;]*m//g' "$work/smc.log" | grep -c '^\[ok\]: ')" -gt 0 ]; then
  echo "redis-tests: the same results under smc_run as over plain TCP; $active + $passive SMC-R connections"
  exit 0
fi
echo "redis-tests: differences (< plain, > smc_run), or no SMC-R connection:"
sed 's/^/    /' "$work/diff.txt"
exit 1
