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
# stdin stays its own after the vfork child's dup2 onto 0. (These servers
# keep their copy and write after the program: relayed, once the program
# has waited a while for the server to let go.)
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
# A program that takes the connection over itself (it loads the shim): the
# server starts it (posix_spawn of an echo program; posix_spawn of cat with
# the connection duplicated onto its 0 and 1 by the spawn's file actions,
# handoff_spawn_dup2, from a close-on-exec number; subprocess with the
# connection as cat's stdin and stdout, a vfork child's exec) or sends the
# connection to its worker over SCM_RIGHTS (a child it started before the
# connection existed; a process started through a shell that exited, no
# child of it, listening on a named socket; or, from a forked child that
# accepted, its parent), closes its own copy and exits at once, while the
# client streams 16 MiB through the program. Over SMC-R the program owns
# the connection (its own link, no relay through the server, which is
# gone): every byte back, in order. handoff_used_subprocess: the server
# writes a line on the connection before it starts cat, handoff_used_scm
# reads (nothing there yet) before it sends it: its first use, after which
# the RMBs' memfds used to be closed, so the connection was relayed by the
# server and ended with it.
run_handoff() {
  local wrap=under_smc port
  [ "$1" = plain ] && wrap=env
  port=$(free_port)
  reset_stats
  $wrap timeout 60 python3 "$CASE" server "$2" "$port" </dev/null >"$TEST_TMP/server.out" 2>&1 &
  local spid=$!
  wait_port "$port" || log "server did not start"
  COUT=$($wrap timeout 60 python3 "$CASE" client_stream "$port" 16 "$2" 2>&1)
  CRC=$?
  wait "$spid"
  SRC=$?
  log "$1 $2: client rc=$CRC, server rc=$SRC"
  sed 's/^/  /' <<<"$COUT"$'\n'"$(cat "$TEST_TMP/server.out")"
}
for kind in handoff_spawn handoff_spawn_dup2 handoff_subprocess handoff_used_subprocess handoff_scm handoff_used_scm handoff_scm_named handoff_scm_parent; do
  run_handoff plain "$kind"
  check "plain TCP, $kind: 16 MiB through the program after the server exited" [ "$CRC" = 0 -a "$SRC" = 0 ]
  run_handoff smc "$kind"
  check "SMC-R, $kind: 16 MiB through the program after the server exited" [ "$CRC" = 0 -a "$SRC" = 0 ]
  check "SMC-R, $kind: SMC-R on both ends, no fallback" \
    [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 -a "$(stat_sum fallback_total)" = 0 ]
  check "SMC-R, $kind: passed to the program (exec_carried=$(stat_sum exec_carried), exec_adopted=$(stat_sum exec_adopted), rehomed_peer=$(stat_sum rehomed_peer)), never relayed (handovers=$(stat_sum handovers))" \
    [ "$(stat_sum exec_carried)" = 1 -a "$(stat_sum exec_adopted)" = 1 -a "$(stat_sum rehomed_peer)" = 1 -a "$(stat_sum handovers)" = 0 ]
done
finish
