#!/usr/bin/env bash
# A server whose application calls accept() late: the client's connect()
# returns as over TCP (the CLC's server half runs in accept(), so the client
# handshake continues on a thread: clc_connect_async), the data arrives
# intact, and the connection is SMC-R, also when accept() comes after the
# CLC timeout (SMCR_CLC_TIMEOUT_MS=1000 here, accept() after 2.5 s).
# Blocking connect() and an asyncio client (non-blocking connect), each
# compared with plain TCP.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf
export SMCR_CLC_TIMEOUT_MS=1000

SCRIPT='
import asyncio, os, socket, sys, time
mode, port, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
N = 1 << 20
if mode == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port)); l.listen(8)
    open(sys.argv[4], "w").close()
    import select
    for _ in range(2):
        # The delay counts from the connection arriving: counted from
        # start-up, a client slow to start (ASan, CPU load) met an
        # accept() already waiting.
        select.select([l], [], [], 60)
        time.sleep(delay)
        c, _ = l.accept()
        data = b""
        while len(data) < N:
            b = c.recv(65536)
            if not b: break
            data += b
        c.sendall(data); c.close()
    sys.exit(0)
payload = os.urandom(N)
t = time.time(); s = socket.create_connection(("127.0.0.1", port)); blocking_s = time.time() - t
s.sendall(payload); got = b""
while len(got) < N:
    b = s.recv(65536)
    if not b: break
    got += b
s.close()
async def nb():
    t = time.time()
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(payload)
    await w.drain()
    data = await r.readexactly(N)
    w.close()
    return data == payload
ok2 = asyncio.run(nb())
print("blocking_connect_s=%.3f blocking_intact=%d asyncio_intact=%d" % (blocking_s, got == payload, ok2))
'

run() {  # run plain|smc -> OUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  rm -f "$TEST_TMP/ready"
  bg $wrap python3 -c "$SCRIPT" server "$port" 2.5 "$TEST_TMP/ready"
  local spid=$BG_PID
  wait_file "$TEST_TMP/ready" 10
  OUT=$($wrap timeout 60 python3 -c "$SCRIPT" client "$port" 2.5 2>&1)
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$1: $OUT"
}

run plain
check "plain TCP: both clients intact" grep -q "blocking_intact=1 asyncio_intact=1" <<<"$OUT"
check "plain TCP: connect() returned before the server's accept() ($(field blocking_connect_s "$OUT") s)" \
  awk -v s="$(field blocking_connect_s "$OUT")" 'BEGIN { exit !(s != "" && s < 1.0) }'
run smc
check "smc_run: both clients intact, the server accepting 2.5 s late (past the 1 s CLC timeout)" \
  grep -q "blocking_intact=1 asyncio_intact=1" <<<"$OUT"
check "smc_run: connect() returned before the server's accept() ($(field blocking_connect_s "$OUT") s)" \
  awk -v s="$(field blocking_connect_s "$OUT")" 'BEGIN { exit !(s != "" && s < 1.0) }'
check "smc_run: both connections SMC-R ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive), their CLC finished off connect() ($(stat_sum clc_connect_async))" \
  [ "$(stat_sum smc_active)" = 2 -a "$(stat_sum smc_passive)" = 2 -a "$(stat_sum clc_connect_async)" = 2 ]
check "smc_run: no fallback, no abort" [ "$(stat_sum fallback_total)" = 0 -a "$(stat_sum aborts)" = 0 ]
# Writes before the server's accept(): as over TCP, a client whose
# connect() returned may write at once. A non-blocking client's socket is
# writable at once (redis' MIGRATE waits for POLLOUT with its own timeout
# and then for the reply), its first bytes are taken whole; a blocking
# client writes, shuts down its sending side (at once, as over TCP) and
# closes before the server has accepted (its bytes still arrive, then EOF); a non-blocking writer of 200 KiB (more than is kept
# before the handshake ends) meets EAGAIN and POLLOUT again, intact.
EARLY='
import os, select, socket, sys, time
mode, port, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
BIG = 200 * 1024
if mode == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port)); l.listen(8)
    open(sys.argv[4], "w").close()
    select.select([l], [], [], 60)
    time.sleep(delay)
    out = []
    for i in range(3):
        c, _ = l.accept()
        data = b""
        while True:
            b = c.recv(65536)
            if not b: break
            data += b
            if i == 0 and len(data) >= 1000: break
        if i == 0: c.sendall(data)
        out.append(len(data))
        c.close()
    print("server_got=%s" % ",".join(map(str, out)))
    sys.exit(0)
req = bytes(range(250)) * 4
s = socket.socket(); s.setblocking(False)
t = time.time()
try: s.connect(("127.0.0.1", port))
except BlockingIOError: pass
_, w, _ = select.select([], [s], [], 0.3)
writable_s = time.time() - t
sent = s.send(req) if w else -1
c2 = socket.create_connection(("127.0.0.1", port)); c2.sendall(b"x" * 4000)
t = time.time(); c2.shutdown(socket.SHUT_WR); shut_s = time.time() - t; c2.close()
c3 = socket.socket(); c3.setblocking(False)
try: c3.connect(("127.0.0.1", port))
except BlockingIOError: pass
big = os.urandom(BIG); off = 0; eagain = 0
while off < BIG:
    select.select([], [c3], [], 10)
    try: off += c3.send(big[off:off + 65536])
    except BlockingIOError: eagain += 1
c3.shutdown(socket.SHUT_WR)
s.setblocking(True); got = b""
while len(got) < 1000:
    b = s.recv(65536)
    if not b: break
    got += b
