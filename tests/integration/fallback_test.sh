#!/usr/bin/env bash
# The fallback matrix: every way SMC-R can fail to happen ends with the
# application's bytes intact over TCP (or, for a silent peer, a bounded error).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
FAKE="$SMCR_BUILD_DIR/tests/integration/fake_peer"

start() {  # start "server command..." -> PORT (SAME_PORT if set), SPID
  PORT=${SAME_PORT:-$(free_port)}
  reset_stats
  bg "$@" --port "$PORT"
  SPID=$BG_PID
  wait_port "$PORT"
}
start_fake() {  # start_fake BEHAVIOUR
  PORT=$(free_port)
  reset_stats
  bg "$FAKE" server "$PORT" "$1"
  SPID=$BG_PID
  wait_port "$PORT"
}
reap() { timeout 20 tail --pid="$SPID" -f /dev/null; kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }

# SMC-R client, plain server.
start "$ECHO_TOOL" server --max-conns 1
OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 1M); reap
check "SMC client -> plain server: data intact" [ "$(field ok "$OUT")" = 1 ]
check "SMC client -> plain server: fallback peer_no_option" [ "$(stat_sum fallback.peer_no_option)" = 1 ]

# SMC-R client, SMC-R server: not taken for a client that did not offer.
start under_smc "$ECHO_TOOL" server --max-conns 1
OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 1M); reap
check "SMC client -> SMC server: data intact" [ "$(field ok "$OUT")" = 1 ]
check "SMC client -> SMC server: SMC-R both ways, none taken for unoffered" \
  [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 -a "$(stat_sum accept_unoffered)" = 0 ]

# Plain client, SMC-R server restarted on the port the SMC-R client used
# (whose offer the program's per-port count still holds).
SAME_PORT=$PORT
start under_smc "$ECHO_TOOL" server --max-conns 1
unset SAME_PORT
OUT=$(timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 1M); reap
check "plain client -> SMC server: data intact" [ "$(field ok "$OUT")" = 1 ]
check "plain client -> SMC server: fallback peer_no_option" [ "$(stat_sum fallback.peer_no_option)" = 1 ]
# Known without reading the child's record (the program's count of SYN-ACKs
# that carried the option, against the count when this server listened): no
# bpf() call for a client that did not offer. (A program loaded by an older
# smcr_ctl has no such count: reload it.)
check "plain client -> SMC server: known unoffered without its record (accept_unoffered)" \
  [ "$(stat_sum accept_unoffered)" = 1 ]

# eBPF program not loaded (as seen by these processes: an empty pin directory).
export SMCR_BPF_PIN_DIR="$TEST_TMP/no-pins"
start under_smc "$ECHO_TOOL" server --max-conns 1
OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 1M); reap
unset SMCR_BPF_PIN_DIR
check "program not loaded: data intact" [ "$(field ok "$OUT")" = 1 ]
check "program not loaded: both sides report bpf_not_loaded" [ "$(stat_sum fallback.bpf_not_loaded)" = 2 ]

# The server declines.
start_fake decline
OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 1M); reap
check "server Declines: data intact over TCP" [ "$(field ok "$OUT")" = 1 ]
check "server Declines: counted as peer_declined" [ "$(stat_sum fallback.peer_declined)" = 1 ]

# The server's Decline comes in two segments 50 ms apart, cut inside its
# header and after it: the client waits for the whole message (not a
# malformed one, no busy loop), then falls back.
for at in 5 12; do
  export FAKE_PEER_SPLIT_AT=$at
  start_fake split-decline
  unset FAKE_PEER_SPLIT_AT
  OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 1M); reap
  check "server Declines in two segments (cut at byte $at): data intact over TCP" [ "$(field ok "$OUT")" = 1 ]
  check "server Declines in two segments (cut at byte $at): counted as peer_declined" \
    [ "$(stat_sum fallback.peer_declined)" = 1 -a "$(stat_sum fallback_total)" = 1 ]
done

