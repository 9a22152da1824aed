"""One request and its answer, each side reporting what it saw.

server PORT: accepts one connection, waits (epoll, 5 s) for 4 bytes and
sends them back. client PORT: connects, sends b"ping", waits (epoll, 5 s)
for the answer. Each prints one line: "<role> ok" (the bytes came back
intact), "<role> reset <where>" (the connection was reset: at connect,
send or recv, or the peer's end of stream), or "<role> stuck" (epoll saw
nothing: the number does not show the connection's data). After "ok",
what the number is in the kernel: "unix" (an SMC-R connection's readiness
socket) or "tcp".
"""
import os
import select
import socket
import sys

from sockutil import listen_local


def kernel_kind(fd):
    """unix or tcp: the socket at fd as the kernel has it, past the shim."""
    ino = os.readlink("/proc/self/fd/%d" % fd)[len("socket:["):-1]
    with open("/proc/net/unix") as f:
        unix = {line.split()[6] for line in f.readlines()[1:] if len(line.split()) > 6}
    return "unix" if ino in unix else "tcp"


def wait_readable(s):
    # One-shot: the kernel alone reports it (the shim adds events it finds
    # in memory only to plain EPOLLIN registrations), so it shows what the
    # number really is.
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
    try:
        return bool(ep.poll(5))
    finally:
        ep.close()


def serve(port):
    listener = listen_local(port, 1)
    print("listening", flush=True)
    s, _ = listener.accept()
    try:
        if not wait_readable(s):
            return "stuck"
        got = s.recv(4)
        if not got:
            return "reset eof"
        s.sendall(got)
        return "ok " + kernel_kind(s.fileno())
    except OSError as e:
        return "reset %s" % type(e).__name__


def client(port):
    try:
        s = socket.create_connection(("127.0.0.1", port))
    except OSError as e:
        return "reset connect %s" % type(e).__name__
    try:
        s.sendall(b"ping")
    except OSError as e:
        return "reset send %s" % type(e).__name__
    try:
        if not wait_readable(s):
            return "stuck"
        got = s.recv(4)
    except OSError as e:
        return "reset recv %s" % type(e).__name__
    if got == b"ping":
        return "ok " + kernel_kind(s.fileno())
    return "reset eof" if not got else "wrong %r" % got


if __name__ == "__main__":
    role, port = sys.argv[1], int(sys.argv[2])
    print("%s %s" % (role, serve(port) if role == "server" else client(port)), flush=True)
