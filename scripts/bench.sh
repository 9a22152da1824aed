#!/usr/bin/env bash
# Benchmarks (not a test): plain TCP vs SMC-R (both ends under smc_run), in the
# same run, on this host, reported as a table with ratios:
#   sockperf ping-pong 14 B (latency avg/p50/p99), sockperf throughput 64000 B
#   (msg/s -> MB/s), redis-benchmark SET/GET (-c 50 -d 1024).
# An SMC-R row counts only if the client's own counters prove it ran over
# SMC-R (smc_active > 0, fallback_total == 0); otherwise it prints VOID.
# A run that fails or times out prints FAILED (details in the log directory).
# Needs root (eBPF) and a built tree (runs scripts/build.sh).
#   usage: scripts/bench.sh [-t SECONDS] [-n REDIS_REQUESTS] [-k]   (-k keeps the logs)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
SECS=5 REQS=100000 KEEP=0
while getopts "t:n:kh" o; do
  case "$o" in
    t) SECS=$OPTARG ;; n) REQS=$OPTARG ;; k) KEEP=1 ;;
    *) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root (loads the eBPF program)" >&2; exit 1; }
for t in sockperf redis-server redis-benchmark redis-cli ss; do
  command -v "$t" >/dev/null || { echo "bench: $t missing; run scripts/install-deps.sh" >&2; exit 1; }
done
bash scripts/build.sh >/tmp/smcr-bench-build.log 2>&1 || { tail -20 /tmp/smcr-bench-build.log; echo "bench: build failed" >&2; exit 1; }

CTL="$root/build/bpf/smcr_ctl"
LIB="$root/build/preload/libsmcr_preload.so"
SMC_RUN="$root/scripts/smc_run"
LOG=$(mktemp -d /tmp/smcr-bench.XXXXXX)
SRV_PID=""
LOADED_HERE=0
cleanup() {
  stop_server
  [ "$LOADED_HERE" = 1 ] && "$CTL" unload >/dev/null 2>&1
  if [ "$KEEP" = 1 ]; then echo "bench: logs kept in $LOG"; else rm -rf "$LOG"; fi
}
trap cleanup EXIT
mountpoint -q /sys/fs/bpf || { mkdir -p /sys/fs/bpf; mount -t bpf bpf /sys/fs/bpf; }
if ! "$CTL" status >/dev/null 2>&1; then "$CTL" load >/dev/null || { echo "bench: smcr_ctl load failed" >&2; exit 1; }; LOADED_HERE=1; fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits for a listener without connecting to it (a probe would count as a fallback).
wait_listen() { local i=0; until ss -Hltn "sport = :$1" | grep -q LISTEN; do sleep 0.05; i=$((i+1)); [ $i -lt 200 ] || return 1; done; }
stat_in() { cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }'; }
stop_server() {  # SIGINT (clean exit, stats written), then SIGKILL after 5 s
  [ -n "$SRV_PID" ] || return 0
  kill -INT "$SRV_PID" 2>/dev/null
  timeout 5 tail --pid="$SRV_PID" -f /dev/null 2>/dev/null || kill -KILL "$SRV_PID" 2>/dev/null
  wait "$SRV_PID" 2>/dev/null
  SRV_PID=""
}
# wrap MODE DIR: the command prefix for a process of MODE (tcp|smc) with stats in DIR
wrap() { if [ "$1" = smc ]; then echo "env SMCR_PRELOAD_LIB=$LIB SMCR_DEBUG=1 $SMC_RUN --stats $2"; else echo env; fi; }
# verdict MODE DIR RC: ok | FAILED | VOID (SMC-R not proven by the client's counters)
verdict() {
  [ "$3" -eq 0 ] || { echo FAILED; return; }
  [ "$1" = tcp ] && { echo ok; return; }
  if [ "$(stat_in "$2" smc_active)" -gt 0 ] && [ "$(stat_in "$2" fallback_total)" -eq 0 ]; then echo ok; else echo VOID; fi
}

