#!/usr/bin/env bash
# What the kernel refuses the shim must end closed (refused.py, under
# seccomp_exec's filters):
# - no thread (clone fails), on either side: the engine cannot start, so
#   the handshake declines and the connection is plain TCP, its bytes
#   intact, counted as a resources fallback; nothing hangs. (The handshake
#   used to complete and the connection waited for an engine that never
#   ran.)
# - no dup3 on one side: the readiness socket cannot take the number, so
#   that side's connection is reset (connect() or the first call fails,
#   accept() returns it reset) and its peer sees the reset too. (The
#   number stayed the TCP socket while the shim's table said SMC-R.)
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/refused.py"
JAIL="$SMCR_BUILD_DIR/tests/integration/seccomp_exec"
# The interpreter itself: a wrapper script (pyenv's) would need dup2, which
# the shim makes a dup3.
PYTHON=$(python3 -c 'import sys; print(sys.executable)')

# run SERVER_JAIL CLIENT_JAIL: one exchange, the server and the client each
# under the named filter ("-" for none); sets SERVER and CLIENT.
run() {
  local port out
  port=$(free_port)
  reset_stats
  local sj=() cj=()
  [ "$1" != - ] && sj=("$JAIL" "$1")
  [ "$2" != - ] && cj=("$JAIL" "$2")
  under_smc timeout 30 "${sj[@]}" "$PYTHON" "$PY" server "$port" > "$TEST_TMP/server.out" 2>&1 &
  _PIDS+=($!)
  local spid=$!
  wait_port "$port" 10
  CLIENT=$(under_smc timeout 30 "${cj[@]}" "$PYTHON" "$PY" client "$port" 2>&1 | grep '^client' | head -1)
  wait "$spid"
  SERVER=$(grep '^server' "$TEST_TMP/server.out" | head -1)
}

run - -
check "no filter: an SMC-R exchange, the numbers are readiness sockets ($SERVER, $CLIENT)" \
  [ "$SERVER" = "server ok unix" -a "$CLIENT" = "client ok unix" -a "$(stat_sum smc_active)" = 1 ]

run - threads
# The server's accept() returns before a client's late Decline when its CLC
# spin did not hear it (a loaded machine): its number is then the relay's
# readiness socket, still plain TCP to the peer (the counters say which).
check "no thread in the client: the exchange works as TCP ($SERVER, $CLIENT)" \
  [ "${SERVER% *}" = "server ok" -a "${CLIENT% *}" = "client ok" ]
check "no thread in the client: no SMC-R, a resources fallback (active $(stat_sum smc_active), passive $(stat_sum smc_passive), resources $(stat_sum fallback.resources))" \
  [ "$(stat_sum smc_active)" = 0 -a "$(stat_sum smc_passive)" = 0 -a "$(stat_sum fallback.resources)" -ge 1 ]

run threads -
# Likewise a client whose server did not answer its Proposal at once (the
# CLC went on on a thread, connect() returned) relays after the Decline
# (seen in the ASan build).
check "no thread in the server: the exchange works as TCP ($SERVER, $CLIENT)" \
  [ "${SERVER% *}" = "server ok" -a "${CLIENT% *}" = "client ok" ]
check "no thread in the server: no SMC-R, a resources fallback (active $(stat_sum smc_active), passive $(stat_sum smc_passive), resources $(stat_sum fallback.resources))" \
  [ "$(stat_sum smc_active)" = 0 -a "$(stat_sum smc_passive)" = 0 -a "$(stat_sum fallback.resources)" -ge 1 ]

run - dup3
check "no dup3 in the client: its connection is reset, the server sees it ($SERVER, $CLIENT)" \
  [ "${CLIENT#client reset}" != "$CLIENT" -a "${SERVER#server reset}" != "$SERVER" ]

run dup3 -
check "no dup3 in the server: its connection is reset, the client sees it ($SERVER, $CLIENT)" \
  [ "${CLIENT#client reset}" != "$CLIENT" -a "${SERVER#server reset}" != "$SERVER" ]
finish
