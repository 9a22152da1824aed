"""Accept-then-fork echo servers and their client, for scripts/bench.sh.

  fork_echo.py server forking|inetd|threading PORT
                                             serve until killed
  fork_echo.py client PORT CONNS MIB         CONNS connections in turn, each
                                             streaming MIB MiB and reading the
                                             echo; prints rate=<MB/s>

forking: socketserver.ForkingTCPServer, the child echoes with recv/sendall.
inetd:   the child dup2s the connection onto 0 and 1 and execs cat, as inetd
         does (under smc_run the connection is carried into cat).
threading: socketserver.ThreadingTCPServer, the same echo without a fork.
"""
import os
import signal
import socket
import socketserver
import sys
import threading
import time


def serve(kind, port):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)

    class Echo(socketserver.BaseRequestHandler):
        def handle(self):
            while True:
                b = self.request.recv(1 << 20)
                if not b:
                    break
                self.request.sendall(b)
            self.request.shutdown(socket.SHUT_WR)

    if kind in ("forking", "threading"):  # threading: the same echo without a fork
        base = socketserver.ForkingTCPServer if kind == "forking" else socketserver.ThreadingTCPServer

        class Server(base):
            allow_reuse_address = True
            request_queue_size = 64

        Server(("127.0.0.1", port), Echo).serve_forever()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    while True:
        c, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            os.dup2(c.fileno(), 0)
            os.dup2(c.fileno(), 1)
            c.close()
            os.execvp("cat", ["cat"])
        c.close()


def client(port, conns, mib):
    block = os.urandom(1 << 20)
    start = time.time()
    for _ in range(conns):
        s = socket.create_connection(("127.0.0.1", port))

        def writer():
            for _ in range(mib):
                s.sendall(block)
            s.shutdown(socket.SHUT_WR)

        t = threading.Thread(target=writer)
        t.start()
        got = 0
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            got += len(b)
        t.join()
        s.close()
        if got != mib << 20:
            sys.exit("echo cut short: %d of %d bytes" % (got, mib << 20))
    print("rate=%.1f" % (conns * (mib << 20) / (time.time() - start) / 1e6))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
