# A single-threaded echo server (select, then a blocking accept()), the kind
# a handshake held in accept() would stall: used by the stalling-clients test
# and benchmark. usage: stall_server.py PORT
import select, socket, sys
port = int(sys.argv[1])
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", port)); l.listen(256)
socks = [l]
while True:
    for s in select.select(socks, [], [])[0]:
        if s is l:
            c, _ = l.accept(); socks.append(c); continue
        try: b = s.recv(65536)
        except OSError: b = b""
        if b:
            try: s.sendall(b)
            except OSError: pass
        else:
            socks.remove(s); s.close()
