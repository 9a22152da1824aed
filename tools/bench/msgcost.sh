#!/usr/bin/env bash
# Where the time goes: context switches and system calls per message and per
# connection, plain TCP vs SMC-R (both ends under smc_run):
#   pp:   sockperf ping-pong 14 B, counts per round trip (one request + one reply;
#         round trips = the client's [Total Run] SentMessages), with sockperf's p50;
#   pin:  the same with every thread of both processes pinned to CPU 0 (taskset):
#         no cross-CPU wake-ups, which on a VM cost more than the software path;
#   conn: tools/bench/smcr_connbench loop (connect, 32 B request, 64 B reply,
#         close, one at a time), counts per connection.
# Each is measured twice: under `perf stat -e context-switches,cpu-migrations,
# task-clock` (server and client, all their threads: the shim's engine thread
# too), and under `strace -c -f` (slowed by strace: only the counts per unit
# mean anything there). A part whose tool is missing is skipped.
# SMC-R runs also report, per unit and per side, the shim's engine wake-ups
# for link messages (link_wakeups: completion-channel events, verbs) and the
# link messages application threads took from the receive queue themselves
# (link_app_polled).
# Needs root (eBPF) and a built tree (scripts/build.sh).
#   usage: tools/bench/msgcost.sh [-t SECS] [-s pp,pin,conn] [-m MODES] [-a ADDR]
#     -m  tcp,smc (default); smc runs smc_run as it comes, shm and verbs pin
#         the fabric (SMCR_FABRIC): verbs needs an RDMA device whose RoCE GID
#         is ADDR's (in the rxe guest: -a 10.9.0.1, scripts/guest/run.sh)
#     -a  the address the server listens on (default 127.0.0.1)
#   MSGCOST_LIB=PATH measures another build of the shim (A/B).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SECS=5 ONLY="pp,pin,conn" MODES="tcp,smc" ADDR=127.0.0.1
while getopts "t:s:m:a:h" o; do
  case "$o" in t) SECS=$OPTARG ;; s) ONLY=$OPTARG ;; m) MODES=$OPTARG ;; a) ADDR=$OPTARG ;; *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || { echo "msgcost: needs root" >&2; exit 1; }
command -v sockperf >/dev/null || { echo "msgcost: sockperf missing" >&2; exit 1; }
LIB="${MSGCOST_LIB:-$root/build/preload/libsmcr_preload.so}" SMC_RUN="$root/scripts/smc_run" CTL="$root/build/bpf/smcr_ctl"
CB="$root/build/tools/bench/smcr_connbench"
for f in "$LIB" "$CB" "$CTL"; do [ -e "$f" ] || { echo "msgcost: $f missing (scripts/build.sh)" >&2; exit 1; }; done
"$CTL" status >/dev/null 2>&1 || "$CTL" load >/dev/null || { echo "msgcost: smcr_ctl load failed" >&2; exit 1; }
LOG=$(mktemp -d /tmp/smcr-msgcost.XXXXXX)
trap 'rm -rf "$LOG"' EXIT
TOOLS=()
command -v perf >/dev/null && perf stat -e context-switches true >/dev/null 2>&1 && TOOLS+=(perf)
command -v strace >/dev/null && TOOLS+=(strace)
((${#TOOLS[@]})) || { echo "msgcost: neither perf nor strace is usable; nothing to measure" >&2; exit 1; }
command -v perf >/dev/null || echo "msgcost: perf not installed: no context-switch counts"
command -v strace >/dev/null || echo "msgcost: strace not installed: no system call counts"

free_port() { python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$ADDR"; }
wait_listen() { local i=0; until ss -Hltn "sport = :$1" | grep -q LISTEN; do sleep 0.05; i=$((i+1)); [ $i -lt 200 ] || return 1; done; }
# SMCR_SHORT_FLOWS=0: every connection SMC-R (the loop's connections end short,
# and smc_run's short-flow guard would keep them on TCP: a VOID run)
prefix() {
  case "$1" in
    tcp) PFX=() ;;
    smc) PFX=(env SMCR_PRELOAD_LIB="$LIB" SMCR_SHORT_FLOWS=0 "$SMC_RUN" --stats "$2") ;;
    *) PFX=(env SMCR_PRELOAD_LIB="$LIB" SMCR_SHORT_FLOWS=0 SMCR_FABRIC="$1" "$SMC_RUN" --stats "$2") ;;
  esac
}
stat_in() { cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }'; }

# run TOOL MODE KIND: both ends under TOOL (perf|strace) -> $LOG/TOOL-MODE-KIND/{srv,cli}; UNITS, PROOF
run() {
  local tool=$1 mode=$2 kind=$3 port d="$LOG/$1-$2-$3" w=() srv cli
  port=$(free_port); mkdir -p "$d/s" "$d/c"
  case "$tool" in
    perf) w=(perf stat -x, -e context-switches,cpu-migrations,task-clock -o) ;;
    strace) w=(strace -c -f -o) ;;
  esac
  case "$kind" in
    pp) srv=(sockperf sr --tcp -i "$ADDR" -p "$port"); cli=(sockperf pp --tcp -i "$ADDR" -p "$port" -t "$SECS" -m 14 --mps 5000000) ;;
    pin) srv=(taskset -c 0 sockperf sr --tcp -i "$ADDR" -p "$port")
         cli=(taskset -c 0 sockperf pp --tcp -i "$ADDR" -p "$port" -t "$SECS" -m 14 --mps 5000000) ;;
    conn) srv=("$CB" serve "$port" 64); cli=("$CB" loop "$port" "$SECS" 32 64) ;;
  esac
  prefix "$mode" "$d/s"
  # the tool runs inside smc_run (it makes no TCP connections itself), so the
  # wrapper script's own start-up is not counted
  "${PFX[@]}" "${w[@]}" "$d/srv" "${srv[@]}" >"$d/srv.out" 2>&1 &
  local wpid=$! spid=""
  wait_listen "$port" || { echo "msgcost: server did not listen" >&2; return 1; }
  spid=$(ss -Hltnp "sport = :$port" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
  prefix "$mode" "$d/c"
  timeout $((SECS * 10 + 30)) "${PFX[@]}" "${w[@]}" "$d/cli" "${cli[@]}" >"$d/cli.out" 2>&1
  kill -INT "$spid" 2>/dev/null
  timeout 10 tail -s 0.05 --pid="$wpid" -f /dev/null || kill -KILL "$spid" 2>/dev/null
  wait "$wpid" 2>/dev/null
  case "$kind" in
    pp|pin) UNITS=$(sed -n 's/.*\[Total Run\].*SentMessages=\([0-9]*\).*/\1/p' "$d/cli.out" | head -1)
            P50=$(awk '/percentile 50.000 =/ { print $NF; exit }' "$d/cli.out") ;;
    conn) UNITS=$(sed -n 's/^conns=\([0-9]*\) .*/\1/p' "$d/cli.out" | head -1)
          P50=$(sed -n 's/.*first_byte_p50=\([^ ]*\).*/\1/p' "$d/cli.out" | head -1) ;;
  esac
  if [ "$mode" != tcp ]; then
    local a f; a=$(stat_in "$d/c" smc_active) f=$(stat_in "$d/c" fallback_total)
    PROOF="client smc_active=$a fallback_total=$f"
    PROOF="$PROOF; per $unit, client/server: engine link wake-ups $(per "$(stat_in "$d/c" link_wakeups)" "$UNITS")/$(per "$(stat_in "$d/s" link_wakeups)" "$UNITS"), app-polled messages $(per "$(stat_in "$d/c" link_app_polled)" "$UNITS")/$(per "$(stat_in "$d/s" link_app_polled)" "$UNITS")"
    [ "$a" -gt 0 ] && [ "$f" -eq 0 ] || { PROOF="$PROOF: NOT SMC-R, VOID"; echo "msgcost: WARNING: $tool $kind [smc] is not proven SMC-R ($PROOF)" >&2; }
  else PROOF="plain TCP"; fi
}
perf_get() { awk -F, -v e="$2" '$3 == e { print $1 }' "$1"; }  # perf -x, : value,unit,event,...
per() { awk -v a="$1" -v m="$2" 'BEGIN { if (m > 0 && a != "") printf "%.2f", a / m; else printf "-" }'; }

