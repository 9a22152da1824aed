"""A peer process killed by SIGKILL, as the other end sees it.

  peer_killed.py server PORT      one connection, then wait to be killed:
                                  sends "hi", or 100 KB for the mode "data"
  peer_killed.py client PORT MODE connect, make the server's state MODE's,
                                  kill it, and print what the connection
                                  shows afterwards: one line

The kernel closes a killed process's TCP sockets: FIN where it had read
everything sent to it (the other end reads end-of-file, its next write is
accepted and the one after fails with EPIPE), a reset where it had not.
Modes: idle (all read), unread (100 bytes the server never read), blocked
(the client is in recv() when the kill comes), data (the server's last 100
KB still unread by the client: all of it, then end-of-file), epoll (what
epoll_wait reports for EPOLLIN|EPOLLRDHUP), writing (the client is in a
blocking sendall() of 64 MB the server does not read when the kill comes:
the send fails, it does not hang), exiting (the same, but the server exits
on its own, its data unread, instead of being killed), closing (the server
reads everything and closes, then the client writes 64 MB: as TCP, what its
buffer takes is accepted, then EPIPE; it neither hangs nor takes all).
"""
import errno
import os
import select
import signal
import socket
import sys
import threading
import time


def server(port):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(8)
    print("pid=%d" % os.getpid(), flush=True)
    c, _ = listener.accept()
    mode = c.recv(1)
    c.sendall(b"x" * 100000 if mode == b"d" else b"hi")
    c.sendall(b"!")  # everything is written
    if mode == b"X":
        c.recv(65536)
        time.sleep(0.3)
        sys.exit(0)
    if mode == b"Y":
        got = 0
        while got < 1000:
            got += len(c.recv(1000 - got))
        c.close()
        time.sleep(0.5)
        sys.exit(0)
    time.sleep(3600)


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else type(e).__name__


def client(port, mode, pid):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall({"exiting": b"X", "closing": b"Y"}.get(mode, mode[:1].encode()))
    want = 100001 if mode == "data" else 3
    if mode != "data":
        got = b""
        while len(got) < want:
            got += s.recv(want - len(got))
    else:
        time.sleep(0.5)  # the server wrote its 100 KB and its "!": unread here
    if mode == "unread":
        s.sendall(b"u" * 100)
        time.sleep(0.2)
    out = [mode]
    if mode in ("writing", "exiting", "closing"):
        if mode == "closing":
            s.sendall(b"c" * 1000)
            time.sleep(0.2)  # read, and closed: a FIN, not a reset
        if mode == "writing":
            threading.Timer(0.3, lambda: os.kill(pid, signal.SIGKILL)).start()
        try:
            s.sendall(b"w" * (64 << 20))
            out.append("sendall=ok")
        except OSError:
            out.append("sendall=failed")
        print(" ".join(out), flush=True)
        return
    if mode == "blocked":
        threading.Timer(0.3, lambda: os.kill(pid, signal.SIGKILL)).start()
    else:
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    if mode == "epoll":
        ep = select.epoll()
        ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
        ev = ep.poll(5)
        names = [n for n in ("EPOLLIN", "EPOLLOUT", "EPOLLRDHUP", "EPOLLHUP", "EPOLLERR")
                 if ev and ev[0][1] & getattr(select, n)]
        out.append("events=" + "|".join(names))
    s.settimeout(5)
    try:
        total = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            total += b
        out.append("read=%d then eof" % len(total) if mode == "data" else "recv=eof")
        if mode == "data" and total != b"x" * 100000 + b"!":
            out.append("DATA DIFFERS")
    except OSError as e:
        out.append("recv=" + err(e))
    for i in (1, 2):
        try:
            s.send(b"y")
            out.append("send%d=ok" % i)
        except OSError as e:
            out.append("send%d=%s" % (i, err(e)))
        time.sleep(0.2)
    print(" ".join(out), flush=True)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if sys.argv[1] == "server":
        server(int(sys.argv[2]))
    else:
        client(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
