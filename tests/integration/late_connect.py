#!/usr/bin/env python3
"""A non-blocking connect() whose TCP handshake takes about a second.

  server PORT READY   listen(backlog 1) on PORT, touch READY, wait for READY.go,
                      then accept everything: each connection gets "HELLO\\n"
                      first (the server speaks first), then an echo of what it
                      sends; exits once one has echoed (the client)
  filler PORT N       N plain connections (not under smc_run) that fill the
                      accept queue, held until killed
  client PORT FILE    touch FILE, then connect without blocking (its SYN is
                      dropped: the queue is full, so TCP retries it), wait for
                      the banner, send 64 KiB, check the echo

The client prints "connect_call_s=... banner=... ok=..."; under smc_run its
connect() call must return EINPROGRESS in a fraction of a second, and the
connection must still work once the server accepts.
"""
import os
import select
import socket
import sys
import threading
import time

from sockutil import recv_up_to


def server(port, ready):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    open(ready, "w").close()
    while not os.path.exists(ready + ".go"):
        time.sleep(0.01)
    served = threading.Event()

    def serve(c):
        c.sendall(b"HELLO\n")
        c.settimeout(20)
        echoed = 0
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
                echoed += len(d)
        except OSError:
            pass
        c.close()
        if echoed:  # the client; the fillers never send
            served.set()

    s.settimeout(0.2)
    deadline = time.monotonic() + 60
    while not served.is_set() and time.monotonic() < deadline:
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def filler(port, n):
    held = []
    for _ in range(n):
        f = socket.socket()
        f.setblocking(False)
        try:
            f.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        held.append(f)
    time.sleep(60)


def client(port, connecting):
    c = socket.socket()
    c.setblocking(False)
    open(connecting, "w").close()  # the server starts accepting 2 s after this
    t0 = time.monotonic()
    try:
        c.connect(("127.0.0.1", port))
        result = "connected"
    except BlockingIOError:
        result = "einprogress"
    call_s = time.monotonic() - t0
    select.select([], [c], [], 30)
    err = c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    c.setblocking(True)
    c.settimeout(20)
    banner = b""
    while not banner.endswith(b"\n"):
        d = c.recv(16)
        if not d:
            break
        banner += d
    payload = bytes(range(256)) * 256
    c.sendall(payload)
    got = recv_up_to(c, len(payload))
    c.close()
    ok = err == 0 and banner == b"HELLO\n" and got == payload
    print("connect=%s connect_call_s=%.3f so_error=%d banner=%s ok=%d total_s=%.3f"
          % (result, call_s, err, banner.strip().decode() or "-", 1 if ok else 0, time.monotonic() - t0))
    return 0 if ok else 1


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "server":
        server(int(sys.argv[2]), sys.argv[3])
    elif role == "filler":
        filler(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(client(int(sys.argv[2]), sys.argv[3]))
