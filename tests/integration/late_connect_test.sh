#!/usr/bin/env bash
# A non-blocking connect() whose TCP handshake is slow (preload/late_connect.h).
# The server's accept queue is held full, so the client's SYN is dropped and
# TCP retries it; the server starts accepting 2 s later. Under smc_run the
# connect() call must return EINPROGRESS at once (it used to wait for the
# whole handshake, up to the CLC timeout, stopping the caller's event loop),
# and the connection must work as plain TCP: the client's Decline in place of
# its Proposal lets a server that speaks first do so.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
command -v python3 >/dev/null || skip "python3 not installed"
PY="$SMCR_SOURCE_DIR/tests/integration/late_connect.py"

PORT=$(free_port)
READY="$TEST_TMP/ready"
bg under_smc python3 "$PY" server "$PORT" "$READY"
SERVER=$BG_PID
wait_file "$READY" 10 || { log "FAIL: server did not start"; exit 1; }
# Not under smc_run. A backlog of 1 holds 2; the third is left retrying.
bg python3 "$PY" filler "$PORT" 3
FILLER=$BG_PID
queued() { ss -Hltn "sport = :$PORT" | awk '{ print $2 + 0 }'; }
for _ in $(seq 200); do [ "$(queued)" -ge 2 ] 2>/dev/null && break; sleep 0.05; done
[ "$(queued)" -ge 2 ] 2>/dev/null || { log "FAIL: the accept queue was not filled ($(queued))"; exit 1; }
( wait_file "$TEST_TMP/connecting" 30; sleep 2; touch "$READY.go" ) &
OUT=$(under_smc timeout 60 python3 "$PY" client "$PORT" "$TEST_TMP/connecting")
log "client: $OUT"
kill "$FILLER" 2>/dev/null
wait "$FILLER" 2>/dev/null
# The server writes its counters when it exits, after the client's close.
timeout 20 tail --pid="$SERVER" -f /dev/null || log "the server did not exit within 20 s"
log "counters: late_connect=$(stat_sum fallback.late_connect) peer_declined=$(stat_sum fallback.peer_declined) smc_active=$(stat_sum smc_active)"
check "the connection works: the server's banner first, then 64 KiB echoed" [ "$(field ok "$OUT")" = 1 ]
check "the server waited 2 s to accept (the handshake was really slow: $(field total_s "$OUT") s)" \
  awk -v s="$(field total_s "$OUT")" 'BEGIN { exit !(s != "" && s >= 1.5) }'
returned_at_once() {
  [ "$(field connect "$OUT")" = einprogress ] && awk -v s="$(field connect_call_s "$OUT")" 'BEGIN { exit !(s != "" && s < 1.0) }'
}
check "connect() returned EINPROGRESS without waiting for the handshake ($(field connect_call_s "$OUT") s)" returned_at_once
check "counted: late_connect on the client, the server got the Decline in place of the Proposal" \
  [ "$(stat_sum fallback.late_connect)" = 1 -a "$(stat_sum fallback.peer_declined)" = 1 -a "$(stat_sum smc_active)" = 0 ]
finish
