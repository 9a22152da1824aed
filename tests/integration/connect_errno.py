"""connect()'s errno sequences, printed as one line to compare plain TCP with
smc_run: a non-blocking connect to a bound port that is not listening yet,
again (the pending error), again after listen() (asyncio's
test_sock_client_connect_racing), then on the connected socket (EISCONN);
SO_ERROR after a refused non-blocking connect, read once; a blocking connect
refused, then the same socket connected.
The server is another process (a listener of this process keeps the
connection plain TCP under smc_run), and each connected socket echoes, so the
counters can prove that SMC-R carried them.
  usage: connect_errno.py"""
import errno
import os
import select
import socket
import subprocess
import sys
import time

# The server accepts as soon as it listens: a connect() under smc_run waits
# for the server's accept() (the CLC runs there), which is another matter.
SERVER = r'''
import socket, sys, threading
def serve(s):
    c, _ = s.accept()
    c.sendall(c.recv(100))
    c.close()
socks = []
for _ in range(3):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks), flush=True)
for line in sys.stdin:
    cmd, i = line.split()
    s = socks[int(i)]
    if cmd == "listen":
        s.listen(8)
        threading.Thread(target=serve, args=(s,)).start()
    print("done", flush=True)
'''


def name(f):
    try:
        r = f()
        return "0" if r is None else str(r)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def echo(s):
    s.setblocking(True)
    s.sendall(b"ping")
    return "echo" if s.recv(100) == b"ping" else "echo-bad"


def main():
    server = subprocess.Popen([sys.executable, "-c", SERVER, "0"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    ports = [int(p) for p in server.stdout.readline().split()]

    def cmd(c, i):
        server.stdin.write("%s %d\n" % (c, i))
        server.stdin.flush()
        server.stdout.readline()

    out = []
    # 1. connect racing with listen(), non-blocking
    a = ("127.0.0.1", ports[0])
    c = socket.socket()
    c.setblocking(False)
    out.append("nb1=" + name(lambda: c.connect(a)))
    time.sleep(0.05)
    out.append("nb2=" + name(lambda: c.connect(a)))
    cmd("listen", 0)
    out.append("nb3=" + name(lambda: c.connect(a)))
    select.select([], [c], [], 5)
    out.append("so_error=%d" % c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
    out.append("nb4=" + name(lambda: c.connect(a)))
    out.append("nb5=" + name(lambda: c.connect(a)))
    out.append(echo(c))
    c.close()
    # 2. SO_ERROR after a refused non-blocking connect: the error, once
    b = ("127.0.0.1", ports[1])
    d = socket.socket()
    d.setblocking(False)
    out.append("nb=" + name(lambda: d.connect(b)))
    select.select([], [d], [], 5)
    out.append("so_error1=%s" % errno.errorcode.get(d.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), "0"))
    out.append("so_error2=%s" % errno.errorcode.get(d.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), "0"))
    d.close()
    # 3. blocking: refused, then the same socket connects
    e = socket.socket()
    out.append("blocking1=" + name(lambda: e.connect(b)))
    cmd("listen", 1)
    out.append("blocking2=" + name(lambda: e.connect(b)))
    out.append("blocking3=" + name(lambda: e.connect(b)))
    out.append(echo(e))
    e.close()
    print(" ".join(out), flush=True)
    server.stdin.close()
    server.wait(timeout=10)


if __name__ == "__main__":
    main()
