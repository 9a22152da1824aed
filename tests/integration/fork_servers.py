# Servers that hand each accepted connection to a forked child (used by
# tests/integration/fork_test.sh and scripts/fork-stress.sh).
#   fork_servers.py KIND PORT N [READY]
# KIND: forkingmixin (socketserver.ForkingTCPServer), late_close, exit_early,
# inetd_exec (dup2 onto 0/1 + exec cat), exec_wait (the same, the parent
# closing its copy only once the child's exec succeeded, as git's
# run-command and CPython's fork path do), exec_hold (the same, the parent
# holding its copy until the program ends and the child running it as
# nobody, as CGIHTTPRequestHandler does), read_then_exec, killed,
# inetd_killed, echo_child. Serves N connections, then waits for its children.
import os, select, signal, socket, socketserver, sys, time
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
for i in range(n):
    c, _ = l.accept()
    # exit_early: the child touches its connection only once the parent has
    # let go of it -- closed its copy, or, the last child, left with
    # os._exit -- which it learns as end-of-file on a pipe whose write end
    # only the parent holds (closed by its close() below, or by its exit).
    if kind == "exit_early": let_go_r, let_go_w = os.pipe()
    if kind == "exec_wait": exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        l.close()
        if kind == "exec_wait": os.close(exec_r)
        # A CGI server's child runs its program as nobody.
        if kind == "exec_hold" and os.getuid() == 0: os.setgid(65534); os.setuid(65534)
        if kind == "exit_early":
            os.close(let_go_w)
            if not select.select([let_go_r], [], [], 30)[0]:
                print("exit_early child: its parent still held the connection after 30 s", file=sys.stderr, flush=True)
                os._exit(1)
            os.close(let_go_r)
        if kind in ("killed", "echo_child", "exit_early"):   # echoes itself (while its parent is killed)
            first = kind == "killed"
            while True:
                b = c.recv(65536)
                if not b: break
                if first:   # it has the connection: say so
                    open("%s.%d" % (sys.argv[4], os.getpid()), "w").close(); first = False
                c.sendall(b)
            c.close()
            os._exit(0)
        if kind == "read_then_exec":   # answers the first byte itself, then execs
            first = c.recv(1)
            if first: c.sendall(first)
        os.dup2(c.fileno(), 0); os.dup2(c.fileno(), 1); c.close()
        os.execvp("cat", ["cat"])   # inetd-style: the program knows nothing of sockets
    if kind == "exit_early": os.close(let_go_r)
    if kind == "exec_wait":   # end-of-file once the child's exec succeeded
        os.close(exec_w); os.read(exec_r, 1); os.close(exec_r)
    if kind == "exec_hold":   # a CGI server: its copy held until the program ends
        try: os.waitpid(pid, 0)
        except ChildProcessError: pass   # SIGCHLD ignored: reaped, waited for all the same
    # late_close: the subject of the case is a parent that closes its copy
    # late, while the program its child exec'd already uses the connection
    # (its first read waits for the handover, up to 250 ms before it asks
    # the parent to relay instead), so this is a sleep, not a wait: nothing
    # the parent can see says the program is waiting.
    if kind == "late_close": time.sleep(0.1)
    c.close()
    if kind == "exit_early" and i < n - 1: os.close(let_go_w)   # the last one's closes with the _exit
if kind == "exit_early": os._exit(0)   # no destructor: _exit re-homes the unclaimed offer
if kind in ("killed", "inetd_killed"):
    open(sys.argv[4], "w").close()
    signal.pause()
# As inetd does, live on while the children serve: a handed-over connection
# is relayed by this process and ends with it (docs/ARCHITECTURE.md, fork).
# A fixed sleep here cut a 20 MB echo short on a loaded machine. (With
# SIGCHLD ignored, wait() returns once every child has exited.)
try:
    while True: os.wait()
except ChildProcessError:
    pass
