#!/usr/bin/env bash
# Socket calls beyond read/write on SMC-R fds, each compared with plain TCP:
# glibc's fortified __read_chk/__recv_chk/__recvfrom_chk, sendfile, splice,
# sendmmsg/recvmmsg, MSG_PEEK|MSG_WAITALL, MSG_WAITALL, FIONREAD; socket
# timeouts set before the connection existed; urgent data; readiness.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
TOOL="$SMCR_BUILD_DIR/tests/integration/semantics_tool"

# The instrument: the tool really calls the fortified entry points.
for sym in __read_chk __recv_chk __recvfrom_chk fcntl64 sendfile64 splice sendmmsg recvmmsg; do
  check "semantics_tool calls $sym" bash -c "nm -D '$TOOL' | grep -qw '$sym'"
done

run_case() {  # run_case plain|smc -> OUT
  local wrap=under_smc
  [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  bg $wrap "$ECHO_TOOL" server --port "$port" --max-conns 1
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; return 1; }
  OUT=$($wrap timeout 120 "$TOOL" --port "$port")
  local rc=$?
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$1: $(echo "$OUT" | tr '\n' ' ') (rc=$rc)"
}

run_case plain
PLAIN=$OUT
check "over plain TCP every case passes" [ "$(field fails "$PLAIN")" = 0 ]
check "the plain run's payload went over TCP" [ "$(field tcp_bytes_received "$PLAIN")" -gt 1000000 ]

run_case smc
for name in $(sed -n 's/^case=\([^ ]*\) .*/\1/p' <<<"$PLAIN"); do
  check "SMC-R: $name" grep -q "^case=$name ok=1" <<<"$OUT"
done
check "SMC-R: both ends were SMC-R" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
check "SMC-R: TCP carried only the handshake" [ "$(field tcp_bytes_received "$OUT")" -lt 200 ]
# Urgent data between two processes (the echo server reads normally, so it
# skips the urgent byte as TCP does, and echoes only the stream around it):
# the same output over plain TCP and over SMC-R, where only the CDC's U flag
# can tell the server's shim which byte to skip.
OOB='
import errno, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def err(f):
    try: f(); return "none"
    except OSError as e: return errno.errorcode.get(e.errno, str(e.errno))
s.sendall(b"before")
recv_oob = err(lambda: s.recv(1, socket.MSG_OOB))
send_oob = err(lambda: s.send(b"!", socket.MSG_OOB))
s.sendall(b"after")
got = b""
while len(got) < 11:
    b = s.recv(64)
    if not b: break
    got += b
print("recv_oob=%s send_oob=%s stream=%s" % (recv_oob, send_oob, got.decode(errors="replace")))
'
oob_run() {  # oob_run plain|smc -> OOBOUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port); reset_stats
  bg $wrap "$ECHO_TOOL" server --port "$port" --max-conns 1
  local spid=$BG_PID; wait_port "$port"
  OOBOUT=$($wrap timeout 30 python3 -c "$OOB" "$port" 2>&1)
  timeout 30 tail --pid="$spid" -f /dev/null
  log "MSG_OOB $1: $OOBOUT"
}
oob_run plain
check "plain TCP: recv(MSG_OOB) EINVAL before any, send(MSG_OOB) works, the echo skips the urgent byte" \
  test "$OOBOUT" = "recv_oob=EINVAL send_oob=none stream=beforeafter"
PLAIN_OOB=$OOBOUT
oob_run smc
check "SMC-R: urgent data behaves as over TCP ($OOBOUT)" test "$OOBOUT" = "$PLAIN_OOB"
check "SMC-R: that connection was SMC-R" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]

# SO_RCVTIMEO / SO_SNDTIMEO set before connect() (the client) or on the
# listener (the accepted socket inherits them): a recv() with nothing to
# read and a send() into a full window give EAGAIN after the timeout, as
# over TCP (under smc_run the connection used to ignore them and block).
TIMEO='
import errno, socket, struct, sys, threading, time
tv = struct.pack("ll", 0, 200000)
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.socket()
c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv); c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
acc = []
t = threading.Thread(target=lambda: acc.append(srv.accept()[0])); t.start()  # accepting: not an own-listener fallback
c.connect(srv.getsockname()); t.join(); a = acc[0]
def timed(f):
    t = time.time()
    try: f(); r = "none"
    except OSError as e: r = errno.errorcode.get(e.errno, str(e.errno))
    return r + ("" if 0.15 < time.time() - t < 5 else "(after %.2f s)" % (time.time() - t))
