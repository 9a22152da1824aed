"""SO_RCVTIMEO and SO_SNDTIMEO bound a whole blocking call, as TCP's do.

recv: a 1 s SO_RCVTIMEO, recv(50, MSG_WAITALL) while the peer sends one
byte every 0.2 s (40 in all, then closes). TCP returns after about 1 s
with the few bytes that came. A timeout restarted at every wake-up would
return only at the peer's close, 8 s later, with all 40.

send: a 1 s SO_SNDTIMEO, one send() of 64 MiB while the peer reads 4 KiB
every 0.1 s (for 6 s, then closes). TCP returns after about 1 s with what
fitted. Every read opens the window a little and wakes the writer: a
restarted timeout would return only at the peer's close.

Prints "recv got=N elapsed=S" and "send sent=N elapsed=S".
"""
import os
import socket
import struct
import sys
import time

from sockutil import listen_local

TIMEVAL_1S = struct.pack("ll", 1, 0)


def peer(port):
    c = socket.create_connection(("127.0.0.1", port))
    for _ in range(40):  # the reader's case
        try:
            c.send(b"x")
        except OSError:
            break
        time.sleep(0.2)
    c.close()
    c = socket.create_connection(("127.0.0.1", port))
    until = time.monotonic() + 6  # the writer's case
    while time.monotonic() < until:
        try:
            if not c.recv(4096):
                break
        except OSError:
            break
        time.sleep(0.1)
    c.close()


def main(port):
    listener = listen_local(port, 2)
    pid = os.fork()
    if pid == 0:
        listener.close()
        peer(port)
        os._exit(0)
    s, _ = listener.accept()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, TIMEVAL_1S)
    t0 = time.monotonic()
    try:
        got = len(s.recv(50, socket.MSG_WAITALL))
    except BlockingIOError:
        got = 0
    print("recv got=%d elapsed=%.2f" % (got, time.monotonic() - t0), flush=True)
    s.close()

    s, _ = listener.accept()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, TIMEVAL_1S)
    data = bytes(64 << 20)
    t0 = time.monotonic()
    try:
        sent = s.send(data)
    except OSError:
        sent = -1
    print("send sent=%d elapsed=%.2f" % (sent, time.monotonic() - t0), flush=True)
    s.close()
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main(int(sys.argv[1]))
