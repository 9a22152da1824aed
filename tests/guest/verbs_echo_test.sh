#!/usr/bin/env bash
# Runs INSIDE a guest with a real rxe device (scripts/guest/run.sh): SMC-R
# over the verbs fabric between two processes, proven by the device's own
# port counters, with TCP carrying only the handshake.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
DEV=${SMCR_TEST_RDMA_DEV:-rxe0}
[ -d "/sys/class/infiniband/$DEV" ] || skip "no RDMA device $DEV (run inside scripts/guest/run.sh)"
CNT=/sys/class/infiniband/$DEV/ports/1/counters
HOST=${SMCR_TEST_ADDR:-10.9.0.1}
export SMCR_FABRIC=verbs

# Bytes the device has sent, as far as its counters can tell: the IBTA PMA
# counter port_xmit_data counts 4-octet words; rxe has no PMA counters, only
# hw_counters/sent_pkts, so there we credit each packet with at most one path
# MTU (1024 on rxe over a dummy netdev): a lower bound is all the proof needs.
HW=/sys/class/infiniband/$DEV/ports/1/hw_counters
MTU_BYTES=${SMCR_TEST_PATH_MTU:-1024}
device_tx_bytes() {
  if [ -r "$CNT/port_xmit_data" ]; then echo $(( $(cat "$CNT/port_xmit_data") * 4 ))
  else echo $(( $(cat "$HW/sent_pkts") * MTU_BYTES )); fi
}

run_pair() {  # run_pair "server args" "client args" -> OUT
  local port; port=$(free_port)
  reset_stats
  bg under_smc "$ECHO_TOOL" server --host "$HOST" --port "$port" $1
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; return 1; }
  OUT=$(under_smc timeout 240 "$ECHO_TOOL" client --host "$HOST" --port "$port" $2)
  local rc=$?
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$OUT (rc=$rc)"
  return $rc
}

tx0=$(device_tx_bytes)
run_pair "--max-conns 1" "--bytes 8M"
tx1=$(device_tx_bytes)
check "echo 8 MiB over rxe intact (SHA-256)" [ "$(field ok "$OUT")" = 1 ]
check "client and server both SMC-R" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
check "TCP carried only the handshake (< 300 bytes each way)" \
  [ "$(field tcp_bytes_received "$OUT")" -lt 300 -a "$(field tcp_bytes_sent "$OUT")" -lt 300 ]
# Both directions cross the device: at least 2 x 8 MiB, counted in 4-byte words.
check "the device's own counters carried both directions' payload (>= $(( tx1 - tx0 )) bytes)" \
  [ $(( tx1 - tx0 )) -ge $(( 2 * 8 * 1024 * 1024 )) ]

run_pair "--max-conns 1" "--bytes 1"
check "1-byte stream over rxe" [ "$(field ok "$OUT")" = 1 ]

run_pair "--max-conns 1" "--bytes 256M"
check "256 MiB stream over rxe intact (SHA-256)" [ "$(field ok "$OUT")" = 1 ]
check "256 MiB: TCP still carried only the handshake" [ "$(field tcp_bytes_received "$OUT")" -lt 300 ]

run_pair "--max-conns 100" "--bytes 64K --conns 100"
check "100 concurrent connections over rxe" [ "$(field ok "$OUT")" = 100 ]
check "100 connections were SMC-R" [ "$(stat_sum smc_active)" = 100 ]
check "100 connections over one link group per side: one QP pair, not 100" \
  [ "$(stat_sum lgr_created)" = 2 -a "$(stat_sum lgr_reused)" = 198 ]

# 300 connections one after another: one group per side for all of them.
# The peer RMBs a group knows are forgotten once the peer deleted them and
# our connection on them ended: kept for ever, each 240 connections over
# the group's life made the server open a new group (a new QP pair and
# CONFIRM LINK), and would have made RFC 7609 8.2's 255 a hard stop.
run_pair "--max-conns 300" "--bytes 1K --conns 300 --sequential"
check "300 sequential connections over rxe intact, all SMC-R" \
  [ "$(field ok "$OUT")" = 300 -a "$(stat_sum smc_active)" = 300 -a "$(stat_sum smc_passive)" = 300 ]
check "300 sequential connections over one link group per side (lgr_created=$(stat_sum lgr_created))" \
  [ "$(stat_sum lgr_created)" = 2 ]

run_pair "--mode source --bytes 4M --max-conns 1" "--mode source --bytes 4M"
check "server closes first over rxe" [ "$(field ok "$OUT")" = 1 ]

