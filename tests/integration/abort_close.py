"""An abortive close (SO_LINGER {1, 0}) seen from the peer, as CPython's
test_ssl test_preauth_data_to_tls_server sees it: the client connects, the
server accepts, the client sends a request and closes with a reset; only then
does the server look at its socket: getpeername(), then non-blocking recv()s.

  usage: abort_close.py ROUNDS [fork|thread]

Client and server are two processes (fork, before any socket exists; the
default) or two threads of one (as in test_ssl), kept in step over pipes. Prints one line per distinct outcome, "COUNT x OUTCOME",
where OUTCOME is what the server saw, e.g.
"getpeername=ENOTCONN recv1=b'D' recv=b'ELETE' recv=ECONNRESET recv=b''".
"""
import errno
import os
import socket
import struct
import sys
import threading
from collections import Counter

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
MODE = sys.argv[2] if len(sys.argv) > 2 else "fork"
REQUEST = b"DELETE /data HTTP/1.0\r\n\r\n"


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def read_exact(fd, n):
    b = b""
    while len(b) < n:
        c = os.read(fd, n - len(b))
        if not c:
            raise SystemExit("abort_close: peer process gone")
        b += c
    return b


to_client_r, to_client_w = os.pipe()
to_server_r, to_server_w = os.pipe()


def client():
    port = struct.unpack("H", read_exact(to_client_r, 2))[0]
    for _ in range(ROUNDS):
        c = socket.create_connection(("127.0.0.1", port))
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.setblocking(False)
        read_exact(to_client_r, 1)  # the server accepted
        c.send(REQUEST)
        c.close()  # a reset, not a FIN
        os.write(to_server_w, b"c")


if MODE == "thread":
    t = threading.Thread(target=client)
    t.start()
else:
    pid = os.fork()
    if pid == 0:
        client()
        sys.exit(0)  # not os._exit: the shim writes its counters at exit
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(8)
os.write(to_client_w, struct.pack("H", srv.getsockname()[1]))
seen = Counter()
for _ in range(ROUNDS):
    conn, _ = srv.accept()
    os.write(to_client_w, b"a")
    read_exact(to_server_r, 1)  # the client's close() has returned
    steps = []
    try:
        conn.getpeername()
        steps.append("getpeername=ok")
    except OSError as e:
        steps.append("getpeername=" + err(e))
    conn.setblocking(False)
    # What ssl.SSLSocket does when getpeername() says ENOTCONN: recv(1).
    for n in (1, 5, 100, 100):
        try:
            steps.append("recv%s=%r" % (n if n == 1 else "", conn.recv(n)))
        except OSError as e:
            steps.append("recv%s=%s" % (n if n == 1 else "", err(e)))
    conn.close()
    seen[" ".join(steps)] += 1
if MODE == "thread":
    t.join()
    status = 0
else:
    _, status = os.waitpid(pid, 0)
for outcome, count in seen.most_common():
    print("%d x %s" % (count, outcome))
sys.exit(0 if status == 0 else 1)