s.close(); c3.close()
print("writable_s=%.3f first_send=%d echo_intact=%d eagain=%d shut_s=%.3f" % (writable_s, sent, got == req, eagain, shut_s))
'
early() {  # early plain|smc -> OUT SOUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  rm -f "$TEST_TMP/ready"
  $wrap python3 -c "$EARLY" server "$port" 1.5 "$TEST_TMP/ready" > "$TEST_TMP/early-server.out" 2>&1 &
  local spid=$!
  wait_file "$TEST_TMP/ready" 10
  OUT=$($wrap timeout 60 python3 -c "$EARLY" client "$port" 1.5 2>&1)
  timeout 30 tail --pid="$spid" -f /dev/null
  SOUT=$(cat "$TEST_TMP/early-server.out")
  log "early writes, $1: client: $OUT; server: $SOUT"
}
early plain
check "plain TCP, early writes: writable before accept(), the first send whole, the echo intact" \
  grep -q "first_send=1000 echo_intact=1" <<<"$OUT"
check "plain TCP, early writes: the server got 1000, 4000 (written and closed before accept()) and 204800 bytes" \
  grep -q "^server_got=1000,4000,204800$" <<<"$SOUT"
early smc
check "smc_run, early writes: writable before accept() ($(field writable_s "$OUT") s), the first send whole, the echo intact" \
  grep -q "first_send=1000 echo_intact=1" <<<"$OUT"
check "smc_run, early writes: shutdown(SHUT_WR) before accept() returned at once ($(field shut_s "$OUT") s)" \
  awk -v s="$(field shut_s "$OUT")" 'BEGIN { exit !(s != "" && s < 0.5) }'
check "smc_run, early writes: the server got 1000, 4000 (written and closed before accept()) and 204800 bytes" \
  grep -q "^server_got=1000,4000,204800$" <<<"$SOUT"
check "smc_run, early writes: all three SMC-R ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive), off connect() ($(stat_sum clc_connect_async)), bytes kept before the end ($(stat_sum clc_early_bytes)), no abort" \
  [ "$(stat_sum smc_active)" = 3 -a "$(stat_sum smc_passive)" = 3 -a "$(stat_sum clc_connect_async)" = 3 \
    -a "$(stat_sum clc_early_bytes)" -ge 5000 -a "$(stat_sum aborts)" = 0 ]
# Port probes (Test::Nginx's waitforsocket, load balancers' health checks):
# clients that connect and close at once, their handshakes abandoned at
# every stage, against a single-threaded server that select()s on its
# listener and then calls a blocking accept(). As over TCP the server must
# accept every connection (none dropped inside accept(), none holding it)
# and the real client after them is served at once.
PROBES='
import os, select, socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
NPROBES = 30
if mode == "server":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port)); l.listen(64)
    open(sys.argv[3], "w").close()
    socks, accepted, served = [l], 0, False
    while not served:
        r, _, _ = select.select(socks, [], [], 20)
        if not r: print("server: select timed out"); break
        for s in r:
            if s is l:
                time.sleep(0.003)  # a busy server: the probe has closed by now
                c, _ = l.accept(); accepted += 1; socks.append(c)
                continue
            try: b = s.recv(100)
            except OSError: b = b""
            if b:
                s.sendall(b); served = True
            socks.remove(s); s.close()
    print("accepted=%d" % accepted)
    sys.exit(0)
for i in range(NPROBES):
    s = socket.create_connection(("127.0.0.1", port))
    if i % 3: time.sleep(0.0005 * (i % 7))
    s.close()
t = time.time()
s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"hello"); got = s.recv(100); s.close()
print("real_client_s=%.3f intact=%d" % (time.time() - t, got == b"hello"))
'
probes() {  # probes plain|smc -> OUT (client) SOUT (server)
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  rm -f "$TEST_TMP/ready"
  $wrap python3 -c "$PROBES" server "$port" "$TEST_TMP/ready" > "$TEST_TMP/probe-server.out" 2>&1 &
  local spid=$!
  wait_file "$TEST_TMP/ready" 10
  # SMCR_CLC_CONNECT_WAIT_US=0: every client handshake off connect(), so
  # that each probe abandons its handshake at some stage.
  OUT=$(SMCR_CLC_CONNECT_WAIT_US=0 $wrap timeout 60 python3 -c "$PROBES" client "$port" 2>&1)
  timeout 30 tail --pid="$spid" -f /dev/null
  SOUT=$(cat "$TEST_TMP/probe-server.out")
  log "probes, $1: client: $OUT; server: $SOUT"
}
probes plain
check "plain TCP, port probes: the server accepted all 31 connections" grep -q "^accepted=31$" <<<"$SOUT"
check "plain TCP, port probes: the real client intact" grep -q "intact=1" <<<"$OUT"
probes smc
check "smc_run, port probes: the server accepted all 31 connections, none dropped in accept()" grep -q "^accepted=31$" <<<"$SOUT"
check "smc_run, port probes: the real client intact, served within 1 s ($(field real_client_s "$OUT") s)" \
  awk -v s="$(field real_client_s "$OUT")" -v ok="$(field intact "$OUT")" 'BEGIN { exit !(ok == 1 && s != "" && s < 1.0) }'
check "smc_run, port probes: the real client was SMC-R ($(stat_sum smc_active) active, $(stat_sum smc_passive) passive), no abort" \
  [ "$(stat_sum smc_active)" -ge 1 -a "$(stat_sum smc_passive)" -ge 1 -a "$(stat_sum aborts)" = 0 ]
finish