# Per-link diagnostics from a live process: device, GID index, QP, counters.
port=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --host "$HOST" --port "$port"
wait_port "$port"; spid=$(listener_pid "$port")
bg under_smc python3 -c "
import socket, time
s = socket.create_connection(('$HOST', $port)); s.sendall(b'x'); assert s.recv(1) == b'x'; time.sleep(8)"
for _ in $(seq 100); do
  DIAG=$("$SMCR_BUILD_DIR/tools/smcr_stat" --raw --pid "$spid" 2>/dev/null) && grep -q "state=ACTIVE" <<<"$DIAG" && break
  sleep 0.1
done
log "smcr_stat:"; echo "$DIAG"
check "smcr_stat: the link is verbs on $DEV, QP in RTS, with the GID index and traffic class" \
  grep -q "^  link num=[0-9]* state=up .*fabric=verbs device=$DEV port=1 .*gid_index=[0-9]* .*qp_state=RTS .*tclass=106 " <<<"$DIAG"
check "smcr_stat: device counters, 'not-provided' where rxe has none" grep -q "np_cnp_sent=not-provided" <<<"$DIAG"
check "smcr_stat: the connection is ACTIVE" grep -q "^  conn .*state=ACTIVE local=$HOST:$port" <<<"$DIAG"
kill "$spid" 2>/dev/null

# SMC-Rv2 between two shims (both given a UEID, as for the Linux kernel):
# the server answers the client's v1-and-v2 Proposal in v2, the group runs
# Linux's RMBE model (cursors from 0, no eyecatcher) and version-2 LLC.
# Counters of their own: the processes of the diagnostics case above may
# still be writing theirs.
V2_STATS=$TEST_TMP/v2stats
v2_pair() {  # v2_pair SERVER_UEID CLIENT_UEID CONNS "client args" -> OUT, LOG (the client's debug log)
  local port; port=$(free_port)
  local STATS_DIR=$V2_STATS
  mkdir -p "$STATS_DIR"; reset_stats
  # The server exits after CONNS connections, with its counters written.
  SMCR_UEID=$1 bg under_smc "$ECHO_TOOL" server --host "$HOST" --port "$port" --max-conns "$3"
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; return 1; }
  OUT=$(SMCR_UEID=$2 SMCR_DEBUG=1 under_smc timeout 240 "$ECHO_TOOL" client --host "$HOST" --port "$port" $4 \
        2>"$TEST_TMP/v2client.log")
  local rc=$?
  timeout 30 tail --pid="$spid" -f /dev/null
  LOG=$(grep -oE "CLC: client SMC-R[^(]*" "$TEST_TMP/v2client.log" | sort | uniq -c)
  log "$OUT (rc=$rc); client: $LOG"
  return $rc
}
v2_pair SMCLAB-UEID-1 SMCLAB-UEID-1 1 "--bytes 8M"
check "SMC-Rv2 between two shims: 8 MiB echo intact (SHA-256)" [ "$(field ok "$OUT")" = 1 ]
check "SMC-Rv2 between two shims: the group is version 2" grep -q "SMC-Rv2 over verbs, first contact" <<<"$LOG"
check "SMC-Rv2: TCP carried only the handshake (< 600 bytes each way)" \
  [ "$(field tcp_bytes_received "$OUT")" -lt 600 -a "$(field tcp_bytes_sent "$OUT")" -lt 600 ]
v2_pair SMCLAB-UEID-1 SMCLAB-UEID-1 50 "--bytes 256K --conns 50"
check "SMC-Rv2: 50 concurrent connections intact" [ "$(field ok "$OUT")" = 50 ]
created=$(STATS_DIR=$V2_STATS stat_sum lgr_created) reused=$(STATS_DIR=$V2_STATS stat_sum lgr_reused)
check "SMC-Rv2: one group per side, 49 subsequent contacts each (CONFIRM RKEY in version 2): lgr_created=$created lgr_reused=$reused" \
  [ "$created" = 2 -a "$reused" = 98 ]
v2_pair OTHER-UEID SMCLAB-UEID-1 1 "--bytes 1M"
check "no UEID in common: SMC-Rv1, data intact" \
  bash -c '[ "$0" = 1 ] && grep -q "SMC-R over verbs" <<<"$1" && ! grep -q "SMC-Rv2" <<<"$1"' "$(field ok "$OUT")" "$LOG"

