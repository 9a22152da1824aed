#!/usr/bin/env bash
# Runs INSIDE a guest with two real rxe devices (scripts/guest/run.sh
# --devices 2: rxe0 on 10.9.0.1, rxe1 on 10.9.1.1): the second link of a
# link group (RFC 3.5.1.6: ADD LINK, ADD LINK CONTINUATION, CONFIRM LINK over
# the new link) and failover (RFC 4.6) when the first link's QP dies in the
# middle of a stream, checked by SHA-256 and by the devices' own counters.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
for d in rxe0 rxe1; do
  [ -d "/sys/class/infiniband/$d" ] || skip "no RDMA device $d (run inside scripts/guest/run.sh --devices 2)"
done
HOST=${SMCR_TEST_ADDR:-10.9.0.1}
export SMCR_FABRIC=verbs
MTU_BYTES=${SMCR_TEST_PATH_MTU:-1024}
# Lower bound of the payload a device sent (rxe has only packet counters).
sent_bytes() { echo $(( $(cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts") * MTU_BYTES )); }
sent_pkts() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts"; }

run_pair() {  # run_pair "server args" "client args" [client env...] -> OUT
  local port; port=$(free_port)
  reset_stats
  bg under_smc "$ECHO_TOOL" server --host "$HOST" --port "$port" $1
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; return 1; }
  OUT=$( (( $# > 2 )) && export "${@:3}"; under_smc timeout 300 "$ECHO_TOOL" client --host "$HOST" --port "$port" $2)
  local rc=$?
  timeout 60 tail --pid="$spid" -f /dev/null
  log "$OUT (rc=$rc)"
  return $rc
}

# 1. Two devices: every first contact sets up a symmetric second link.
a0=$(sent_pkts rxe0); b0=$(sent_pkts rxe1)
run_pair "--max-conns 1" "--bytes 8M"
a1=$(sent_pkts rxe0); b1=$(sent_pkts rxe1)
check "echo 8 MiB with two links intact (SHA-256)" [ "$(field ok "$OUT")" = 1 ]
check "both sides confirmed a second link (links_added=$(stat_sum links_added))" [ "$(stat_sum links_added)" = 2 ]
check "the second link's device carried its CONFIRM LINK exchange (rxe1 +$(( b1 - b0 )) packets)" \
  [ $(( b1 - b0 )) -ge 2 ]
check "data used the first link (rxe0 +$(( a1 - a0 )) packets)" [ $(( a1 - a0 )) -ge $(( 2 * 8 * 1024 )) ]
check "no failover without a failure" [ "$(stat_sum conn_failovers)" = 0 ]

# 2. Diagnostics show both links, on both devices.
port=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --host "$HOST" --port "$port"
wait_port "$port"; spid=$(listener_pid "$port")
bg under_smc python3 -c "
import socket, time
s = socket.create_connection(('$HOST', $port)); s.sendall(b'x'); assert s.recv(1) == b'x'; time.sleep(8)"
cpid=$BG_PID
for _ in $(seq 100); do
  DIAG=$("$SMCR_BUILD_DIR/tools/smcr_stat" --raw --pid "$spid" 2>/dev/null) && grep -q "state=ACTIVE" <<<"$DIAG" && break
  sleep 0.1
done
log "smcr_stat:"; echo "$DIAG"
check "smcr_stat: a group with two links up" grep -q "^group role=server .*links=2 links_up=2 " <<<"$DIAG"
check "smcr_stat: link 1 on rxe0" grep -q "^  link num=1 state=up .*device=rxe0 .*qp_state=RTS" <<<"$DIAG"
check "smcr_stat: link 2 on rxe1" grep -q "^  link num=2 state=up .*device=rxe1 .*qp_state=RTS" <<<"$DIAG"
# Both gone (and their stats written) before the next case counts anything.
kill_tree "$cpid"; kill "$spid" 2>/dev/null
timeout 30 tail --pid="$cpid" -f /dev/null; timeout 30 tail --pid="$spid" -f /dev/null

# 3. Failover mid-stream: the client's link 1 QP goes to the error state after
# 48 MiB of a 192 MiB echo; both directions must arrive intact over link 2.
a0=$(sent_pkts rxe0); b0=$(sent_bytes rxe1)
run_pair "--max-conns 1" "--bytes 192M" SMCR_TEST_TAKE_DOWN_LINK_AFTER=$(( 48 * 1024 * 1024 ))
a1=$(sent_pkts rxe0); b1=$(sent_bytes rxe1)
check "192 MiB echo across a failover intact (SHA-256)" [ "$(field ok "$OUT")" = 1 ]
check "both sides moved the connection to link 2 (conn_failovers=$(stat_sum conn_failovers))" \
  [ "$(stat_sum conn_failovers)" -ge 2 ]
check "both sides took link 1 down (link_failovers=$(stat_sum link_failovers))" [ "$(stat_sum link_failovers)" -ge 2 ]
check "no connection aborted" [ "$(stat_sum aborts)" = 0 ]
# After the failover at least the rest of both directions crossed rxe1.
check "rxe1 carried the rest of the stream (>= $(( b1 - b0 )) bytes)" \
  [ $(( b1 - b0 )) -ge $(( 2 * (192 - 48) * 1024 * 1024 )) ]
check "TCP carried only the handshake" [ "$(field tcp_bytes_received "$OUT")" -lt 300 ]

# 3b. The group stays usable after a failover: a second connection of the
# same client process (subsequent contact, RFC 3.5.2) runs over link 2.
port=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --host "$HOST" --port "$port" --max-conns 2
spid=$BG_PID; wait_port "$port"
OUT=$( export SMCR_TEST_TAKE_DOWN_LINK_AFTER=$(( 1024 * 1024 )); under_smc timeout 120 python3 -c "
import os, socket
def echo(n):
    s = socket.create_connection(('$HOST', $port))
    for _ in range(n):
        chunk = os.urandom(65536)
        s.sendall(chunk)
        got = b''
        while len(got) < len(chunk):
            b = s.recv(len(chunk) - len(got))
            assert b, 'EOF'
            got += b
        assert got == chunk, 'data differs'
    return s
a = echo(64)   # 4 MiB; link 1 goes down after 1 MiB
b = echo(16)   # a new connection on the same link group (a stays open: a
               # server ends its group with its last connection)
a.close(); b.close()
print('ok=1')
" 2>&1)
timeout 30 tail --pid="$spid" -f /dev/null
log "$OUT"
check "a connection across the failover, then a new one on the group: data intact" [ "$(field ok "$OUT")" = 1 ]
check "the second connection reused the group (lgr_reused=$(stat_sum lgr_reused))" [ "$(stat_sum lgr_reused)" = 2 ]
check "and the first one moved (conn_failovers=$(stat_sum conn_failovers))" [ "$(stat_sum conn_failovers)" -ge 2 ]

# 4. The operator pins one device (SMCR_IB_DEVICE): the server's ADD LINK can
# only offer the same device, which the client rejects (RFC 3.5.1.6.2,
# reason 1: it would be a parallel link); the group runs on one link.
run_pair "--max-conns 1" "--bytes 1M" SMCR_IB_DEVICE=rxe0
check "pinned client: echo intact" [ "$(field ok "$OUT")" = 1 ]
check "pinned client: no second link (links_added=$(stat_sum links_added))" [ "$(stat_sum links_added)" = 0 ]
check "pinned client: ADD LINK rejected (add_link_rejected=$(stat_sum add_link_rejected))" \
  [ "$(stat_sum add_link_rejected)" -ge 1 ]

# 5. SMCR_MAX_LINKS=1 on the server: no ADD LINK at all, and the client does
# not wait for one (CONFIRM LINK says max links 1).
port=$(free_port); reset_stats
bg env SMCR_MAX_LINKS=1 bash -c "$(declare -f under_smc); SMCR_PRELOAD=$SMCR_PRELOAD SMC_RUN=$SMC_RUN STATS_DIR=$STATS_DIR under_smc $ECHO_TOOL server --host $HOST --port $port --max-conns 1"
spid=$BG_PID; wait_port "$port"
t0=$(date +%s%N)
OUT=$(under_smc timeout 120 "$ECHO_TOOL" client --host "$HOST" --port "$port" --bytes 1M)
t1=$(date +%s%N)
timeout 30 tail --pid="$spid" -f /dev/null
log "$OUT"
check "max links 1: echo intact" [ "$(field ok "$OUT")" = 1 ]
check "max links 1: no ADD LINK exchanged" [ "$(stat_sum links_added)" = 0 -a "$(stat_sum add_link_rejected)" = 0 ]

# 6. A real path failure, no test hook: rxe0's netdev goes down in the
# middle of a stream. rxe reports IBV_EVENT_PORT_ERR; both engines take
# their link 1 down at once and the stream finishes over link 2 (rxe1).
# (Last: rxe0 stays down.)
port=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --host "$HOST" --port "$port" --max-conns 1
spid=$BG_PID; wait_port "$port"
b0=$(sent_bytes rxe1)
bg bash -c "$(declare -f under_smc); SMCR_PRELOAD=$SMCR_PRELOAD SMC_RUN=$SMC_RUN STATS_DIR=$STATS_DIR \
  under_smc timeout 300 $ECHO_TOOL client --host $HOST --port $port --bytes 128M > $TEST_TMP/portdown.out"
cpid=$BG_PID
# Down once the stream is under way (rxe0 has carried a few MiB).
a0=$(sent_pkts rxe0)
for _ in $(seq 300); do [ $(( $(sent_pkts rxe0) - a0 )) -gt 8192 ] && break; sleep 0.1; done
ip link set dummy0 down
log "dummy0 down after rxe0 sent $(( $(sent_pkts rxe0) - a0 )) packets: $(cat /sys/class/infiniband/rxe0/ports/1/state)"
timeout 300 tail --pid="$cpid" -f /dev/null; timeout 60 tail --pid="$spid" -f /dev/null
OUT=$(cat "$TEST_TMP/portdown.out"); b1=$(sent_bytes rxe1)
log "$OUT"
check "port down mid-stream: 128 MiB echo intact (SHA-256)" [ "$(field ok "$OUT")" = 1 ]
check "port down: both sides moved to link 2 (conn_failovers=$(stat_sum conn_failovers))" \
  [ "$(stat_sum conn_failovers)" -ge 2 ]
check "port down: rxe1 carried the rest (>= $(( b1 - b0 )) bytes)" [ $(( b1 - b0 )) -ge $(( 16 * 1024 * 1024 )) ]
check "port down: no connection aborted" [ "$(stat_sum aborts)" = 0 ]

finish
