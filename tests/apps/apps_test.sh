#!/usr/bin/env bash
# Unmodified applications under smc_run, each checked to have used SMC-R:
#  1. a Python asyncio echo server and client (8 concurrent 4 MB streams,
#     compared byte for byte), and a plain client (no shim) against it;
#  2. iperf3 (a control connection and 2 parallel data streams);
#  3. sockperf ping-pong;
# and against each server, a plain client (no shim) over TCP.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in ON|on|1|TRUE|true) skip "ASan build of the shim: it cannot be preloaded into non-ASan programs" ;; esac
require_bpf
ECHO_PY="$SMCR_SOURCE_DIR/tests/apps/asyncio_echo.py"
stat_in() { cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { printf "%.0f\n", s }'; }
smc_in() { local d=$1; shift; SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$d" "$@"; }

# --- 1. asyncio
S1="$STATS_DIR/asyncio-server"; C1="$STATS_DIR/asyncio-client"; mkdir -p "$S1" "$C1"
port=$(free_port)
bg smc_in "$S1" python3 "$ECHO_PY" server "$port"
wait_port "$port"; spid=$(listener_pid "$port")
OUT=$(smc_in "$C1" timeout 120 python3 "$ECHO_PY" client "$port" 4000000 8 2>&1)
log "asyncio under smc_run: $OUT"
check "asyncio: 8 concurrent 4 MB echo streams intact" [ "$(field ok "$OUT")" = 8 ]
check "asyncio: the client's 8 connections were SMC-R" [ "$(stat_in "$C1" smc_active)" = 8 -a "$(stat_in "$C1" fallback_total)" = 0 ]
PLAIN=$(timeout 60 python3 "$ECHO_PY" client "$port" 100000 2 2>&1)
check "asyncio: a plain client (no shim) is served over TCP" [ "$(field ok "$PLAIN")" = 2 ]
kill -TERM "$spid" 2>/dev/null; timeout 10 tail --pid="$spid" -f /dev/null  # exits normally: stats written
log "asyncio server: smc_passive=$(stat_in "$S1" smc_passive) peer_no_option=$(stat_in "$S1" fallback.peer_no_option) files=$(ls "$S1")"
check "asyncio: the server accepted 8 SMC-R connections and fell back for the plain ones" \
  [ "$(stat_in "$S1" smc_passive)" = 8 -a "$(stat_in "$S1" fallback.peer_no_option)" = 2 ]

# --- 2. iperf3
if command -v iperf3 >/dev/null; then
  S2="$STATS_DIR/iperf-server"; C2="$STATS_DIR/iperf-client"; mkdir -p "$S2" "$C2"
  port=$(free_port)
  bg smc_in "$S2" iperf3 -s -1 -p "$port"
  wait_port "$port"; spid=$(listener_pid "$port")
  OUT=$(smc_in "$C2" timeout 60 iperf3 -c 127.0.0.1 -p "$port" -t 2 -P 2 -J 2>&1)
  timeout 20 tail --pid="$spid" -f /dev/null
  bytes=$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(int(d["end"]["sum_received"]["bytes"]))' <<<"$OUT" 2>/dev/null)
  log "iperf3 under smc_run: ${bytes:-?} bytes received in 2 s"
  check "iperf3: data streams delivered (${bytes:-0} bytes)" [ "${bytes:-0}" -gt 10000000 ]
  check "iperf3: control + 2 data connections were SMC-R on both ends" \
    [ "$(stat_in "$C2" smc_active)" = 3 -a "$(stat_in "$S2" smc_passive)" = 3 ]
  check "iperf3: no fallback" [ "$(stat_in "$C2" fallback_total)" = 0 -a "$(stat_in "$S2" fallback_total)" = 0 ]
  # A plain iperf3 client (no shim) against an iperf3 server under smc_run.
  S2P="$STATS_DIR/iperf-server-plain"; mkdir -p "$S2P"
  port=$(free_port)
  bg smc_in "$S2P" iperf3 -s -1 -p "$port"
  wait_port "$port"; spid=$(listener_pid "$port")
  OUT=$(timeout 60 iperf3 -c 127.0.0.1 -p "$port" -t 1 -J 2>&1)
  timeout 20 tail --pid="$spid" -f /dev/null
  bytes=$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(int(d["end"]["sum_received"]["bytes"]))' <<<"$OUT" 2>/dev/null)
  check "iperf3: a plain client is served over TCP (${bytes:-0} bytes)" [ "${bytes:-0}" -gt 1000000 ]
  check "iperf3: that server fell back for it (no SMC-R, peer_no_option >= 2)" \
    [ "$(stat_in "$S2P" smc_passive)" = 0 -a "$(stat_in "$S2P" fallback.peer_no_option)" -ge 2 ]
else
  log "iperf3 not installed: iperf3 case not run"
  check "iperf3 installed (apt-get install iperf3)" false
fi

# --- 3. sockperf
if command -v sockperf >/dev/null; then
  S3="$STATS_DIR/sockperf-server"; C3="$STATS_DIR/sockperf-client"; mkdir -p "$S3" "$C3"
  port=$(free_port)
  bg smc_in "$S3" sockperf server --tcp -i 127.0.0.1 -p "$port"
  wait_port "$port"; spid=$(listener_pid "$port")
  # --mps: sockperf sizes its reply table for 600k messages/s unless told;
  # faster than that it stops with "_seqN > m_maxSequenceNo".
  OUT=$(smc_in "$C3" timeout 60 sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t 2 -m 14 --mps 5000000 2>&1)
  PLAIN=$(timeout 60 sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t 1 -m 14 --mps 5000000 2>&1)
  kill "$spid" 2>/dev/null; timeout 10 tail --pid="$spid" -f /dev/null
  plat=$(sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p' <<<"$PLAIN" | head -1)
  check "sockperf: a plain client (no shim) against the same server completes over TCP" [ -n "$plat" ]
  lat=$(sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p' <<<"$OUT" | head -1)
  log "sockperf ping-pong under smc_run: avg-latency=${lat:-?} usec"
  [ -n "$lat" ] || log "sockperf client said: $(tail -3 <<<"$OUT" | tr '\n' ' ')"
  check "sockperf: ping-pong completed with a latency figure" [ -n "$lat" ]
  check "sockperf: its connection was SMC-R" [ "$(stat_in "$C3" smc_active)" = 1 ]
fi
finish