# One side without a usable device: the server's fabric is restricted to shm,
# so it declines the client's RoCE GID and both continue over TCP.
port=$(free_port); reset_stats
bg env SMCR_FABRIC=shm bash -c "$(declare -f under_smc); SMCR_PRELOAD=$SMCR_PRELOAD SMC_RUN=$SMC_RUN STATS_DIR=$STATS_DIR under_smc $ECHO_TOOL server --host $HOST --port $port --max-conns 1"
spid=$BG_PID; wait_port "$port"
OUT=$(under_smc timeout 120 "$ECHO_TOOL" client --host "$HOST" --port "$port" --bytes 1M)
timeout 30 tail --pid="$spid" -f /dev/null
log "$OUT"
check "server without a verbs fabric declines: data intact over TCP" [ "$(field ok "$OUT")" = 1 ]
check "the client counted the Decline" [ "$(stat_sum fallback.peer_declined)" = 1 ]

# The peer process is killed mid-stream: the survivor gets an error within
# seconds (the RC QP's retries run out), nothing hangs.
port=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --host "$HOST" --port "$port"
wait_port "$port"; spid=$(listener_pid "$port")
t0=$(date +%s)
bg under_smc timeout 120 "$ECHO_TOOL" client --host "$HOST" --port "$port" --bytes 2G
cpid=$BG_PID
sleep 3
kill -9 "$spid"
wait "$cpid"; rc=$?
t1=$(date +%s)
check "client of a killed server fails (rc=$rc) instead of hanging" [ "$rc" = 1 ]
check "within 60 s of the kill ($(( t1 - t0 - 3 )) s)" [ $(( t1 - t0 - 3 )) -lt 60 ]

# Application-side polling of the completion queue: a blocking reader takes
# its CDCs from the CQ itself, and the engine thread is not woken per message
# (VerbsLink::app_poll). Ping-pong with blocking reads on both ends, 14-byte
# messages; each process's counters in a directory of its own. TCG makes a
# round trip last about a millisecond, so the spins are widened to 20 ms
# (SMCR_SPIN_US; epoll_wait's SMCR_EPOLL_SPIN_US to its 10 ms bound) to
# cover it, as the defaults (40 and 50 us) cover a round trip on a real
# RoCE NIC; and Python between two reads, in TCG (and under ASan), can take
# longer than the engine's 1 ms of deferred re-arming: SMCR_REARM_DEFER_US
# widens that too (else the engine re-arms between two polls, and the next
# completion wakes it though the reader takes the message). The positive
# control first: with no spin at all every
# message wakes the engine, so the counter that must drop can see them.
PP_ROUNDS=400
cat >"$TEST_TMP/pp_server.py" <<'PY'
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(1)
c, _ = l.accept()
while True:
    m = c.recv(64)
    if not m: break
    c.sendall(m)
PY
cat >"$TEST_TMP/pp_server_epoll.py" <<'PY'
import selectors, socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(1)
c, _ = l.accept(); c.setblocking(False)
sel = getattr(selectors, sys.argv[3] if len(sys.argv) > 3 else 'EpollSelector')()
sel.register(c, selectors.EVENT_READ)
while True:
    sel.select()
    try:
        m = c.recv(64)
    except BlockingIOError:
        continue
    if not m: break
    c.setblocking(True); c.sendall(m); c.setblocking(False)
PY
cat >"$TEST_TMP/pp_client.py" <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
ok = 0
for i in range(int(sys.argv[3])):
    m = b'%014d' % i
    s.sendall(m)
    r = b''
    while len(r) < len(m): r += s.recv(64)
    ok += r == m
s.close(); print('ok=%d' % ok)
PY
pingpong() {  # pingpong SPIN_US [SERVER_SCRIPT [ITS_ARG]] -> OUT; CLI_STATS, SRV_STATS: each side's counters
  local port server=${2:-pp_server} arg=${3:-}; port=$(free_port)
  SRV_STATS=$TEST_TMP/pp-srv-$1-$server$arg CLI_STATS=$TEST_TMP/pp-cli-$1-$server$arg
  mkdir -p "$SRV_STATS" "$CLI_STATS"
  local epoll_spin=$(( $1 < 10000 ? $1 : 10000 ))  # SMCR_EPOLL_SPIN_US's bound
  export SMCR_REARM_DEFER_US=100000
  SMCR_SPIN_US=$1 SMCR_EPOLL_SPIN_US=$epoll_spin STATS_DIR=$SRV_STATS bg under_smc python3 "$TEST_TMP/$server.py" "$HOST" "$port" $arg
  local spid=$BG_PID
  wait_port "$port" || { log "ping-pong server did not start"; return 1; }
  OUT=$(SMCR_SPIN_US=$1 STATS_DIR=$CLI_STATS under_smc timeout 120 python3 "$TEST_TMP/pp_client.py" "$HOST" "$port" $PP_ROUNDS)
  timeout 30 tail --pid="$spid" -f /dev/null
  unset SMCR_REARM_DEFER_US
  log "ping-pong ($server $arg), SMCR_SPIN_US=$1: $OUT; client: link_wakeups=$(STATS_DIR=$CLI_STATS stat_sum link_wakeups) link_app_polled=$(STATS_DIR=$CLI_STATS stat_sum link_app_polled); server: link_wakeups=$(STATS_DIR=$SRV_STATS stat_sum link_wakeups) link_app_polled=$(STATS_DIR=$SRV_STATS stat_sum link_app_polled)"
}
pingpong 0
check "ping-pong without a spin: every reply intact" [ "$OUT" = "ok=$PP_ROUNDS" ]
# (The look before each sleep, which arms the CQ, may take a reply that
# came just then.)
check "without a spin the client's engine wakes for the replies (>= $((PP_ROUNDS / 2)) link wake-ups), few polled" \
  [ "$(STATS_DIR=$CLI_STATS stat_sum link_wakeups)" -ge $((PP_ROUNDS / 2)) -a "$(STATS_DIR=$CLI_STATS stat_sum link_app_polled)" -le $((PP_ROUNDS / 10)) ]
