#!/usr/bin/env python3
"""A link group's pool of RMBs against the peer's limit of 255 (RFC 7609 8.2).

server PORT FIRST THEN READY_FILE: a listener whose SO_RCVBUF (the size of
    its connections' RMBs) changes between two phases: FIRST connections with
    16 KiB RMBs, each echoing a byte and closed in order (their RMBs stay
    pooled in the link group: pooled RMBs stay known to the client), then
    THEN connections with 256 KiB RMBs, all open at once. Prints
    "first=N then=N".
client PORT FIRST THEN: the other end; prints "ok=N" (connections whose
    byte came back) once every connection of the second phase is open.

The second phase's RMBs are of another size than the pooled ones: each is
announced anew while the pool still holds the first phase's, so the client's
table of the server's RMBs would exceed 255 unless the server deletes pooled
ones first (LinkGroup::make_room_to_announce).
"""
import socket
import sys


def serve(port, first, then, ready_file):
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # 16 KiB RMBs
    lst.bind(("127.0.0.1", port))
    lst.listen(1024)
    open(ready_file, "w").close()
    held = []
    for _ in range(first):
        c, _ = lst.accept()
        held.append(c)
    for c in held:  # echo, then close once the client has (both C: pooled)
        c.sendall(c.recv(1))
    for c in held:
        while c.recv(64):
            pass
        c.close()
    done_first = len(held)
    # 256 KiB RMBs for the rest: a size the application sets, so that the
    # shim's budget (which shrinks RMBs as connections grow) leaves it alone.
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 262144)
    held = []
    for _ in range(then):
        c, _ = lst.accept()
        c.sendall(c.recv(1))
        held.append(c)
    for c in held:
        while c.recv(64):
            pass
        c.close()
    print(f"first={done_first} then={len(held)}", flush=True)


def client(port, first, then):
    ok = 0
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(first)]
    for c in conns:
        c.sendall(b"a")
        ok += c.recv(1) == b"a"
    for c in conns:
        c.shutdown(socket.SHUT_WR)
        while c.recv(64):
            pass
        c.close()
    conns = []
    for _ in range(then):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"b")
        ok += c.recv(1) == b"b"
        conns.append(c)
    print(f"ok={ok}", flush=True)
    for c in conns:
        c.shutdown(socket.SHUT_WR)
        while c.recv(64):
            pass
        c.close()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
