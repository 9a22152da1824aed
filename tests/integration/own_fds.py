"""The shim's own descriptors are not the application's.

The shim keeps descriptors of its own (the TCP socket behind an SMC-R fd,
readiness socket ends, links, the eBPF map descriptors), above the numbers
the application gets. A program that probes or closes numbers it never
opened must see what it sees without the shim: EBADF.

The client (a forked child of the echo server) connects and echoes 1 MiB,
then, with the connection open:
  - probes every number below its descriptor limit with fcntl(F_GETFD)
    and prints those that answer (the same set as over plain TCP);
  - registers in an epoll set every number that did not answer (a test's
    "surely unused" number: CPython's test_epoll uses 10000): EBADF each;
  - makes a socket object of each of them (getsockopt, as a scan for
    inherited sockets does): EBADF each;
  - closes every number from 3 up to the limit but its connection and its
    epoll set, as a daemon's close loop does;
  - echoes 1 MiB more on the connection, and makes a second connection and
    echoes 1 MiB over it (the shim's engine and maps survived the loop).
Prints one line per step; the test compares them with plain TCP's and
checks from the counters that both connections were SMC-R.
"""
import errno
import fcntl
import hashlib
import os
import resource
import select
import socket
import sys
import threading

from sockutil import echo_until_eof, listen_local, recv_up_to

N = 1 << 20


def echo_once(c):
    payload = os.urandom(N)

    def write():
        c.sendall(payload)

    writer = threading.Thread(target=write)
    writer.start()
    back = recv_up_to(c, N)
    writer.join()
    return hashlib.sha256(back).digest() == hashlib.sha256(payload).digest()


def try_each(numbers, call, succeeded):
    """call(n) for each number: "EBADF=.. other=.. <succeeded>=..", counting
    EBADF, other errors and successes."""
    refused = other = ok = 0
    for n in numbers:
        try:
            call(n)
            ok += 1
        except OSError as e:
            if e.errno == errno.EBADF:
                refused += 1
            else:
                other += 1
    return "EBADF=%d other=%d %s=%d" % (refused, other, succeeded, ok)


def client(port):
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    c = socket.create_connection(("127.0.0.1", port))
    print("first echo intact=%s" % echo_once(c), flush=True)

    answering = []
    for n in range(3, limit):
        try:
            fcntl.fcntl(n, fcntl.F_GETFD)
            answering.append(n)
        except OSError as e:
            if e.errno != errno.EBADF:
                answering.append(-n)
    print("answering fcntl: %s" % answering, flush=True)

    ep = select.epoll()
    unopened = [n for n in range(3, limit) if n not in answering and n != ep.fileno()]
    print("epoll register of unopened numbers: %s"
          % try_each(unopened, lambda n: ep.register(n, select.EPOLLIN), "accepted"), flush=True)
    # socket(fileno=) asks getsockopt(SO_TYPE...) of the number.
    print("socket(fileno=) of unopened numbers: %s"
          % try_each(unopened, lambda n: socket.socket(fileno=n).detach(), "adopted"), flush=True)

    keep = {c.fileno(), ep.fileno(), 1, 2}
    closed = 0
    for n in range(3, limit):
        if n in keep:
            continue
        try:
            os.close(n)
            closed += 1
        except OSError:
            pass
    print("close loop closed %d" % closed, flush=True)

    print("echo after the loop intact=%s" % echo_once(c), flush=True)
    c.close()
    d = socket.create_connection(("127.0.0.1", port))
    print("new connection echo intact=%s" % echo_once(d), flush=True)
    d.close()
    ep.close()


def main(port):
    listener = listen_local(port, 2)
    pid = os.fork()
    if pid == 0:
        listener.close()
        try:
            client(port)
        except Exception as e:
            print("client failed: %r" % e, flush=True)
        os._exit(0)
    for _ in range(2):
        s, _ = listener.accept()
        echo_until_eof(s)
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main(int(sys.argv[1]))