pingpong 20000
check "ping-pong with the CQ polled by the readers: every reply intact" [ "$OUT" = "ok=$PP_ROUNDS" ]
for side in CLI SRV; do
  dir=${side}_STATS
  check "$side: the reader took most messages from the CQ itself (link_app_polled >= $((PP_ROUNDS * 8 / 10)))" \
    [ "$(STATS_DIR=${!dir} stat_sum link_app_polled)" -ge $((PP_ROUNDS * 8 / 10)) ]
  check "$side: the engine woke for at most a tenth of the messages (link_wakeups <= $((PP_ROUNDS / 10)))" \
    [ "$(STATS_DIR=${!dir} stat_sum link_wakeups)" -le $((PP_ROUNDS / 10)) ]
done
# The server waiting in epoll_wait instead: the wait polls the link itself.
pingpong 20000 pp_server_epoll
check "ping-pong against an epoll server: every reply intact" [ "$OUT" = "ok=$PP_ROUNDS" ]
check "epoll server: its wait took most messages from the CQ (link_app_polled >= $((PP_ROUNDS * 8 / 10)))" \
  [ "$(STATS_DIR=$SRV_STATS stat_sum link_app_polled)" -ge $((PP_ROUNDS * 8 / 10)) ]
check "epoll server: the engine woke for at most a tenth of the messages (link_wakeups <= $((PP_ROUNDS / 10)))" \
  [ "$(STATS_DIR=$SRV_STATS stat_sum link_wakeups)" -le $((PP_ROUNDS / 10)) ]
# And in poll() and select() (the same spin: SMCR_EPOLL_SPIN_US).
for selector in PollSelector SelectSelector; do
  pingpong 20000 pp_server_epoll $selector
  check "ping-pong against a $selector server: every reply intact" [ "$OUT" = "ok=$PP_ROUNDS" ]
  check "$selector server: its wait took most messages from the CQ (link_app_polled >= $((PP_ROUNDS * 8 / 10)))" \
    [ "$(STATS_DIR=$SRV_STATS stat_sum link_app_polled)" -ge $((PP_ROUNDS * 8 / 10)) ]
  check "$selector server: the engine woke for at most a tenth of the messages (link_wakeups <= $((PP_ROUNDS / 10)))" \
    [ "$(STATS_DIR=$SRV_STATS stat_sum link_wakeups)" -le $((PP_ROUNDS / 10)) ]
done

# redis over rxe.
if [ "${SMCR_SANITIZE:-OFF}" = "ON" ]; then
  log "ASan build of the shim: the redis case needs the normal build"
elif command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
  port=$(free_port); reset_stats
  bg under_smc redis-server --bind "$HOST" --port "$port" --save "" --appendonly no --protected-mode no
  wait_port "$port"
  OUT=$(under_smc timeout 240 redis-benchmark -h "$HOST" -p "$port" -c 10 -n 2000 -t set,get -q 2>&1)
  log "redis-benchmark: $(echo "$OUT" | tr '\r' '\n' | grep -E 'requests per second' | tr '\n' ' ')"
  redis-cli -h "$HOST" -p "$port" shutdown nosave >/dev/null 2>&1
  sleep 1
  check "redis-benchmark over rxe completed SET and GET" bash -c "echo \"\$0\" | grep -q 'GET:.*requests per second'" "$OUT"
  check "redis-benchmark's connections were SMC-R over verbs" [ "$(stat_sum smc_active)" -ge 10 ]
else
  log "redis not installed: redis case not run"
fi

finish
