#!/usr/bin/env python3
# A thread reads a socket while another thread's connect() on it runs the
# client handshake inline (the test holds the client between the server's
# Accept and its Confirm: SMCR_TEST_CONFIRM_DELAY_MS): the read must return
# the server's first bytes, as over TCP. Before the fix the reader went to
# the TCP socket: it took a byte of the server's Accept (CPython's
# test_socket TCPCloserTest read b'\xe2') or slept there while the
# connection became SMC-R under the number.
import socket
import threading
import time

srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen()
addr = srv.getsockname()


def answer(c):
    c.sendall(b"hello")
    time.sleep(0.2)
    c.close()


def serve(n):
    # Back in accept() at once: the client's handshake stays inside connect().
    for _ in range(n):
        threading.Thread(target=answer, args=(srv.accept()[0],)).start()


server = threading.Thread(target=serve, args=(2,))
server.start()
time.sleep(0.2)  # the server is in accept(): it answers each Proposal within connect()'s wait
first = socket.create_connection(addr)  # the link group: the next is a subsequent contact
first.recv(5)
first.close()
cli = socket.socket()
connecting = threading.Thread(target=cli.connect, args=(addr,))
connecting.start()
time.sleep(0.1)  # under smc_run, connect() is inside its handshake now
got = []


def reader():
    try:
        got.append(cli.recv(10))
    except OSError as e:
        got.append(repr(e).encode())


r = threading.Thread(target=reader, daemon=True)
r.start()
r.join(5)
connecting.join()
server.join()
print("read=%s" % (got[0].decode(errors="replace") if got else "nothing-in-5s"))
