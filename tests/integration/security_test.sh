#!/usr/bin/env bash
# Unprivileged use, and who can reach the shared-memory RMBs.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v runuser >/dev/null || skip "runuser (util-linux) not installed"
chmod 755 "$TEST_TMP"; chmod 1777 "$STATS_DIR"
# The build tree must be reachable by the unprivileged user.
if ! runuser -u nobody -- test -x "$ECHO_TOOL"; then skip "build tree not readable by user nobody"; fi
AS_NOBODY=(runuser -u nobody --)

# 1. Both ends unprivileged: SMC-R still happens (the option result and opt-in
#    work without root), data intact.
PORT=$(free_port); reset_stats
bg "${AS_NOBODY[@]}" env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" "$ECHO_TOOL" server --port "$PORT" --max-conns 1
SPID=$BG_PID; wait_port "$PORT"
OUT=$("${AS_NOBODY[@]}" env SMCR_PRELOAD_LIB="$SMCR_PRELOAD" "$SMC_RUN" --stats "$STATS_DIR" timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 4M)
timeout 20 tail --pid="$SPID" -f /dev/null
log "as nobody: $OUT"
check "unprivileged client and server: data intact" [ "$(field ok "$OUT")" = 1 ]
check "unprivileged client and server: SMC-R on both ends" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]

# 2. Another user cannot open a live connection's RMB (a memfd, named nowhere).
PORT=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --port "$PORT"
wait_port "$PORT"; SPID=$(listener_pid "$PORT")
bg under_smc python3 -c "
import socket, time
s = socket.create_connection(('127.0.0.1', $PORT))
s.sendall(b'x'); assert s.recv(1) == b'x'
time.sleep(8)"
CPID=$BG_PID
# The RMB is a mapping (and a kept memfd), reachable through /proc only with
# the owner's privileges.
rmb=""
for _ in $(seq 100); do
  rmb=$(awk '/memfd:smcr-rmb/ { print $1; exit }' /proc/"$SPID"/maps 2>/dev/null)
  [ -n "$rmb" ] && break; sleep 0.05
done
check "the server maps an RMB while a connection is open" [ -n "$rmb" ]
if [ -n "$rmb" ]; then
  check "root (the positive control) can open it through /proc/PID/map_files" \
    bash -c "head -c 4 /proc/$SPID/map_files/$rmb >/dev/null"
  check "user nobody cannot open it through /proc/PID/map_files" \
    bash -c "! runuser -u nobody -- head -c 4 /proc/$SPID/map_files/$rmb 2>/dev/null"
  check "user nobody cannot read the server's memory through /proc/PID/mem" \
    bash -c "! runuser -u nobody -- head -c 1 /proc/$SPID/mem 2>/dev/null"
  # A used connection keeps its RMBs' memfds open (hidden, close-on-exec)
  # so that a program it is handed to can map them; /proc guards the
  # descriptors as it guards the mapping.
  memfd_fd=$(ls -l /proc/"$SPID"/fd 2>/dev/null | awk '/memfd:smcr-rmb/ { print $9; exit }')
  if [ -n "$memfd_fd" ]; then
    check "root (the positive control) can open a kept RMB memfd through /proc/PID/fd" \
      bash -c "head -c 4 /proc/$SPID/fd/$memfd_fd >/dev/null"
    check "user nobody cannot open it through /proc/PID/fd" \
      bash -c "! runuser -u nobody -- head -c 4 /proc/$SPID/fd/$memfd_fd 2>/dev/null"
  fi
fi
kill_tree "$CPID"; kill "$SPID" 2>/dev/null
finish
