"""Epoll fairness with busy connections, as the kernel's ready list gives it.

The server waits with epoll_wait(maxevents) on three connections that always
have data and on its listener; a fourth client connects 0.5 s in. The kernel
reports every ready fd in turn (an fd it reported goes to the back of its
list), so each connection is served and the late client accepted at once.
Under smc_run, connections whose data is found in memory (parked) were
answered first and only: with maxevents=1 (or maxevents equal to the number
of busy connections) the listener was never reported, and with maxevents=1
the connections after the first never were.

Usage: epoll_fair.py PORT MAXEVENTS; prints what the server saw.
"""
import os
import select
import socket
import sys
import time

from sockutil import listen_local

BUSY = 3


def client(port):
    cs = [socket.create_connection(("127.0.0.1", port)) for _ in range(BUSY)]
    for c in cs:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.setblocking(False)
    start = time.time()
    late = None
    while time.time() - start < 3:
        if late is None and time.time() - start > 0.5:
            late = socket.create_connection(("127.0.0.1", port))
        for c in cs:
            try:
                c.send(b"x" * 16)
            except BlockingIOError:
                pass
            except OSError:
                return
        time.sleep(0.0002)
    os._exit(0)


def server(port, maxevents):
    listener = listen_local(port, 8)
    pid = os.fork()
    if pid == 0:
        listener.close()
        client(port)
        os._exit(0)
    conns = [listener.accept()[0] for _ in range(BUSY)]
    time.sleep(0.2)  # every connection has data from now on
    ep = select.epoll()
    for c in conns:
        ep.register(c.fileno(), select.EPOLLIN)
    ep.register(listener.fileno(), select.EPOLLIN)
    served = {c.fileno(): 0 for c in conns}
    accepted = None
    start = time.time()
    while time.time() - start < 2:
        for fd, _ in ep.poll(1.0, maxevents):
            if fd == listener.fileno():
                accepted = "accepted %.1fs late" % max(0.0, time.time() - start - 0.3)
                listener.accept()
                ep.unregister(listener.fileno())
            else:
                served[fd] += 1
                os.read(fd, 65536)
                time.sleep(0.002)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    each = sum(1 for n in served.values() if n > 0)
    print("maxevents=%d: %d of %d busy connections served; late client %s"
          % (maxevents, each, BUSY, "accepted" if accepted else "never accepted"), flush=True)


if __name__ == "__main__":
    server(int(sys.argv[1]), int(sys.argv[2]))
