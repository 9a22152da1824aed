"""Cross-connection order, as the kernel's epoll ready list gives it for TCP.

  arrival_order.py server PORT READYFILE    epoll (selectors) server
  arrival_order.py client PORT N [SWAP]     N rounds; prints violations=<n>
                                            (SWAP: every SWAP-th round sends
                                            "B" first: the instrument's check)

Each round the client opens a new connection D and makes one round trip on
it (its first messages), then writes "A" on D and right after "B" on an old
connection R. The server handles events in the order epoll_wait returns
them; a round where it handles R's "B" before D's "A" is a violation: over
TCP "A" is queued on the server's socket before "B" is even sent. redis'
own test suite relies on this (a blocking command on a new connection,
then a command on the old one that must find the first blocked).
"""
import selectors
import socket
import sys


def server(port, ready):
    sel = selectors.DefaultSelector()
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(64)
    lst.setblocking(False)
    sel.register(lst, selectors.EVENT_READ)
    open(ready, "w").close()
    pending_a = set()  # rounds whose "A" was handled
    violations = rounds = 0
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is lst:
                c, _ = lst.accept()
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ)
                continue
            try:
                data = s.recv(4096)
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(s)
                s.close()
                continue
            for line in data.decode().split():
                kind, _, n = line.partition(":")
                if kind == "H":  # hello round trip on a new connection
                    s.sendall(b"h")
                elif kind == "A":
                    pending_a.add(n)
                elif kind == "B":
                    rounds += 1
                    if n not in pending_a:
                        violations += 1
                    s.sendall(b"b")
                elif kind == "Q":
                    s.sendall(b"violations=%d rounds=%d\n" % (violations, rounds))
                    return


def client(port, n, swap):
    old = socket.create_connection(("127.0.0.1", port))
    for i in range(n):
        d = socket.create_connection(("127.0.0.1", port))
        d.sendall(b"H:%d " % i)
        d.recv(10)
        if swap and i % swap == 0:
            old.sendall(b"B:%d " % i)
            old.recv(10)
            d.sendall(b"A:%d " % i)
        else:
            d.sendall(b"A:%d " % i)
            old.sendall(b"B:%d " % i)
            old.recv(10)
        d.close()
    old.sendall(b"Q:0 ")
    print(old.makefile().readline().strip())


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]), sys.argv[3])
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
