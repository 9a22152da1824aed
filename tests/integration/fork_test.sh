#!/usr/bin/env bash
# fork() with live SMC-R connections (README "fork and exec"): a connection
# belongs to the process that made it.
#  - a child that only closes what it inherited and exits (a BGSAVE-style
#    child, or one about to exec) leaves the parent's connection intact;
#  - a child's read/write on an inherited SMC-R fd fails with EOPNOTSUPP
#    instead of corrupting the parent's stream;
#  - a child makes SMC-R connections of its own (new engine, new groups);
#  - the parent's stream stays intact throughout (compared byte for byte).
# Handing a connection to a child (core/handoff.h): accept-then-fork servers
# whose parent closes its copy -- Python's socketserver.ForkingTCPServer, a
# parent that closes only after its child started reading, and inetd-style
# dup2 onto 0/1 + exec of cat -- serve SMC-R clients whole (SHA-256), with
# the server counting one handover per connection and no aborts.
# The same scripts over plain TCP are the positive control for the data checks.
source "$SMCR_SOURCE_DIR/tests/lib/common.sh"
require_bpf

SCRIPT='
import errno, os, socket, sys
host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def echo(s, n, seed):
    data = bytes((i * 131 + seed) & 255 for i in range(65536))
    for _ in range(n):
        s.sendall(data)
        got = b""
        while len(got) < len(data):
            b = s.recv(len(data) - len(got))
            if not b: raise SystemExit("EOF")
            got += b
        if got != data: raise SystemExit("data differs")
s = socket.create_connection((host, port))
echo(s, 16, 1)
pid = os.fork()
if pid == 0:
    result = "child_io=tcp"
    if mode == "smc":
        try:
            s.send(b"x")
            result = "child_io=allowed"
        except OSError as e:
            result = "child_io=" + ("eopnotsupp" if e.errno == errno.EOPNOTSUPP else errno.errorcode.get(e.errno, str(e.errno)))
    own = socket.create_connection((host, port))
    echo(own, 8, 2)
    own.close()
    s.close()
    print(result, "child_own_conn=ok", flush=True)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
echo(s, 16, 3)
s.close()
print("parent_after_child=ok child_status=%d" % status, flush=True)
'

run() {  # run plain|smc -> OUT
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  bg $wrap "$ECHO_TOOL" server --port "$port" --max-conns 2
  local spid=$BG_PID
  wait_port "$port" || { log "server did not start"; return 1; }
  OUT=$($wrap timeout 120 python3 -c "$SCRIPT" 127.0.0.1 "$port" "$1" 2>&1)
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$1: $(tr '\n' ' ' <<<"$OUT")"
}

# exec with an SMC-R fd left open: the new program (no shim state) must see
# end-of-file, not hang and not garbage; the server sees the connection end.
EXEC_SCRIPT='
import os, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(b"ping"); assert s.recv(4) == b"ping"
fd = s.detach()
os.set_inheritable(fd, True)
os.execv(sys.executable, [sys.executable, "-c",
  "import os,select,sys; fd=int(sys.argv[1]); r,_,_=select.select([fd],[],[],10); print(\"exec_read=%r\" % (os.read(fd, 16) if r else \"timeout\"))",
  str(fd)])
'

run plain
check "plain TCP: parent and child streams intact" \
  bash -c 'grep -q "child_own_conn=ok" <<<"$0" && grep -q "parent_after_child=ok child_status=0" <<<"$0"' "$OUT"

run smc
check "SMC-R: the child's own new connection works" grep -q "child_own_conn=ok" <<<"$OUT"
check "SMC-R: the child's I/O on the parent's connection fails with EOPNOTSUPP" grep -q "child_io=eopnotsupp" <<<"$OUT"
check "SMC-R: the parent's stream is intact after the child closed its copy and exited" \
  grep -q "parent_after_child=ok child_status=0" <<<"$OUT"
check "SMC-R: all three connections were SMC-R (parent's, child's, and the server side)" \
  [ "$(stat_sum smc_active)" = 2 -a "$(stat_sum smc_passive)" = 2 ]
