#!/usr/bin/env bash
# THE demo (see README.md): an unmodified redis-server and redis-benchmark,
# once under smc_run (SMC-R) and once over plain TCP, side by side, with the
# proof from the shim's own counters that every SMC-R connection really was
# SMC-R and that the payload went over the fabric. Needs root (eBPF).
#   usage: scripts/demo.sh  [CLIENTS [REQUESTS [SIZE]]]  (default 50 100000 1024)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
CLIENTS=${1:-50} REQUESTS=${2:-100000} SIZE=${3:-1024}

[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (loads the eBPF program); try: sudo $0" >&2; exit 1; }

echo "== dependencies"
bash scripts/install-deps.sh
echo "== build"
bash scripts/build.sh >/tmp/smcr-demo-build.log 2>&1 || { tail -30 /tmp/smcr-demo-build.log; echo "demo: build failed (log: /tmp/smcr-demo-build.log)" >&2; exit 1; }
echo "built build/ (log: /tmp/smcr-demo-build.log)"

CTL="$root/build/bpf/smcr_ctl"
LIB="$root/build/preload/libsmcr_preload.so"
SMC_RUN="$root/scripts/smc_run"
TMP=$(mktemp -d /tmp/smcr-demo.XXXXXX)
PIDS=()
LOADED_HERE=0
cleanup() {
  local p
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "$LOADED_HERE" = 1 ] && "$CTL" unload >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT

echo "== eBPF program"
mountpoint -q /sys/fs/bpf || { mkdir -p /sys/fs/bpf; mount -t bpf bpf /sys/fs/bpf; }
if "$CTL" status >/dev/null 2>&1; then echo "already loaded"
else "$CTL" load >/dev/null; LOADED_HERE=1; echo "loaded (will be unloaded at the end)"; fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits for a listener without connecting to it (a probe connection would be
# a plain-TCP client of the SMC-R server and show up as a fallback).
wait_port() { local i=0; until ss -Hltn "sport = :$1" | grep -q LISTEN; do sleep 0.05; i=$((i+1)); [ $i -lt 300 ] || return 1; done; }
smc() { local d=$1; shift; SMCR_PRELOAD_LIB="$LIB" "$SMC_RUN" --stats "$d" "$@"; }
stat_in() { cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }'; }
rps() { tr '\r' '\n' <"$1" | awk -v t="$2:" '$1 == t && /requests per second/ { print $2; exit }'; }
conns() { "$@" info stats | tr -d '\r' | awk -F: '$1 == "total_connections_received" { print $2 }'; }
wait_exit() { local i=0; while kill -0 "$1" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; ! kill -0 "$1" 2>/dev/null; }

mkdir -p "$TMP/srv" "$TMP/bench" "$TMP/cli"
SMC_PORT=$(free_port); TCP_PORT=$(free_port)
REDIS_ARGS=(--bind 127.0.0.1 --save '' --appendonly no --protected-mode no --dir "$TMP")

echo "== redis-server under smc_run on port $SMC_PORT, plain redis-server on port $TCP_PORT"
SMCR_PRELOAD_LIB="$LIB" "$SMC_RUN" --stats "$TMP/srv" redis-server --port "$SMC_PORT" "${REDIS_ARGS[@]}" --logfile "$TMP/smc-redis.log" &
SMC_SRV=$!; PIDS+=("$SMC_SRV")
redis-server --port "$TCP_PORT" "${REDIS_ARGS[@]}" --logfile "$TMP/tcp-redis.log" &
TCP_SRV=$!; PIDS+=("$TCP_SRV")
wait_port "$SMC_PORT" && wait_port "$TCP_PORT" || { echo "demo: a redis-server did not start" >&2; exit 1; }

BENCH=(redis-benchmark -h 127.0.0.1 -c "$CLIENTS" -n "$REQUESTS" -d "$SIZE" -t get,set -q)
# Control connections to the SMC-R server also go through the shim, so that
# every connection that server sees is an SMC-R one.
smc_cli() { smc "$TMP/cli" timeout 30 redis-cli -h 127.0.0.1 -p "$SMC_PORT" "$@"; }

echo "== redis-benchmark under smc_run (SMC-R): ${BENCH[*]:1}"
before=$(conns smc_cli)
smc_rc=0
smc "$TMP/bench" timeout 600 "${BENCH[@]}" -p "$SMC_PORT" >"$TMP/smc.out" 2>"$TMP/smc.err" || smc_rc=$?
after=$(conns smc_cli)
made=$(( ${after:-0} - ${before:-0} - 1 ))
tr '\r' '\n' <"$TMP/smc.out" | grep -a 'requests per second' || true
[ "$smc_rc" -eq 0 ] || { echo "demo: redis-benchmark under smc_run failed (rc=$smc_rc):" >&2; tail -5 "$TMP/smc.err" >&2; }

echo "== redis-benchmark over plain TCP: ${BENCH[*]:1}"
tcp_rc=0
timeout 600 "${BENCH[@]}" -p "$TCP_PORT" >"$TMP/tcp.out" 2>"$TMP/tcp.err" || tcp_rc=$?
tr '\r' '\n' <"$TMP/tcp.out" | grep -a 'requests per second' || true

smc_cli shutdown nosave >/dev/null 2>&1 || true
timeout 10 redis-cli -h 127.0.0.1 -p "$TCP_PORT" shutdown nosave >/dev/null 2>&1 || true
wait_exit "$SMC_SRV" || echo "demo: SMC-R redis-server did not exit" >&2
wait_exit "$TCP_SRV" || echo "demo: plain redis-server did not exit" >&2

row() {  # row TEST
  local t s
  t=$(rps "$TMP/tcp.out" "$1"); s=$(rps "$TMP/smc.out" "$1")
  awk -v n="$1" -v t="${t:-0}" -v s="${s:-0}" 'BEGIN {
    r = (t > 0 && s > 0) ? sprintf("%.2fx", s / t) : "n/a"
    printf "  %-6s %14s %14s %10s\n", n, (t > 0 ? sprintf("%.0f", t) : "FAILED"), (s > 0 ? sprintf("%.0f", s) : "FAILED"), r }'
}

c_active=$(stat_in "$TMP/bench" smc_active); c_fb=$(stat_in "$TMP/bench" fallback_total)
s_passive=$(stat_in "$TMP/srv" smc_passive); s_fb=$(stat_in "$TMP/srv" fallback_total)
cli_n=$(stat_in "$TMP/cli" smc_active)
verdict() { if [ "$1" = "$2" ]; then echo "ok"; else echo "MISMATCH"; fi; }

echo
echo "redis-benchmark -c $CLIENTS -n $REQUESTS -d $SIZE, requests per second (same host, same run)"
printf '  %-6s %14s %14s %10s\n' test "TCP" "SMC-R" "SMC-R/TCP"
row SET
row GET
echo
echo "proof (counters written by the shim in each process at exit):"
printf '  %-52s %s\n' "connections redis-benchmark made (server's count)" "$made"
printf '  %-52s %s  [%s]\n' "client smc_active" "$c_active" "$(verdict "$c_active" "$made")"
printf '  %-52s %s  [%s]\n' "client fallback_total" "$c_fb" "$(verdict "$c_fb" 0)"
printf '  %-52s %s  [%s]\n' "server smc_passive (benchmark + $cli_n redis-cli)" "$s_passive" "$(verdict "$s_passive" $((made + cli_n)))"
printf '  %-52s %s  [%s]\n' "server fallback_total" "$s_fb" "$(verdict "$s_fb" 0)"
printf '  %-52s %s / %s\n' "client payload over the fabric tx / rx (bytes)" "$(stat_in "$TMP/bench" tx_bytes)" "$(stat_in "$TMP/bench" rx_bytes)"
printf '  %-52s %s / %s\n' "server payload over the fabric tx / rx (bytes)" "$(stat_in "$TMP/srv" tx_bytes)" "$(stat_in "$TMP/srv" rx_bytes)"
printf '  %-52s %s / %s\n' "client CDC messages sent / received" "$(stat_in "$TMP/bench" cdc_sent)" "$(stat_in "$TMP/bench" cdc_received)"

ok=1
[ "$smc_rc" -eq 0 ] && [ "$tcp_rc" -eq 0 ] || ok=0
[ "$c_active" = "$made" ] && [ "$c_fb" = 0 ] && [ "$s_fb" = 0 ] && [ "$made" -gt 0 ] || ok=0
if [ "$ok" = 1 ]; then echo "demo: OK, all $made benchmark connections were SMC-R"
else echo "demo: something did not go over SMC-R as expected (see above)"; exit 1; fi
