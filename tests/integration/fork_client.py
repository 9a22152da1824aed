# An echo client for tests/integration/fork_servers.py: sends SIZE random
# bytes (paced: PACE seconds between MBs), half-closes, reads the echo to
# end-of-file and prints echo=ok or echo=BAD(got/size).
#   fork_client.py PORT SIZE [PACE [fork]]
import hashlib, os, socket, sys, threading, time
port, size = int(sys.argv[1]), int(sys.argv[2])
pace = float(sys.argv[3]) if len(sys.argv) > 3 else 0   # seconds between MBs
s = socket.create_connection(("127.0.0.1", port))
if len(sys.argv) > 4 and sys.argv[4] == "fork":   # a child uses what its parent connected
    pid = os.fork()
    if pid:
        s.close(); os.waitpid(pid, 0); sys.exit(0)
data = os.urandom(size)
def writer():
    if pace:
        for off in range(0, size, 1 << 20):
            s.sendall(data[off:off + (1 << 20)]); time.sleep(pace)
    else:
        s.sendall(data)
    s.shutdown(socket.SHUT_WR)   # request, then half-close
t = threading.Thread(target=writer); t.start()
got = bytearray()
while True:
    b = s.recv(1 << 20)
    if not b: break
    got += b
t.join()
print("echo=%s" % ("ok" if hashlib.sha256(got).digest() == hashlib.sha256(data).digest() else "BAD(%d/%d)" % (len(got), size)))
