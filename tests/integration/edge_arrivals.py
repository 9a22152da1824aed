"""Edge-triggered epoll: every arrival is an edge, even while data that came
before it is still unread. Five replies (two bytes each, from another
process: the first at once, before the reader registers, the others 200 ms
apart while it sleeps in epoll_wait); the reader reads one byte of each, or
none at all. Over TCP each reply is an event.

usage: edge_arrivals.py PORT {partial|none} {in|nginx}
prints: "<read> <interest>: events [..] unread <n>"
"""
import os
import select
import socket
import sys
import time

from sockutil import listen_local

port, read_mode, interest_name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ROUNDS = 5
listener = listen_local(port, 8)
child = os.fork()
if child == 0:
    conn, _ = listener.accept()
    for i in range(ROUNDS):
        if i:
            time.sleep(0.2)
        conn.sendall(b"xy")
    conn.recv(1)  # until the reader is done
    os._exit(0)
listener.close()

sock = socket.create_connection(("127.0.0.1", port))
sock.setblocking(False)
interest = select.EPOLLIN | select.EPOLLET
if interest_name == "nginx":
    interest |= select.EPOLLOUT | select.EPOLLRDHUP
ep = select.epoll()
ep.register(sock.fileno(), interest)
seen = []
for _ in range(ROUNDS):
    got = 0
    deadline = time.monotonic() + 2.0
    # The writable edge of a fresh registration is not one of the replies.
    while not got & select.EPOLLIN and time.monotonic() < deadline:
        for _, ev in ep.poll(max(0.0, deadline - time.monotonic())):
            got |= ev
    seen.append(1 if got & select.EPOLLIN else 0)
    if read_mode == "partial":
        try:
            sock.recv(1)
        except BlockingIOError:
            pass
time.sleep(0.05)
unread = 0
while True:
    try:
        chunk = sock.recv(100)
    except BlockingIOError:
        break
    if not chunk:
        break
    unread += len(chunk)
sock.send(b"!")
os.waitpid(child, 0)
print(f"{read_mode} {interest_name}: events {seen} unread {unread}")
