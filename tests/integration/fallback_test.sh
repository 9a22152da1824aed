#!/usr/bin/env bash
# The fallback matrix: every way SMC-R can fail to happen ends with the
# application's bytes intact over TCP (or, for a silent peer, a bounded error).
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
FAKE="$SMCR_BUILD_DIR/tests/integration/fake_peer"

start() {  # start "server command..." -> PORT, SPID
  PORT=$(free_port)
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

# Plain client, SMC-R server.
start under_smc "$ECHO_TOOL" server --max-conns 1
OUT=$(timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 1M); reap
check "plain client -> SMC server: data intact" [ "$(field ok "$OUT")" = 1 ]
check "plain client -> SMC server: fallback peer_no_option" [ "$(stat_sum fallback.peer_no_option)" = 1 ]

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

# The server answers the Proposal with bytes that are not CLC.
start_fake garbage
OUT=$(under_smc timeout 60 "$ECHO_TOOL" client --port "$PORT" --bytes 64K --banner $'NOT-SMC-BANNER\n'); reap
check "server sends non-CLC bytes: they reach the app, then data intact" [ "$(field ok "$OUT")" = 1 ]
check "server sends non-CLC bytes: counted as peer_not_clc" [ "$(stat_sum fallback.peer_not_clc)" = 1 ]

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

# Client-side misbehaviour against an SMC-R server (echo server under smc_run).
for b in garbage decline malformed; do
  start under_smc "$ECHO_TOOL" server --max-conns 1
  OUT=$(timeout 30 "$FAKE" client "$PORT" "$b" 2>&1); rc=$?
  reap
  log "client $b: $OUT"
  check "client sends $b: server falls back, echo intact" [ "$rc" = 0 ]
done

# The same from a client silent for 300 ms after connecting: accept() does
# not wait for it (the handshake runs on a thread of the server's), and the
# late fallback relays the TCP bytes to the application intact.
for b in garbage decline malformed; do
  start under_smc "$ECHO_TOOL" server --max-conns 1
  OUT=$(FAKE_PEER_DELAY_MS=300 timeout 30 "$FAKE" client "$PORT" "$b" 2>&1); rc=$?
  reap
  log "slow client $b: $OUT"
  check "slow client sends $b: server falls back through a relay, echo intact" [ "$rc" = 0 ]
  check "slow client sends $b: its CLC ran off accept() ($(stat_sum clc_threaded) threaded)" [ "$(stat_sum clc_threaded)" = 1 ]
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

finish
