#!/usr/bin/env bash
# A connection handed to a program started without a fork the shim sees:
# system(), posix_spawn (glibc clones and execs on its own), CPython's
# subprocess (a vfork child that execs, with pass_fds, or with the connection
# as its stdin and stdout: dup2 onto 0 and 1 in the child), popen(); or to
# another process over SCM_RIGHTS (a worker program). The
# program reads the client's bytes and writes a line into the connection,
# as it would a TCP socket's; then the server writes its own. Plain TCP
# first (the instrument: the case itself works), then both ends under
# smc_run: the same lines, the connection SMC-R (relayed once the program
# inherits it), no fallback; posix_spawn's and subprocess' programs and the
# SCM_RIGHTS worker see the client's port in getpeername; the server's own
# stdin stays its own after the vfork child's dup2 onto 0.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
CASE="$SMCR_SOURCE_DIR/tests/integration/spawn_case.py"

# run_case plain|smc KIND: sets COUT, SOUT, CRC, SRC.
run_case() {
  local wrap=under_smc port
  [ "$1" = plain ] && wrap=env
  port=$(free_port)
  reset_stats
  $wrap timeout 60 python3 "$CASE" server "$2" "$port" </dev/null >"$TEST_TMP/server.out" 2>&1 &
  local spid=$!
  wait_port "$port" || log "server did not start"
  COUT=$($wrap timeout 60 python3 "$CASE" client "$port" 2>&1)
  CRC=$?
  wait "$spid"
  SRC=$?
  SOUT=$(cat "$TEST_TMP/server.out")
  log "$1 $2: client rc=$CRC, server rc=$SRC"
  sed 's/^/  /' <<<"$COUT"$'\n'"$SOUT"
}

for kind in system posix_spawn subprocess subprocess_stdio popen scm_rights; do
  run_case plain "$kind"
  check "plain TCP, $kind: the program's line, then the server's" [ "$CRC" = 0 ]
  check "plain TCP, $kind: the server's status" [ "$SRC" = 0 ]
  run_case smc "$kind"
  check "SMC-R, $kind: the program's line, then the server's (as over TCP)" [ "$CRC" = 0 ]
  check "SMC-R, $kind: the server's status (and its own stdin)" [ "$SRC" = 0 ]
  check "SMC-R, $kind: the connection was SMC-R on both ends, no fallback" \
    [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 -a "$(stat_sum fallback_total)" = 0 ]
  check "SMC-R, $kind: relayed for the program (handovers=$(stat_sum handovers))" [ "$(stat_sum handovers)" -ge 1 ]
done
finish