# The server answers the Proposal with bytes that are not CLC (a greeting),
# or with 68 random bytes in place of the Accept: a protocol error once both
# ends offered SMC-R (RFC 7609 C.5; Linux ends it too). The client's
# connection is reset and its application never sees those bytes.
# The last case with the client's handshake off connect(): the server answers
# 300 ms late and connect() returns before that (SMCR_CLC_CONNECT_WAIT_US=0),
# the CLC ends on a thread.
for b in garbage random-accept random-accept:async; do
  wait_us=-1 delay=0
  [ "${b#*:}" = async ] && wait_us=0 delay=300
  FAKE_PEER_DELAY_MS=$delay start_fake "${b%:*}"
  OUT=$(SMCR_CLC_CONNECT_WAIT_US=$wait_us under_smc timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 64K 2>&1); reap
  log "server $b: $OUT"
  check "server sends $b in place of the Accept: the client's connection is reset" \
    [ "$(field ok "$OUT")" = 0 -a -n "$(grep -i 'connection reset' <<<"$OUT")" ]
  check "server sends $b: none of its bytes reached the application" [ "$(field payload_bytes "$OUT")" = 0 ]
  check "server sends $b: counted as protocol_error" \
    [ "$(stat_sum fallback.protocol_error)" = 1 -a "$(stat_sum fallback.peer_not_clc)" = 0 ]
  if [ "$wait_us" = 0 ]; then
    check "server sends $b: the handshake ended off connect()" [ "$(stat_sum clc_connect_async)" = 1 ]
  fi
done

# The server's Accept carries a reserved MTU: we Decline and fall back (RFC C.6).
start_fake reserved-mtu
OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 64K); reap
check "reserved MTU in Accept: Decline, data intact over TCP" [ "$(field ok "$OUT")" = 1 ]
check "reserved MTU counted" [ "$(stat_sum fallback.reserved_value)" = 1 ]

# A peer that never answers the Proposal, the client handshake inline
# (SMCR_CLC_CONNECT_WAIT_US=-1): connect fails within the CLC timeout, no hang.
start_fake silent
t0=$(date +%s%N)
OUT=$(SMCR_CLC_CONNECT_WAIT_US=-1 SMCR_CLC_TIMEOUT_MS=500 under_smc timeout 30 "$ECHO_TOOL" client --port "$PORT" --bytes 1 2>&1); rc=$?
t1=$(date +%s%N)
kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null
log "silent server: rc=$rc $OUT"
check "silent server: client gets an error, not a hang" [ "$rc" = 1 ]
check "silent server: within 5 s" [ $(( (t1 - t0) / 1000000 )) -lt 5000 ]
check "silent server: counted as timeout" [ "$(stat_sum fallback.timeout)" = 1 ]
# With the client handshake off connect() (the default), the
# silent peer looks like a server that has not called accept() yet:
# connect() returns and the handshake waits on a thread, up to
# SMCR_CLC_ANSWER_WAIT_MS (1 s here), then the CLC timeout: the client's
# I/O fails with an error, no hang.
start_fake silent
t0=$(date +%s%N)
OUT=$(SMCR_CLC_TIMEOUT_MS=500 SMCR_CLC_ANSWER_WAIT_MS=1000 under_smc timeout 30 "$ECHO_TOOL" client --port "$PORT" --bytes 1 2>&1); rc=$?
t1=$(date +%s%N)
kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null
log "silent server, handshake off connect(): rc=$rc $OUT"
check "silent server, handshake off connect(): an error, not a hang, within 5 s" [ "$rc" = 1 -a $(( (t1 - t0) / 1000000 )) -lt 5000 ]
check "silent server, handshake off connect(): it went on a thread ($(stat_sum clc_connect_async)), a timeout" \
  [ "$(stat_sum clc_connect_async)" = 1 -a "$(stat_sum fallback.timeout)" = 1 ]

