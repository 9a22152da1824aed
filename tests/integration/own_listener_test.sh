#!/usr/bin/env bash
# A process connecting to its own SMC-R listener (preload/own_listeners.h):
# with the accept() still to come in the connecting thread (a TCP socketpair,
# an asyncio server and client in one loop), connect() must not wait in the
# CLC for it (it did: 6 s, then ETIMEDOUT); it goes plain TCP. With another
# thread already in accept(), or asleep in poll() with the listener in its
# set (a socketserver), the connection is served and is SMC-R (the positive
# control: the counters can see SMC-R here).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/self_connect.py"

run_mode() {  # run_mode MODE -> OUT, counters in STATS_DIR
  reset_stats
  OUT=$(under_smc timeout 120 python3 "$PY" "$1" 2>&1)
  local rc=$?
  log "$1: $OUT (rc=$rc); smc_active=$(stat_sum smc_active) smc_passive=$(stat_sum smc_passive) own_listener=$(stat_sum fallback.own_listener) peer_no_option=$(stat_sum fallback.peer_no_option)"
}

run_mode thread
check "accept() in another thread first: 5 exchanges intact" [ "$(field ok "$OUT")" = 1 ]
check "accept() in another thread first: all 5 SMC-R" [ "$(stat_sum smc_active)" = 5 -a "$(stat_sum smc_passive)" = 5 -a "$(stat_sum fallback_total)" = 0 ]

run_mode server-thread
check "a socketserver in another thread (asleep in poll()): 5 exchanges intact" [ "$(field ok "$OUT")" = 1 ]
check "a socketserver in another thread: all 5 SMC-R, no grace waited (slowest connect $(field connect_s "$OUT") s)" \
  [ "$(stat_sum smc_active)" = 5 -a "$(stat_sum smc_passive)" = 5 -a "$(stat_sum fallback_total)" = 0 ]

run_mode same-thread
check "connect() then accept() in one thread: 5 exchanges intact" [ "$(field ok "$OUT")" = 1 ]
check "connect() then accept() in one thread: plain TCP, counted (own_listener on the client, peer_no_option on the server)" \
  [ "$(stat_sum fallback.own_listener)" = 5 -a "$(stat_sum fallback.peer_no_option)" = 5 -a "$(stat_sum smc_active)" = 0 ]
check "connect() then accept() in one thread: no connect() waited for the CLC (slowest $(field connect_s "$OUT") s)" \
  awk -v s="$(field connect_s "$OUT")" 'BEGIN { exit !(s != "" && s < 3) }'

run_mode event-loop
check "asyncio server and client in one loop: 5 exchanges intact" [ "$(field ok "$OUT")" = 1 ]
check "asyncio server and client in one loop: plain TCP, counted" \
  [ "$(stat_sum fallback.own_listener)" = 5 -a "$(stat_sum smc_active)" = 0 ]
check "asyncio server and client in one loop: no connect() waited for the CLC (slowest $(field connect_s "$OUT") s)" \
  awk -v s="$(field connect_s "$OUT")" 'BEGIN { exit !(s != "" && s < 3) }'

finish
