#!/usr/bin/env bash
# An application's syscall() reaches the shim as libc's wrappers do
# (raw_syscalls.py): libuv, and so Node.js, closes every descriptor with
# syscall(SYS_close, fd). Before, that close went past the shim: the peer
# never saw the end, and the next socket() to get the number answered
# connect() with EISCONN from the dead connection. A close the shim cannot
# see at all (libc's own syscall(), found in libc.so.6 itself) is noticed
# when the kernel gives the number out again. Then Node's own HTTP client
# and server, where node is installed.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/raw_syscalls.py"

PLAIN=$(timeout 120 python3 "$PY" "$(free_port)" 2>&1)
check "plain TCP: every echo intact, every end seen ($(tr '\n' ';' <<<"$PLAIN"))" \
  bash -c '[ "$(grep -c "=True" <<<"$1")" = 5 ] && ! grep -q "=False\|failed" <<<"$1"' _ "$PLAIN"
reset_stats
OUT=$(SMCR_SHORT_FLOWS=0 under_smc timeout 120 python3 "$PY" "$(free_port)" 2>&1)
check "SMC-R: every line as over plain TCP ($(tr '\n' ';' <<<"$OUT"))" [ "$OUT" = "$PLAIN" ]
check "SMC-R: all five connections SMC-R (active $(stat_sum smc_active), passive $(stat_sum smc_passive), fallbacks $(fallback_summary))" \
  [ "$(stat_sum smc_active)" = 5 -a "$(stat_sum smc_passive)" = 5 -a "$(stat_sum fallback_total)" = 0 ]

if command -v node >/dev/null; then
  JS="$SMCR_SOURCE_DIR/tests/integration/node_http.js"
  node_run() {  # node_run WRAPPER...: server and two clients (keepalive, close); prints their lines
    local port; port=$(free_port)
    "$@" node "$JS" server "$port" >"$TEST_TMP/node_server.out" 2>&1 &
    local spid=$!
    wait_port "$port" || { echo "node server did not start"; kill "$spid"; return; }
    "$@" timeout 120 node "$JS" keepalive "$port" 200 2>&1
    "$@" timeout 120 node "$JS" close "$port" 200 2>&1
    kill -TERM "$spid"; wait "$spid" 2>/dev/null
  }
  PLAIN=$(node_run env)
  check "node, plain TCP: 200 + 200 requests intact ($(tr '\n' ';' <<<"$PLAIN"))" \
    [ "$(grep -c '^ok=200 bad=0$' <<<"$PLAIN")" = 2 -a "$(wc -l <<<"$PLAIN")" = 2 ]
  reset_stats
  OUT=$(node_run env SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR")
  check "node under smc_run: 200 + 200 requests intact, no error ($(tr '\n' ';' <<<"$OUT"))" [ "$OUT" = "$PLAIN" ]
  check "node: every connection SMC-R, at least 20 (active $(stat_sum smc_active), passive $(stat_sum smc_passive), fallbacks $(fallback_summary))" \
    [ "$(stat_sum smc_active)" -ge 20 -a "$(stat_sum smc_active)" = "$(stat_sum smc_passive)" -a "$(stat_sum fallback_total)" = 0 ]
else
  log "SKIP (node part): node is not installed"
fi
finish