declare -A R   # R[mode.metric] = value | FAILED | VOID
record() {  # record MODE VERDICT metric=value...
  local mode=$1 v=$2 kv; shift 2
  for kv in "$@"; do
    local k=${kv%%=*} val=${kv#*=}
    if [ "$v" != ok ]; then R[$mode.$k]=$v
    elif [ -z "$val" ]; then R[$mode.$k]=FAILED
    else R[$mode.$k]=$val; fi
  done
}
explain() {  # explain NAME MODE RC DIR: print what went wrong with an SMC-R run
  echo "bench: $1 [$2] rc=$3 ($( [ "$3" -eq 124 ] && echo timed out || echo exit status)); client counters:" \
       "smc_active=$(stat_in "$4/cli" smc_active) fallback_total=$(stat_in "$4/cli" fallback_total)" >&2
  for f in "$4"/client.err "$4"/server.out; do
    [ -s "$f" ] && { echo "--- tail of $f" >&2; tail -15 "$f" >&2; }
  done
}

# ---- sockperf ------------------------------------------------------------------
sockperf_run() {  # sockperf_run MODE KIND(pp|tp) ARGS... -> sets OUT_DIR, RC
  local mode=$1 kind=$2; shift 2
  local d="$LOG/sockperf-$kind-$mode" port; port=$(free_port)
  mkdir -p "$d/srv" "$d/cli"
  $(wrap "$mode" "$d/srv") sockperf sr --tcp -i 127.0.0.1 -p "$port" >"$d/server.out" 2>&1 &
  SRV_PID=$!
  RC=0
  if wait_listen "$port"; then
    timeout $((SECS + 30)) $(wrap "$mode" "$d/cli") sockperf "$kind" --tcp -i 127.0.0.1 -p "$port" -t "$SECS" "$@" \
      >"$d/client.out" 2>"$d/client.err" || RC=$?
  else
    echo "bench: sockperf server [$mode] did not listen" >&2; RC=1
  fi
  stop_server
  OUT_DIR=$d
}

for mode in tcp smc; do
  echo "bench: sockperf ping-pong 14 B, ${SECS}s [$mode]"
  sockperf_run "$mode" pp -m 14
  o="$OUT_DIR/client.out"
  v=$(verdict "$mode" "$OUT_DIR/cli" "$RC")
  [ "$v" = ok ] || explain "sockperf pp" "$mode" "$RC" "$OUT_DIR"
  record "$mode" "$v" \
    "pp_avg=$(sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p' "$o" | head -1)" \
    "pp_p50=$(awk '/percentile 50.000 =/ { print $NF; exit }' "$o")" \
    "pp_p99=$(awk '/percentile 99.000 =/ { print $NF; exit }' "$o")"

  echo "bench: sockperf throughput 64000 B, ${SECS}s [$mode]"
  sockperf_run "$mode" tp -m 64000
  o="$OUT_DIR/client.out"
  v=$(verdict "$mode" "$OUT_DIR/cli" "$RC")
  [ "$v" = ok ] || explain "sockperf tp" "$mode" "$RC" "$OUT_DIR"
  msgs=$(sed -n 's/.*Message Rate is \([0-9.]*\) \[msg\/sec\].*/\1/p' "$o" | head -1)
  record "$mode" "$v" "tp_mbs=$( [ -n "$msgs" ] && awk -v m="$msgs" 'BEGIN { printf "%.1f", m * 64000 / 1e6 }')"
done

# ---- redis -----------------------------------------------------------------------
for mode in tcp smc; do
  echo "bench: redis-benchmark -c 50 -n $REQS -d 1024 -t get,set [$mode]"
  d="$LOG/redis-$mode"; mkdir -p "$d/srv" "$d/cli"
  port=$(free_port)
  $(wrap "$mode" "$d/srv") redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --protected-mode no --dir "$d" --logfile "$d/redis.log" >"$d/server.out" 2>&1 &
  SRV_PID=$!
  RC=0
  if wait_listen "$port"; then
    timeout 300 $(wrap "$mode" "$d/cli") redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n "$REQS" -d 1024 \
      -t get,set -q >"$d/client.out" 2>"$d/client.err" || RC=$?
  else
    echo "bench: redis-server [$mode] did not listen" >&2; RC=1
  fi
  stop_server
  v=$(verdict "$mode" "$d/cli" "$RC")
  [ "$v" = ok ] || explain "redis-benchmark" "$mode" "$RC" "$d"
  rps() { tr '\r' '\n' <"$d/client.out" | awk -v t="$1:" '$1 == t && /requests per second/ { print $2; exit }'; }
  record "$mode" "$v" "redis_set=$(rps SET)" "redis_get=$(rps GET)"
  [ "$mode" = smc ] && SMC_PROOF="redis: client smc_active=$(stat_in "$d/cli" smc_active) fallback_total=$(stat_in "$d/cli" fallback_total); server smc_passive=$(stat_in "$d/srv" smc_passive)"
done

# ---- table -----------------------------------------------------------------------
isnum() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
row() {  # row LABEL KEY BETTER(lower|higher)
  local t=${R[tcp.$2]:-FAILED} s=${R[smc.$2]:-FAILED} r="-"
  if isnum "$t" && isnum "$s" && awk -v t="$t" 'BEGIN { exit !(t > 0) }'; then
    r=$(awk -v t="$t" -v s="$s" 'BEGIN { printf "%.2fx", s / t }')
  fi
  printf '%-34s %12s %12s %10s   %s\n' "$1" "$t" "$s" "$r" "$3 is better"
}
echo
echo "smcr bench on $(hostname) ($(nproc) CPUs), $(date -u +%Y-%m-%dT%H:%MZ), same run, sockperf -t $SECS"
printf '%-34s %12s %12s %10s\n' "" "TCP" "SMC-R" "SMC-R/TCP"
row "sockperf pp 14 B avg latency (us)" pp_avg lower
row "sockperf pp 14 B p50 latency (us)" pp_p50 lower
row "sockperf pp 14 B p99 latency (us)" pp_p99 lower
row "sockperf tp 64000 B (MB/s)" tp_mbs higher
row "redis SET -c 50 -d 1024 (req/s)" redis_set higher
row "redis GET -c 50 -d 1024 (req/s)" redis_get higher
echo "SMC-R rows are counted only when the client's counters show smc_active > 0 and fallback_total == 0 (else VOID)."
echo "${SMC_PROOF:-}"
