#!/usr/bin/env bash
# The JDK's HTTP server and clients under smc_run, against plain TCP: the
# server (NIO, its Selector holding idle connections) answers 100 posts over
# a keepalive HttpClient and 200 blocking java.net.Socket requests with
# "Connection: close". Before, the server crashed (SIGSEGV in the shim)
# within the 200: a connection whose peer had closed after the server's
# shutdown (the JDK shuts a registered channel's output before it can close
# it) was released while the Selector still held the number, and the
# Selector's next wait, or the close, reached for its freed CDC page.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
case "${SMCR_SANITIZE:-OFF}" in ON|on|1|TRUE|true) skip "ASan build of the shim: it cannot be preloaded into the JVM" ;; esac
require_bpf
for tool in java javac; do
  command -v "$tool" >/dev/null || skip "$tool not installed (scripts/install-deps.sh: openjdk-17-jdk-headless)"
done
J="$TEST_TMP/java"
mkdir -p "$J"
javac -d "$J" "$SMCR_SOURCE_DIR/tests/apps/JavaHttp.java" || { log "FAIL: javac"; exit 1; }

java_run() {  # java_run WRAPPER...: the server and the client; prints the client's lines
  local port; port=$(free_port)
  (cd "$J" && exec "$@" java -cp "$J" JavaHttp server "$port") >"$J/server.out" 2>&1 &
  local spid=$!
  wait_port "$port" 30 || { echo "server did not start: $(head -3 "$J/server.out")"; kill "$spid"; return; }
  "$@" timeout 240 java -cp "$J" JavaHttp client "$port" 100 200 2>&1
  if kill -0 "$spid" 2>/dev/null; then kill -TERM "$spid"; wait "$spid" 2>/dev/null; else
    wait "$spid"; echo "server ended by itself (status $?): $(grep -m3 -E 'SIGSEGV|Problematic|libsmcr' "$J/server.out" | tr '\n' ' ')"
  fi
}
PLAIN=$(java_run env)
check "plain TCP: 100 posts and 200 sockets intact ($(tr '\n' ';' <<<"$PLAIN"))" \
  [ "$PLAIN" = "$(printf 'http ok=100 bad=0\nsocket ok=200 bad=0')" ]
reset_stats
OUT=$(java_run env SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR")
check "under smc_run: the same lines, the server alive to the end ($(tr '\n' ';' <<<"$OUT"))" [ "$OUT" = "$PLAIN" ]
check "every connection SMC-R, at least 201 (active $(stat_sum smc_active), passive $(stat_sum smc_passive), fallbacks $(fallback_summary), violations $(stat_sum protocol_violations))" \
  [ "$(stat_sum smc_active)" -ge 201 -a "$(stat_sum smc_active)" = "$(stat_sum smc_passive)" -a "$(stat_sum fallback_total)" = 0 -a "$(stat_sum protocol_violations)" = 0 ]
finish