# Client-side misbehaviour against an SMC-R server (echo server under
# smc_run). A Decline, a Proposal framed as Linux frames SMC-D-only ones, or
# an SMC-Rv2-only Proposal (each answered with a Decline, the last in version
# 2): the server falls back, echo intact. Bytes that
# are not a valid CLC message where the Proposal belongs (an HTTP request, a
# Proposal with a bad trailing or leading eyecatcher, random bytes): the
# server resets the connection, no Decline, and its application reads none
# of them (the echo server counts what it read).
# A client silent for 300 ms after connecting (FAKE_PEER_DELAY_MS) goes the
# other way through the server: accept() does not wait for it (the
# handshake runs on a thread of the server's), a fallback is relayed.
echo_server() {  # echo_server -> PORT, SPID; its report in $TEST_TMP/server.out
  PORT=$(free_port)
  reset_stats
  bg under_smc "$ECHO_TOOL" server --max-conns 1 --port "$PORT" >"$TEST_TMP/server.out"
  SPID=$BG_PID
  wait_port "$PORT"
}
off_accept_check() {  # off_accept_check WHO BEHAVIOUR DELAY
  [ "$3" = 0 ] || check "$1 sends $2: its CLC ran off accept() ($(stat_sum clc_threaded) threaded)" \
    [ "$(stat_sum clc_threaded)" = 1 ]
}
for delay in 0 300; do
  who="client"
  [ "$delay" = 0 ] || who="slow client"
  for b in decline smcd-proposal v2-proposal; do
    echo_server
    OUT=$(FAKE_PEER_DELAY_MS=$delay timeout 30 "$FAKE" client "$PORT" "$b" 2>&1); rc=$?
    reap
    log "$who $b: $OUT"
    check "$who sends $b: server falls back, echo intact" [ "$rc" = 0 ]
    check "$who sends $b: counted as peer_declined or a Decline sent" \
      [ "$(stat_sum fallback.peer_declined)" = 1 -o "$(stat_sum fallback.no_fabric)" = 1 ]
    off_accept_check "$who" "$b" "$delay"
  done
  for b in garbage malformed bad-eyecatcher random; do
    echo_server
    OUT=$(FAKE_PEER_DELAY_MS=$delay timeout 30 "$FAKE" client "$PORT" "$b" 2>&1); rc=$?
    reap
    log "$who $b: $OUT; server: $(cat "$TEST_TMP/server.out")"
    check "$who sends $b: the connection is reset, nothing comes back" [ "$rc" = 0 ]
    check "$who sends $b: the server's application read none of it" \
      [ "$(field bytes_received "$(cat "$TEST_TMP/server.out")")" = 0 ]
    check "$who sends $b: counted as protocol_error" [ "$(stat_sum fallback.protocol_error)" = 1 ]
    off_accept_check "$who" "$b" "$delay"
  done
done

# A client that never speaks must not hold a single-threaded server (the
# epoll echo server): another client is served meanwhile, and the silent
# one is dropped at the CLC deadline.
start under_smc "$ECHO_TOOL" server --max-conns 2
timeout 30 "$FAKE" client "$PORT" silent >"$TEST_TMP/silent.out" 2>&1 &
SILENT=$!
sleep 0.3
t0=$(date +%s%N)
OUT=$(under_smc timeout 30 "$ECHO_TOOL" client --port "$PORT" --bytes 1M 2>&1)
t1=$(date +%s%N)
wait "$SILENT"; src=$?
reap
log "beside a silent client: $(( (t1 - t0) / 1000000 )) ms, $OUT; silent: $(cat "$TEST_TMP/silent.out")"
check "beside a silent client: another client is served, data intact" [ "$(field ok "$OUT")" = 1 ]
check "beside a silent client: well before the CLC timeout (6 s)" [ $(( (t1 - t0) / 1000000 )) -lt 3000 ]
check "the silent client is dropped at the CLC deadline" [ "$src" = 0 ]
check "... counted as a CLC timeout" [ "$(stat_sum fallback.timeout)" = 1 ]
check "server counted the three fallbacks" [ "$(stat_sum fallback_total)" -ge 1 ]

# A client that declines the server's Accept (RFC 7609 C.3) after the
# server's accept() returned (the Confirm deferred: the client answers only
# after 300 ms): both go on over TCP, the server's early write and every
# byte intact. The server used to reset the connection.
DAA="$SMCR_SOURCE_DIR/tests/integration/decline_after_accept.py"
PORT=$(free_port); reset_stats
bg under_smc timeout 60 python3 "$DAA" server "$PORT"
SPID=$BG_PID
wait_port "$PORT"
OUT=$(SMCR_STAT="$SMCR_BUILD_DIR/tools/smcr_stat" SMCR_TEST_CONFIRM_DELAY_MS=300 SMCR_TEST_DECLINE_AFTER_ACCEPT=1 \
  under_smc timeout 60 python3 "$DAA" client "$PORT" 2>&1)
timeout 30 tail --pid="$SPID" -f /dev/null; wait "$SPID"; src=$?
log "decline after accept(): $OUT; the server exited $src"
check "the server's Confirm was deferred past accept() (the case under test)" [ "$(stat_sum confirm_deferred)" = 1 ]
check "client declines the Accept after accept() returned: the server's bytes intact over TCP at the client" \
  grep -q "^client: ok=1 error=none" <<<"$OUT"
check "... and the client's at the server (it exited $src)" [ "$src" = 0 ]
check "... the server counted the Decline, the first contact was SMC-R" \
  [ "$(stat_sum fallback.peer_declined)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
check "... the server announced its RMB of the declined connection gone: the client's group knows only the first's" \
  grep -q "^client group: group role=client .* connections=1 peer_rmbs=1 " <<<"$OUT"

finish
