#!/usr/bin/env bash
# Accept-then-fork servers under CPU load, run after run: issue 15's "50 runs
# under CPU stress with 0 failures" as a script.
#
#   usage: scripts/fork-stress.sh [-n RUNS] [-l LOADERS] [-k] [KIND...]
#     KIND      a server of tests/integration/fork_servers.py (default:
#               forkingmixin inetd_exec): socketserver.ForkingTCPServer, and
#               an inetd-style server whose child dup2()s the connection onto
#               0/1 and execs cat
#     -n        SMC-R runs per kind (default 50)
#     -l        busy loops beside the runs (default 2: one per core here)
#     -k        keep the logs of every run (printed path); failed runs'
#               logs are always kept
#
# One run: the server under smc_run (SMCR_SHORT_FLOWS=0), four clients under
# smc_run one after another (1 B, 100 kB, 3 MB, 20 MB, each echoed whole
# with a half-close, compared by SHA-256). It passes when every echo is
# intact, all 4 connections were SMC-R at both ends, each moved to its child
# (forkingmixin: re-homed; inetd_exec: carried into the exec'd program) and
# none was aborted, from the shim's counters. The same run over plain TCP
# first, once per kind, proves the check sees a good run.
# Exits 0 when every run passed, 1 otherwise, 2 on bad usage, 77 when it
# cannot run here.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=50 loaders=2 keep=0
while getopts "n:l:kh" opt; do
  case $opt in
    n) runs=$OPTARG ;;
    l) loaders=$OPTARG ;;
    k) keep=1 ;;
    h) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(forkingmixin inetd_exec)
[[ "$runs" =~ ^[0-9]+$ && "$loaders" =~ ^[0-9]+$ ]] || { echo "fork-stress: -n and -l take numbers"; exit 2; }

ctl="$root/build/bpf/smcr_ctl"
[ -x "$ctl" ] && "$ctl" status >/dev/null 2>&1 || { echo "fork-stress: the eBPF program is not loaded (smcr_ctl load, as root)"; exit 77; }
lib="${SMCR_PRELOAD_LIB:-$root/build/preload/libsmcr_preload.so}"
[ -f "$lib" ] || { echo "fork-stress: $lib not built"; exit 77; }
[ -f "${lib}.asan" ] && { echo "fork-stress: an ASan shim cannot be preloaded into python"; exit 77; }
servers="$root/tests/integration/fork_servers.py"
client="$root/tests/integration/fork_client.py"

work=$(mktemp -d /tmp/smcr-fork-stress.XXXXXX)
load_pids=()
cleanup() {
  [ ${#load_pids[@]} -gt 0 ] && kill "${load_pids[@]}" 2>/dev/null
  [ "$keep" = 1 ] || [ -n "$(ls "$work"/failed-* 2>/dev/null)" ] || rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
stat_sum() {  # stat_sum DIR KEY
  cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { printf "%.0f\n", s }'
}

# one_run plain|smc KIND DIR -> prints "ok" or why not
one_run() {
  local mode=$1 kind=$2 dir=$3 wrap=()
  mkdir -p "$dir/stats"
  [ "$mode" = smc ] && wrap=(env SMCR_PRELOAD_LIB="$lib" SMCR_SHORT_FLOWS=0 "$root/scripts/smc_run" --stats "$dir/stats")
  local port; port=$(free_port)
  "${wrap[@]}" env SMCR_DEBUG=1 python3 "$servers" "$kind" "$port" 4 2>"$dir/server.err" &
  local server=$!
  local t=0
  until ss -ltnH "sport = :$port" 2>/dev/null | grep -q . || [ $t -ge 200 ]; do sleep 0.05; t=$((t + 1)); done
  local out="" size
  for size in 1 100000 3000000 20000000; do
    out+="$("${wrap[@]}" env SMCR_DEBUG=1 timeout 60 python3 "$client" "$port" "$size" 2>>"$dir/client.err" | tail -1) "
  done
  timeout 30 tail --pid="$server" -f /dev/null || kill -9 "$server" 2>/dev/null
  local intact; intact=$(grep -o 'echo=ok' <<<"$out" | wc -l)
  local why=""
  [ "$intact" = 4 ] || why+="echoes: $out; "
  if [ "$mode" = smc ]; then
    local s="$dir/stats"
    [ "$(stat_sum "$s" smc_active)" = 4 ] && [ "$(stat_sum "$s" smc_passive)" = 4 ] ||
      why+="SMC-R connections: active $(stat_sum "$s" smc_active) passive $(stat_sum "$s" smc_passive) of 4; "
    [ "$(stat_sum "$s" aborts)" = 0 ] || why+="aborts $(stat_sum "$s" aborts); "
    [ "$(stat_sum "$s" handovers)" = 0 ] || why+="relayed $(stat_sum "$s" handovers); "
    case $kind in
      forkingmixin) [ "$(stat_sum "$s" rehomed)" = 4 ] || why+="re-homed $(stat_sum "$s" rehomed) of 4; " ;;
      inetd_exec) [ "$(stat_sum "$s" exec_carried)" = 4 ] || why+="carried across exec $(stat_sum "$s" exec_carried) of 4; " ;;
    esac
  fi
  echo "${why:-ok}"
}

for ((i = 0; i < loaders; i++)); do
  sh -c 'while :; do :; done' &
  load_pids+=($!)
done

failed=0 total=0
for kind in "${kinds[@]}"; do
  control=$(one_run plain "$kind" "$work/$kind-plain")
  if [ "$control" != ok ]; then
    echo "fork-stress: $kind over plain TCP did not pass ($control): the check or the machine is wrong"
    mv "$work/$kind-plain" "$work/failed-$kind-plain"
    exit 1
  fi
  bad=0 start=$(date +%s)
  for ((r = 1; r <= runs; r++)); do
    verdict=$(one_run smc "$kind" "$work/$kind-$r")
    total=$((total + 1))
    if [ "$verdict" != ok ]; then
      bad=$((bad + 1))
      mv "$work/$kind-$r" "$work/failed-$kind-$r"
      echo "fork-stress: $kind run $r: $verdict(logs: $work/failed-$kind-$r)"
    elif [ "$keep" = 0 ]; then
      rm -rf "$work/$kind-$r"
    fi
  done
  failed=$((failed + bad))
  echo "fork-stress: $kind: $((runs - bad)) of $runs runs passed under $loaders busy loops ($(( $(date +%s) - start )) s; plain TCP control passed)"
done
[ "$keep" = 1 ] && echo "fork-stress: logs in $work"
[ "$failed" = 0 ] && [ "$total" -gt 0 ]