def fill():
    while True: c.send(b"x" * 65536)
print("client_recv=%s server_recv=%s client_send=%s" % (timed(lambda: c.recv(10)), timed(lambda: a.recv(10)), timed(fill)))
'
timeo_run() {  # timeo_run plain|smc -> TIMEOUT_OUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  reset_stats
  TIMEOUT_OUT=$($wrap timeout 30 python3 -c "$TIMEO" 2>&1) || TIMEOUT_OUT="$TIMEOUT_OUT (rc=$?: hung or failed)"
  log "SO_RCVTIMEO/SO_SNDTIMEO set before connect() and on the listener, $1: $TIMEOUT_OUT"
}
timeo_run plain
check "plain TCP: recv() both ends and send() into a full window time out with EAGAIN" \
  test "$TIMEOUT_OUT" = "client_recv=EAGAIN server_recv=EAGAIN client_send=EAGAIN"
PLAIN_TIMEO=$TIMEOUT_OUT
timeo_run smc
check "SMC-R: the timeouts set before the connection existed hold ($TIMEOUT_OUT)" test "$TIMEOUT_OUT" = "$PLAIN_TIMEO"
check "SMC-R: that connection was SMC-R" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]

# A non-blocking connect() finished as Perl's IO::Socket and many event
# loops finish it: select() for writability, then connect() again, which
# must say 0 (then EISCONN), never EALREADY. The server accepts late, so the
# client's CLC runs on a thread and ends while the application may already
# be waking from its select() (nginx-tests' memcached upstreams failed so).
NBSERVER='
import socket, sys, time, threading
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1]))); ls.listen(64)
def serve(c):
    c.sendall(c.recv(16)); c.close()
for i in range(int(sys.argv[2])):
    time.sleep(0.005)
    threading.Thread(target=serve, args=(ls.accept()[0],)).start()
'
NBCLIENT='
import socket, sys, select, errno, collections
port, n = int(sys.argv[1]), int(sys.argv[2])
seen = collections.Counter()
name = lambda e: errno.errorcode.get(e, str(e)) if e else "0"
for i in range(n):
    s = socket.socket(); s.setblocking(False)
    first = s.connect_ex(("127.0.0.1", port))
    select.select([], [s], [s], 10)
    second = s.connect_ex(("127.0.0.1", port))
    third = s.connect_ex(("127.0.0.1", port))
    s.setblocking(True); s.sendall(b"ping"); echoed = s.recv(16) == b"ping"; s.close()
    seen["%s,%s,%s,echoed=%s" % (name(first), name(second), name(third), echoed)] += 1
print(" ".join("%s:%d" % kv for kv in sorted(seen.items())))
'
nb_run() {  # nb_run plain|smc -> NBOUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port); reset_stats
  bg $wrap python3 -c "$NBSERVER" "$port" 200
  local spid=$BG_PID; wait_port "$port"
  NBOUT=$($wrap timeout 60 python3 -c "$NBCLIENT" "$port" 200 2>&1)
  timeout 30 tail --pid="$spid" -f /dev/null
  log "non-blocking connect $1: $NBOUT"
}
nb_run plain
check "plain TCP: select() then connect() says 0, then EISCONN ($NBOUT)" \
  test "$NBOUT" = "EINPROGRESS,0,EISCONN,echoed=True:200"
nb_run smc
check "SMC-R: select() then connect() says 0, then EISCONN, never EALREADY ($NBOUT)" \
  test "$NBOUT" = "EINPROGRESS,0,EISCONN,echoed=True:200"
check "SMC-R: those connections were SMC-R ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive, $(stat_sum clc_threaded) client CLCs on threads)" \
  [ "$(stat_sum smc_active)" = 200 -a "$(stat_sum smc_passive)" = 200 -a "$(stat_sum clc_threaded)" -ge 1 ]

