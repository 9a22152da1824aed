"""A writer of many 1-byte messages and a reader that looks only afterwards.

Each write is one CDC; over the shared-memory fabric the reader finds only
the newest in its control page. 40,000 of them move the 16-bit CDC sequence
number more than half round: judged by serial arithmetic, the newest looked
older than the last one read, was dropped as stale, and the reader blocked
for ever with the whole flood in its RMB (the writer, its window full, too).

Modes: blocking (the reader read once, so it is armed, then sleeps),
epoll (the reader waits with epoll, maxevents=1, as event loops do: the
connection is parked). Prints one line: the mode and what the reader got.
"""
import os
import select
import socket
import sys
import time

from sockutil import listen_local

N = 40000


def flood(s):
    for _ in range(N):
        s.send(b"x")


def drain(s, mode):
    if mode == "epoll":
        ep = select.epoll()
        ep.register(s.fileno(), select.EPOLLIN)
    got = 0
    s.settimeout(10)
    try:
        while got < N:
            if mode == "epoll" and not ep.poll(10, 1):
                break
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
    except OSError:
        pass
    return got


def main(port, mode):
    listener = listen_local(port, 1)
    pid = os.fork()
    if pid == 0:
        listener.close()
        c = socket.create_connection(("127.0.0.1", port))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.sendall(b"h")  # a CDC the server reads: the sequence number it knows
        c.recv(1)  # the server is ready
        flood(c)
        c.recv(1)
        os._exit(0)
    s, _ = listener.accept()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.recv(1)
    if mode == "epoll":
        ep = select.epoll()
        ep.register(s.fileno(), select.EPOLLIN)
        ep.poll(0.01, 1)  # nothing yet: the wait parks the connection
    s.settimeout(0.05)
    try:
        s.recv(1)  # nothing yet: a blocking reader arms
    except socket.timeout:
        pass
    s.settimeout(None)
    s.sendall(b"g")
    time.sleep(1)  # the flood arrives while nobody reads
    got = drain(s, mode)
    s.sendall(b"e")
    os.waitpid(pid, 0)
    print("%s read=%d of %d" % (mode, got, N), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
