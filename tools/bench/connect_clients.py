# N clients one after the other: connect, send, read the echo, close; prints
# how many were served and the connect-to-first-byte latencies.
# usage: connect_clients.py PORT N
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
lat, ok = [], 0
t0 = time.time()
for i in range(n):
    t = time.time()
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"ping %d" % i)
    if s.recv(100) == b"ping %d" % i: ok += 1
    lat.append(time.time() - t); s.close()
lat.sort()
print("served=%d total_s=%.3f p50_ms=%.2f p99_ms=%.2f" % (ok, time.time() - t0, 1000 * lat[len(lat) // 2], 1000 * lat[int(len(lat) * 0.99) - 1]))
