#!/usr/bin/env bash
# Ready sets (core/ready_set.h): an unmodified redis-server and
# redis-benchmark, both epoll event loops, with far more connections (300)
# than the 64 an epoll set can park without ready sets. With them, a request
# reaches the other side's epoll set through shared memory, not as a
# doorbell byte (one send system call, and a recv to empty it) per message.
#
# The instrument first: with SMCR_READY_SETS=0 the same run must show the
# doorbells (peer_doorbells) that the ready-set run must then be rid of.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"

case "${SMCR_SANITIZE:-OFF}" in 1|ON|on|TRUE|true|YES|yes)
  skip "the shim is an ASan build; it cannot be LD_PRELOADed into non-ASan redis (run this test from the normal build)" ;;
esac
for tool in redis-server redis-benchmark; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed (apt-get install redis-server redis-tools)"
done
require_bpf

CONNS=300
REQUESTS=30000

stat_in() { cat "$1"/smcr-*.txt 2>/dev/null | awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }'; }

# run NAME ENV...: redis-server and redis-benchmark -c CONNS GET, both under
# smc_run with ENV; counters in $TEST_TMP/NAME/{server,bench}. Sets SRV, CLI.
run() {
  local name=$1
  shift
  SRV="$TEST_TMP/$name/server" CLI="$TEST_TMP/$name/bench"
  mkdir -p "$SRV" "$CLI"
  local port; port=$(free_port)
  bg env "$@" SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$SRV" redis-server --port "$port" \
    --bind 127.0.0.1 --save '' --appendonly no --protected-mode no --maxclients 1000 --dir "$TEST_TMP" \
    --logfile "$TEST_TMP/$name.log"
  local spid=$BG_PID
  wait_port "$port" 15 || { log "FAIL: redis-server did not listen"; return 1; }
  local out
  out=$(ulimit -n 4096; env "$@" SMCR_SHORT_FLOWS=0 SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$CLI" \
    timeout 300 redis-benchmark -h 127.0.0.1 -p "$port" -c "$CONNS" -n "$REQUESTS" -d 64 -t get -q 2>&1 | tr '\r' '\n' | grep 'per second' | tail -1)
  kill "$spid" 2>/dev/null
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$name: $out"
  for side in SRV CLI; do
    local d=${!side}
    log "$name: $side smc_active=$(stat_in "$d" smc_active) smc_passive=$(stat_in "$d" smc_passive)" \
      "fallback_total=$(stat_in "$d" fallback_total) cdc_in_memory=$(stat_in "$d" cdc_in_memory)" \
      "peer_doorbells=$(stat_in "$d" peer_doorbells) ready_set_marks=$(stat_in "$d" ready_set_marks)" \
      "ready_set_wakes=$(stat_in "$d" ready_set_wakes) epoll_from_memory=$(stat_in "$d" epoll_from_memory)"
  done
  [ -n "$out" ]
}

both_smc() {
  [ "$(stat_in "$CLI" smc_active)" -ge "$CONNS" ] && [ "$(stat_in "$CLI" fallback_total)" = 0 ] &&
    [ "$(stat_in "$SRV" smc_passive)" = "$(stat_in "$CLI" smc_active)" ] && [ "$(stat_in "$SRV" fallback_total)" = 0 ]
}

run off SMCR_READY_SETS=0
check "without ready sets: redis-benchmark -c $CONNS finished" [ $? = 0 ]
check "without ready sets: every connection SMC-R on both sides" both_smc
off_bells=$(( $(stat_in "$SRV" peer_doorbells) + $(stat_in "$CLI" peer_doorbells) ))
# The instrument sees doorbells: beyond 64 parked connections per side,
# requests and replies ring.
check "without ready sets: doorbells rung ($off_bells for $REQUESTS requests)" [ "$off_bells" -ge $((REQUESTS / 2)) ]
check "without ready sets: no ready set marked" \
  [ "$(( $(stat_in "$SRV" ready_set_marks) + $(stat_in "$CLI" ready_set_marks) ))" = 0 ]

run on
check "with ready sets: redis-benchmark -c $CONNS finished" [ $? = 0 ]
check "with ready sets: every connection SMC-R on both sides" both_smc
on_bells=$(( $(stat_in "$SRV" peer_doorbells) + $(stat_in "$CLI" peer_doorbells) ))
on_marks=$(( $(stat_in "$SRV" ready_set_marks) + $(stat_in "$CLI" ready_set_marks) ))
check "with ready sets: requests and replies marked ready sets ($on_marks marks for $REQUESTS requests)" \
  [ "$on_marks" -ge "$REQUESTS" ]
check "with ready sets: at most a tenth of the doorbells ($on_bells; without: $off_bells)" \
  [ "$on_bells" -le $((off_bells / 10)) ]
check "with ready sets: both sides found their events in memory" \
  [ "$(stat_in "$SRV" epoll_from_memory)" -ge $((REQUESTS / 2)) -a "$(stat_in "$CLI" epoll_from_memory)" -ge $((REQUESTS / 2)) ]

finish