check "SMC-R: no connection was aborted" [ "$(stat_sum aborts)" = 0 ]
port=$(free_port); reset_stats
bg under_smc "$ECHO_TOOL" server --port "$port" --max-conns 1
spid=$BG_PID; wait_port "$port"
OUT=$(under_smc timeout 60 python3 -c "$EXEC_SCRIPT" 127.0.0.1 "$port" 2>&1)
timeout 30 tail --pid="$spid" -f /dev/null; srv_rc=$?
log "exec: $OUT"
check "exec: the SMC-R fd reads end-of-file in the new program" grep -q "exec_read=b''" <<<"$OUT"
check "exec: the server's side of the connection ended (server exited)" [ "$srv_rc" = 0 ]
# --- handing connections to forked children ---------------------------------
SERVERS='
import os, signal, socket, socketserver, sys, time
kind, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
if kind == "forkingmixin":
    class Echo(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                b = self.request.recv(65536)
                if not b: break
                self.request.sendall(b)
            self.request.shutdown(socket.SHUT_WR)
    class Server(socketserver.ForkingTCPServer):
        allow_reuse_address = True
    srv = Server(("127.0.0.1", port), Echo)
    for _ in range(n): srv.handle_request()
    srv.server_close()
    sys.exit(0)
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", port)); l.listen(16)
for _ in range(n):
    c, _ = l.accept()
    if os.fork() == 0:
        l.close()
        os.dup2(c.fileno(), 0); os.dup2(c.fileno(), 1); c.close()
        os.execvp("cat", ["cat"])   # inetd-style: the program knows nothing of sockets
    if kind == "late_close": time.sleep(0.3)   # the child is already using it
    c.close()
time.sleep(0.5)
'
CLIENT='
import hashlib, os, socket, sys, threading
port, size = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
data = os.urandom(size)
def writer():
    s.sendall(data); s.shutdown(socket.SHUT_WR)   # request, then half-close
t = threading.Thread(target=writer); t.start()
got = bytearray()
while True:
    b = s.recv(1 << 20)
    if not b: break
    got += b
t.join()
print("echo=%s" % ("ok" if hashlib.sha256(got).digest() == hashlib.sha256(data).digest() else "BAD(%d/%d)" % (len(got), size)))
'
SIZES="1 100000 3000000 20000000"
handoff_run() {  # handoff_run plain|smc KIND -> HOUT (one line per client)
  local wrap=under_smc; [ "$1" = plain ] && wrap=env
  local port; port=$(free_port)
  reset_stats
  bg $wrap python3 -c "$SERVERS" "$2" "$port" 4
  local spid=$BG_PID
  wait_port "$port" || { log "$2 server did not start"; HOUT=; return 1; }
  HOUT=$(for size in $SIZES; do $wrap timeout 60 python3 -c "$CLIENT" "$port" "$size" 2>&1 | tail -1; done)
  timeout 30 tail --pid="$spid" -f /dev/null
  log "$1 $2: $(tr '\n' ' ' <<<"$HOUT")"
}
for kind in forkingmixin late_close inetd_exec; do
  handoff_run plain "$kind"
  check "plain TCP $kind: every echo intact" [ "$(grep -c '^echo=ok$' <<<"$HOUT")" = 4 ]
  handoff_run smc "$kind"
  check "SMC-R $kind: every echo intact (1 B .. 20 MB, with half-close)" [ "$(grep -c '^echo=ok$' <<<"$HOUT")" = 4 ]
  check "SMC-R $kind: all 4 connections were SMC-R at both ends" \
    [ "$(stat_sum smc_active)" = 4 -a "$(stat_sum smc_passive)" = 4 ]
  check "SMC-R $kind: the server handed each connection to its child ($(stat_sum handovers))" [ "$(stat_sum handovers)" = 4 ]
  check "SMC-R $kind: no connection was aborted" [ "$(stat_sum aborts)" = 0 ]
done
finish
