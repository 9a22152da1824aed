"""Cross-connection order, as the kernel's epoll ready list gives it for TCP.

  arrival_order.py server PORT READYFILE    epoll (selectors) server
  arrival_order.py client PORT N [SWAP [CLOSE]]
                                            N rounds; prints violations=<n>
                                            (SWAP: every SWAP-th round sends
                                            "B" first: the instrument's check;
                                            CLOSE=1: the round closes D
                                            instead of writing "A")

Each round the client opens a new connection D and makes one round trip on
it (its first messages), then writes "A" on D and right after "B" on an old
connection R. The server handles events in the order epoll_wait returns
them; a round where it handles R's "B" before D's "A" is a violation: over
TCP "A" is queued on the server's socket before "B" is even sent. redis'
own test suite relies on this (a blocking command on a new connection,
then a command on the old one that must find the first blocked). With
CLOSE, D's end of file takes A's place: over TCP the FIN is queued before
"B" is sent (redis' replication tests close a link, then ask the master
about its replicas on another connection).
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
    pending_a = set()  # rounds whose "A" (or end of file) was handled
    round_of = {}  # socket -> its round (from its "H")
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
                if s in round_of:
                    pending_a.add(round_of.pop(s))
                sel.unregister(s)
                s.close()
                continue
            for line in data.decode().split():
                kind, _, n = line.partition(":")
                if kind == "H":  # hello round trip on a new connection
                    round_of[s] = n
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


def client(port, n, swap, close):
    old = socket.create_connection(("127.0.0.1", port))
    for i in range(n):
        d = socket.create_connection(("127.0.0.1", port))
        d.sendall(b"H:%d " % i)
        d.recv(10)
        first = d.close if close else (lambda: d.sendall(b"A:%d " % i))
        if swap and i % swap == 0:
            old.sendall(b"B:%d " % i)
            old.recv(10)
            first()
        else:
            first()
            old.sendall(b"B:%d " % i)
            old.recv(10)
        d.close()
    old.sendall(b"Q:0 ")
    print(old.makefile().readline().strip())


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]), sys.argv[3])
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0,
               len(sys.argv) > 5 and sys.argv[5] == "1")
