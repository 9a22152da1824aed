#!/usr/bin/env bash
# smcr_stat: live link groups, links and connections of processes under smc_run.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
STAT="$SMCR_BUILD_DIR/tools/smcr_stat"

PORT=$(free_port)
bg under_smc "$ECHO_TOOL" server --port "$PORT"
wait_port "$PORT"; SPID=$(listener_pid "$PORT")
bg under_smc python3 -c "
import socket, time
ss = [socket.create_connection(('127.0.0.1', $PORT)) for _ in range(3)]
for s in ss:
    s.sendall(b'hello'); assert s.recv(5) == b'hello'
time.sleep(6)"
for _ in $(seq 100); do
  OUT=$("$STAT" --pid "$SPID" 2>/dev/null) && grep -q "state=ACTIVE" <<<"$OUT" && [ "$(grep -c '^  conn .*state=ACTIVE' <<<"$OUT")" = 3 ] && break
  sleep 0.05
done
log "smcr_stat --pid $SPID:"; echo "$OUT"
check "smcr_stat reports the server process" grep -q "^process pid=$SPID comm=echo_tool" <<<"$OUT"
check "one server link group holding the 3 connections" grep -q "^group role=server .*connections=3 .*state=up" <<<"$OUT"
check "its link is on the shm fabric and up" grep -q "^  link num=1 state=up .*fabric=shm .*state=up" <<<"$OUT"
check "3 ACTIVE connections with addresses and byte counts" \
  [ "$(grep -c "^  conn .*state=ACTIVE local=127.0.0.1:$PORT peer=127.0.0.1:[0-9]* .*tx_bytes=5 rx_bytes=5" <<<"$OUT")" = 3 ]
check "counters line" grep -q "^counters smc_active 0 smc_passive 3 " <<<"$OUT"
ALL=$("$STAT")
check "without --pid both ends are listed" [ "$(grep -c '^process pid=' <<<"$ALL")" -ge 2 ]
if command -v runuser >/dev/null && runuser -u nobody -- test -x "$STAT"; then
  check "another user gets no answer from root's processes" bash -c "! runuser -u nobody -- $STAT --pid $SPID >/dev/null 2>&1"
fi
finish