# select() said writable, so a non-blocking send() writes something: Perl's
# IO::Select loops (nginx-tests' proxy_upgrade.t client) close the connection
# on that EAGAIN. The window fills over and over (a reader of 5000 bytes at
# a time that pauses each MiB); the peer's reader reopening it races with
# the writer's next fill, so the machine is kept busy meanwhile (the race
# needed it to show).
WRSERVER='
import socket, sys, time
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1]))); ls.listen(1)
c, _ = ls.accept(); got = 0
while True:
    if got % (1 << 20) < 5000: time.sleep(0.02)  # the writer fills any buffer meanwhile
    b = c.recv(5000)
    if not b: break
    got += len(b)
print("server_got=%d" % got)
'
WRCLIENT='
import socket, sys, select
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.setblocking(False)
msg = b"x" * 49152; total = int(sys.argv[2]); sent = eagain = unwritable = 0
while sent < total:
    if not select.select([], [s], [], 0)[1]:
        unwritable += 1
        if not select.select([], [s], [], 10)[1]: print("select_timeout"); break
    try:
        sent += s.send(msg)
    except BlockingIOError:
        eagain += 1
s.close()
print("sent=%d eagain_after_writable=%d times_unwritable=%d" % (sent, eagain, unwritable))
'
wr_run() {  # wr_run plain|smc -> WROUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port); reset_stats
  local busy=() k
  for k in 1 2; do timeout 60 sh -c 'while :; do :; done' & busy+=($!); done
  bg $wrap python3 -c "$WRSERVER" "$port"
  local spid=$BG_PID; wait_port "$port"
  WROUT=$($wrap timeout 60 python3 -c "$WRCLIENT" "$port" $((16 << 20)) 2>&1)
  timeout 30 tail --pid="$spid" -f /dev/null
  kill "${busy[@]}" 2>/dev/null; wait "${busy[@]}" 2>/dev/null
  log "select-writable then send $1: $WROUT"
}
wr_run plain
check "plain TCP: the window filled ($WROUT) and no send() after select() said writable failed" \
  [ "$(field times_unwritable "$WROUT")" -ge 1 -a "$(field eagain_after_writable "$WROUT")" = 0 ]
wr_run smc
check "SMC-R: the window filled ($WROUT) and no send() after select() said writable failed" \
  [ "$(field times_unwritable "$WROUT")" -ge 1 -a "$(field eagain_after_writable "$WROUT")" = 0 ]
