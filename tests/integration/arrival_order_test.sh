#!/usr/bin/env bash
# The order in which epoll_wait reports connections follows the order their
# data came, across connections, as the kernel's ready list does for TCP
# (arrival_order.py): a command written on a new connection and then one on
# an old connection reach the server in that order. Under smc_run the old
# connection's data, rung at once, overtook the new one's, which went
# through the engine while its sender still waited for the peer's readiness
# socket: redis' own test suite (unit/type/stream-cgroups, list) failed;
# its replication tests once saw a command on one connection handled before
# the close of another that came first. (The shim before the fix, tree
# 282d375, put 237 of this harness's 300 rounds out of order.) The same
# with D closed instead of written to: an end reached a parked peer only
# through its engine (tree 35d2452: 33-86 rounds in 300 out of order).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/arrival_order.py"
ROUNDS=300

run() {  # run WRAP SWAP CLOSE [ENV...] -> OUT
  local wrap=$1 swap=$2 close=$3; shift 3
  local port; port=$(free_port)
  rm -f "$TEST_TMP/ready"
  ( [ $# -gt 0 ] && export "$@"; $wrap python3 "$PY" server "$port" "$TEST_TMP/ready" ) &
  local spid=$!
  wait_file "$TEST_TMP/ready" 10
  OUT=$( ( [ $# -gt 0 ] && export "$@"; $wrap timeout 120 python3 "$PY" client "$port" "$ROUNDS" "$swap" "$close" ) 2>&1)
  timeout 30 tail --pid="$spid" -f /dev/null
}

# The instrument first: every tenth round sends "B" before "A" (or before
# closing D) on purpose, and the server must count exactly those.
for close in 0 1; do
  what=$([ $close = 1 ] && echo "close of D" || echo '"A" on D')
  run env 10 $close
  log "plain TCP, $what, every tenth round swapped (the control): $OUT"
  check "the control ($what): the server counts the $((ROUNDS / 10)) swapped rounds ($OUT)" \
    [ "$OUT" = "violations=$((ROUNDS / 10)) rounds=$ROUNDS" ]
  run env 0 $close
  log "plain TCP, $what: $OUT"
  check "plain TCP ($what): every round in order ($OUT)" [ "$OUT" = "violations=0 rounds=$ROUNDS" ]
  reset_stats
  run under_smc 0 $close
  log "smc_run, $what: $OUT"
  check "smc_run ($what): every round in order, as TCP ($OUT)" [ "$OUT" = "violations=0 rounds=$ROUNDS" ]
  check "smc_run ($what): all $((ROUNDS + 1)) connections SMC-R ($(stat_sum smc_passive) passive), no fallback" \
    [ "$(stat_sum smc_passive)" = $((ROUNDS + 1)) -a "$(stat_sum fallback_total)" = 0 ]
done
finish
