#!/usr/bin/env python3
"""A process that connects to its own listener, the ways real programs do.

  same-thread   connect(), then accept() in the same thread (a TCP socketpair)
  event-loop    asyncio server and client in one event loop
  thread        accept() blocked in another thread first (served: SMC-R)
  server-thread a socketserver in another thread, waiting in poll() (served)

Each mode moves bytes both ways and checks them; it prints one line
"mode=... ok=1 connect_s=..." and exits 0 when every exchange was intact.
"""
import asyncio
import socket
import socketserver
import sys
import threading
import time

from sockutil import recv_up_to

N = 5
PAYLOAD = bytes(range(256)) * 400  # 100 KiB


def exchange(a, b):
    a.sendall(PAYLOAD)
    got = recv_up_to(b, len(PAYLOAD))
    b.sendall(b"done")
    return got == PAYLOAD and a.recv(4) == b"done"


def pairs(accept_in_thread):
    """N connections to our own listener, accepted after connect() returns
    in this thread, or by a thread already blocked in accept()."""
    ok, worst = True, 0.0
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        for _ in range(N):
            got = {}
            t = threading.Thread(target=lambda: got.setdefault("a", srv.accept()[0]))
            if accept_in_thread:
                t.start()
                time.sleep(0.05)  # in accept() by now
            t0 = time.monotonic()
            c = socket.create_connection(srv.getsockname(), timeout=30)
            worst = max(worst, time.monotonic() - t0)
            if accept_in_thread:
                t.join()
            else:
                got["a"] = srv.accept()[0]
            ok = exchange(c, got["a"]) and ok
            c.close()
            got["a"].close()
    return ok, worst


def server_thread():
    class Echo(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.sendall(recv_up_to(self.request, len(PAYLOAD))[::-1])

    ok, worst = True, 0.0
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo) as srv:
        t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.5})
        t.start()
        time.sleep(0.1)  # in poll() by now
        for _ in range(N):
            t0 = time.monotonic()
            c = socket.create_connection(srv.server_address, timeout=30)
            worst = max(worst, time.monotonic() - t0)
            c.sendall(PAYLOAD)
            ok = recv_up_to(c, len(PAYLOAD)) == PAYLOAD[::-1] and ok
            c.close()
        srv.shutdown()
        t.join()
    return ok, worst


def event_loop():
    async def run():
        async def handle(r, w):
            data = await r.readexactly(len(PAYLOAD))
            w.write(data[::-1])
            await w.drain()
            w.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        ok, worst = True, 0.0
        for _ in range(N):
            t0 = time.monotonic()
            r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
            worst = max(worst, time.monotonic() - t0)
            w.write(PAYLOAD)
            await w.drain()
            ok = (await r.readexactly(len(PAYLOAD))) == PAYLOAD[::-1] and ok
            w.close()
        srv.close()
        await srv.wait_closed()
        return ok, worst

    return asyncio.run(run())


def main():
    mode = sys.argv[1]
    run = {
        "same-thread": lambda: pairs(False),
        "thread": lambda: pairs(True),
        "server-thread": server_thread,
        "event-loop": event_loop,
    }[mode]
    ok, worst = run()
    print("mode=%s ok=%d connect_s=%.3f" % (mode, 1 if ok else 0, worst))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