check "SMC-R: that connection was SMC-R" [ "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]

# Readiness, signals and errors, peer in the same process (readiness_tool).
R="$SMCR_BUILD_DIR/tests/integration/readiness_tool"
reset_stats
RPLAIN=$(timeout 120 "$R" 2>&1)
log "readiness plain: $(tr '\n' ' ' <<<"$RPLAIN")"
check "readiness over plain TCP: every case passes" [ "$(field fails "$RPLAIN")" = 0 ]
RSMC=$(under_smc timeout 120 "$R" 2>&1)
log "readiness smc: $(tr '\n' ' ' <<<"$RSMC")"
for name in $(sed -n 's/^case=\([^ ]*\) .*/\1/p' <<<"$RPLAIN"); do
  check "SMC-R: $name" grep -q "^case=$name ok=1" <<<"$RSMC"
done
check "readiness: its connections were SMC-R ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive)" \
  [ "$(stat_sum smc_active)" -ge 20 -a "$(stat_sum smc_active)" = "$(stat_sum smc_passive)" ]
# The epoll ping-pong (and the parked cases) took events from memory: the
# connections were really left unarmed (preload/epoll.h). The count depends
# on timing; at least some must be there.
check "readiness: epoll events found in memory ($(stat_sum epoll_from_memory)) >= 10" \
  [ "$(stat_sum epoll_from_memory)" -ge 10 ]

# Readiness whenever the interest was registered (readiness_matrix): before
# connect() (blocking, non-blocking, in a nested set), after it, on the
# accepted socket; for the peer's data, writability after a full window, the
# peer's shutdown and its abortive close; level, edge, one-shot and poll().
# Every cell must report what plain TCP reports, bit for bit.
M="$SMCR_BUILD_DIR/tests/integration/readiness_matrix"
MPLAIN=$(timeout 120 "$M" 2>&1)
check "readiness matrix over plain TCP: every cell ran ($(field cells "$MPLAIN") cells, no error)" \
  bash -c '[ "$(grep -c "^cell=.* first=" <<<"$1")" -ge 90 ] && ! grep -q "error=" <<<"$1"' _ "$MPLAIN"
# The instrument sees what it must: the peer's data, its shutdown and its
# reset, with EPOLLERR (0x8) on the reset.
check "readiness matrix over plain TCP: EPOLLIN, EPOLLRDHUP, EPOLLHUP|EPOLLERR seen" \
  bash -c 'grep -q "^cell=after_connect/in/lt first=0x5 " <<<"$1" && grep -q "^cell=after_connect/rdhup/et first=0x2005 again=0x0" <<<"$1" && grep -q "^cell=accepted/hup/poll first=0x201d " <<<"$1"' _ "$MPLAIN"
reset_stats
MSMC=$(under_smc timeout 120 "$M" 2>&1)
while read -r line; do
  cell=${line%% *}
  got=$(grep -m1 "^$cell " <<<"$MSMC")
  check "readiness matrix, SMC-R as TCP: ${cell#cell=} (${line#* }; SMC-R: ${got#* })" grep -qxF "$line" <<<"$MSMC"
done < <(grep "^cell=" <<<"$MPLAIN")
check "readiness matrix: every cell was SMC-R ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive)" \
  [ "$(stat_sum smc_active)" = "$(field cells "$MPLAIN")" -a "$(stat_sum smc_passive)" = "$(field cells "$MPLAIN")" ]
# The after_del_add cells (level and edge) took their DEL, ADD and MOD in
# memory: their registrations were virtual (preload/epoll.cc, virtual_ctl),
# and still reported what TCP does (above). Ten cells, three calls each.
check "readiness matrix: epoll_ctl answered in memory ($(stat_sum epoll_ctl_in_memory)) >= 20" \
  [ "$(stat_sum epoll_ctl_in_memory)" -ge 20 ]

# accept() returns once the server's Accept is sent (preload/takeover.h): an
# accepted socket used before the client's Confirm has been read must behave
# as over TCP. The client (same process) sends its Confirm 300 ms late.
LATE=epoll_et,close_right_after_accept,dup2_over_fresh_accept,fresh_accept_nonblocking_readiness,fresh_accept_used_at_once
reset_stats
RLATE=$(SMCR_TEST_CONFIRM_DELAY_MS=300 READINESS_ONLY=$LATE under_smc timeout 60 "$R" 2>&1)
log "readiness, Confirm 300 ms late: $(tr '\n' ' ' <<<"$RLATE")"
for name in ${LATE//,/ }; do
  check "SMC-R, Confirm 300 ms late: $name" grep -q "^case=$name ok=1" <<<"$RLATE"
done
# A loaded machine (the ASan tree in CI) can be slow enough that the client's
# Proposal misses the CLC spin: that accept() hands its whole handshake to a
# thread (clc_threaded) and also returns before the Confirm.
check "those accept()s returned before the Confirm ($(stat_sum confirm_deferred) deferred, $(stat_sum clc_threaded) threaded, $(stat_sum confirm_waits) calls waited for one)" \
  [ $(( $(stat_sum confirm_deferred) + $(stat_sum clc_threaded) )) -ge 4 -a "$(stat_sum confirm_waits)" -ge 1 -a "$(stat_sum smc_passive)" = 5 ]
# The same under CPU load (two busy loops on the two CPUs): the client's
# Proposal misses the server's CLC spin and accept() returns with the
# handshake on a thread. The first non-blocking send on it failed with
# EAGAIN, which a fresh TCP socket never gives (29 runs in 30), and the
# SO_SNDBUF set meanwhile was lost when the connection was installed.
busy_pids=()
for _ in 1 2; do (end=$((SECONDS + 30)); while [ $SECONDS -lt $end ]; do :; done) & busy_pids+=($!); done
loaded_ok=0 loaded_late=0
for _ in $(seq 1 10); do
  out=$(READINESS_ONLY=buffer_sizes under_smc timeout 30 "$R" 2>&1)
  if grep -q "^case=buffer_sizes ok=1" <<<"$out"; then
    loaded_ok=$((loaded_ok + 1))
  else
    log "under CPU load: $(grep '^buffer_sizes:' <<<"$out" | head -1)"
    # The documented bound (README): a non-blocking write waits up to 20 ms
    # for a handshake still running, then EAGAIN. Only that, with the sizes
    # right, is a handshake that outlasted the bound.
    grep -q "^buffer_sizes: rcvbuf a=65536 b=131072 sndbuf b=32768 filled=0 .* eagain=1 read=1" <<<"$out" &&
      loaded_late=$((loaded_late + 1))
  fi
done
kill "${busy_pids[@]}" 2>/dev/null; wait "${busy_pids[@]}" 2>/dev/null
# At ASan's speed under two busy loops a handshake can outlast those 20 ms
# (1 run in 10 in CI, 2 in 10 locally): there every run must be TCP's or
# that, each logged, and at least half TCP's. In the normal build too, once
# (CI, with another test running beside the two busy loops: 9 of 10 TCP's,
# 1 late); the regression this guards against failed 29 runs in 30.
allowed_late=1; [ "${SMCR_SANITIZE:-OFF}" = ON ] && allowed_late=5
check "SMC-R under CPU load: buffer_sizes as over TCP in every run ($loaded_ok of 10; $loaded_late a handshake past the 20 ms bound, $allowed_late allowed)" \
  [ "$loaded_ok" = 10 -o \( $((loaded_ok + loaded_late)) = 10 -a "$loaded_late" -le "$allowed_late" \) ]
# A client whose Confirm comes after the server's CLC deadline (a hostile or
# stuck peer): accept() returned at once, the server's read fails with
# ECONNRESET at the deadline, and the client's connection ends too.
reset_stats
RHOST=$(SMCR_TEST_CONFIRM_DELAY_MS=2500 SMCR_CLC_TIMEOUT_MS=1000 READINESS_LATE_CONFIRM=1 under_smc timeout 60 "$R" 2>&1)
log "readiness, Confirm too late: $(tr '\n' ' ' <<<"$RHOST")"
check "Confirm after the server's deadline: accept() at once, ECONNRESET at the deadline, the client ends too" \
  grep -q "^case=late_confirm_resets ok=1" <<<"$RHOST"
check "... counted as a CLC timeout" [ "$(stat_sum fallback.timeout)" = 1 ]
# Descriptor numbers: the application's next socket after an SMC-R
# connection (both ends in this process, data moved both ways) gets the
# number it gets over TCP. The shim's own descriptors (the TCP socket, the
# readiness pair, the eBPF maps, the RMBs' memfds, the peer's doorbell) sit
# in the hidden range: the two map descriptors once took 4 and 7 here, and
# wrk, whose event table is sized by its connection count, reported socket
# errors. Compared as sets: which of connect() and the thread's accept()
# takes the lower number is a race under TCP too (a loaded machine schedules
# the thread late). Ten round trips first: the ends' doorbells, received as
# descriptors, change hands within the first few.
FDNUM='
import os, socket, threading
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4)
got = []
def serve():  # a thread in accept(): a connection to our own listener may be SMC-R
    s, _ = l.accept()
    for _ in range(10): s.sendall(s.recv(1))
    got.append(s)
t = threading.Thread(target=serve); t.start()
c = socket.create_connection(l.getsockname())
for _ in range(10): c.sendall(b"x"); c.recv(1)
t.join()
n = socket.socket()
print("numbers", *sorted([l.fileno(), c.fileno(), got[0].fileno(), n.fileno(), os.open("/dev/null", os.O_RDONLY)]))
'
reset_stats
FD_TCP=$(python3 -c "$FDNUM" 2>&1)
FD_SMC=$(under_smc python3 -c "$FDNUM" 2>&1)
log "descriptor numbers: TCP '$FD_TCP', SMC-R '$FD_SMC'"
check "the application's descriptor numbers are TCP's ($FD_SMC), on a connection that was SMC-R at both ends" \
  [ -n "$FD_TCP" -a "$FD_SMC" = "$FD_TCP" -a "$(stat_sum smc_active)" = 1 -a "$(stat_sum smc_passive)" = 1 ]
finish