echo "msgcost: ${SECS}s per run; $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in pp pin conn; do
  [[ ",$ONLY," == *",$kind,"* ]] || continue
  case "$kind" in
    pp) what="sockperf ping-pong 14 B" unit="rt" units="round trips" lat="p50 us" ;;
    pin) what="sockperf ping-pong 14 B, both processes on CPU 0" unit="rt" units="round trips" lat="p50 us" ;;
    conn) what="connect/request/close loop (smcr_connbench)" unit="conn" units="connections" lat="1st byte us" ;;
  esac
  for tool in "${TOOLS[@]}"; do
    echo
    if [ "$tool" = perf ]; then
      echo "$what: perf stat (all threads of each process), per $unit:"
      printf '  %-5s %11s %12s %8s %8s %9s %9s %11s %11s\n' mode "$lat" "$units" "cli cs" "srv cs" "cli migr" "srv migr" "cli cpu us" "srv cpu us"
      for mode in ${MODES//,/ }; do
        run perf "$mode" "$kind"; d="$LOG/perf-$mode-$kind"
        printf '  %-5s %11s %12s %8s %8s %9s %9s %11s %11s   (%s)\n' "$mode" "${P50:-?}" "${UNITS:-?}" \
          "$(per "$(perf_get "$d/cli" context-switches)" "$UNITS")" "$(per "$(perf_get "$d/srv" context-switches)" "$UNITS")" \
          "$(per "$(perf_get "$d/cli" cpu-migrations)" "$UNITS")" "$(per "$(perf_get "$d/srv" cpu-migrations)" "$UNITS")" \
          "$(per "$(awk -v x="$(perf_get "$d/cli" task-clock)" 'BEGIN { print x * 1000 }')" "$UNITS")" \
          "$(per "$(awk -v x="$(perf_get "$d/srv" task-clock)" 'BEGIN { print x * 1000 }')" "$UNITS")" "$PROOF"
      done
    else
      echo "$what: strace -c -f (all threads; strace slows everything: counts per $unit only):"
      for mode in ${MODES//,/ }; do
        run strace "$mode" "$kind"; d="$LOG/strace-$mode-$kind"
        for side in cli srv; do
          # rows: % time, seconds, usecs/call, calls, [errors], syscall
          rows=$(awk '$1 ~ /^[0-9.]+$/ && $NF != "total" && NF >= 5 { print $NF, $4 }' "$d/$side" 2>/dev/null)
          tot=$(awk '{ s += $2 } END { print s + 0 }' <<<"$rows")
          printf '  %-4s %-4s %s=%-7s syscalls/%s %-6s: %s (%s)\n' "$mode" "$side" "$unit" "${UNITS:-?}" "$unit" "$(per "$tot" "$UNITS")" \
            "$(sort -k2 -gr <<<"$rows" | awk -v m="$UNITS" '$2 / m >= 0.05 { printf "%s %.2f, ", $1, $2 / m }' | sed 's/, $//')" "$PROOF"
        done
      done
    fi
  done
done
