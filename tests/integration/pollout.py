# When a socket reports POLLOUT and POLLHUP, as TCP's rules have it
# (pollout_test.sh). One process, a server thread and a client:
#  1. the client fills the connection (non-blocking sends until EAGAIN); the
#     server reads 5000 bytes: POLLOUT stays off (TCP: until a third of its
#     send buffer is free), so a poll-then-blocking-write program (socat)
#     never blocks in a write that does not fit; once the server has read
#     everything, POLLOUT comes back;
#  2. the client fills it again and shuts down writing: POLLOUT at once (a
#     write then fails at once), and POLLHUP once the server has read
#     everything and closed, before the client has read the server's
#     last bytes.
# Prints one key=value line per step.
import select, socket, sys, threading, time
port = int(sys.argv[1])
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port)); ls.listen(1)
steps = {}
drain_more = threading.Event(); drain_all = threading.Event(); finish = threading.Event()
def server():
    c, _ = ls.accept()
    drain_more.wait(10)
    steps["drained_first"] = len(c.recv(5000))
    drain_all.wait(10)
    c.setblocking(False)
    total = 0
    until = time.time() + 10
    while time.time() < until:   # everything the client sent, until its end
        try:
            b = c.recv(1 << 20)
        except BlockingIOError:
            select.select([c], [], [], 0.2); continue
        if not b: break
        total += len(b)
    steps["server_read"] = total
    c.setblocking(True)
    c.sendall(b"bye" * 1000)     # the client reads these after POLLHUP
    c.close()
    finish.set()
t = threading.Thread(target=server); t.start()
s = socket.create_connection(("127.0.0.1", port))
s.setblocking(False)
def fill():
    n = 0
    try:
        while True: n += s.send(b"x" * 8192)
    except BlockingIOError:
        pass
    return n
def revents(mask, wait_ms):
    p = select.poll(); p.register(s, mask)
    ev = p.poll(wait_ms)
    return ev[0][1] if ev else 0
filled = fill()
drain_more.set(); time.sleep(0.5)
after_small = revents(select.POLLOUT, 500)
print("step1 filled=%d pollout_after_5000=%d" % (filled, 1 if after_small & select.POLLOUT else 0), flush=True)
# Step 2 starts from here: the window is nearly full still; shut it.
s.shutdown(socket.SHUT_WR)
after_shut = revents(select.POLLOUT, 500)
drain_all.set(); finish.wait(15)
time.sleep(0.3)
ev = revents(select.POLLIN | select.POLLRDHUP, 2000)
got = b""
s.setblocking(True)
while True:
    b = s.recv(65536)
    if not b: break
    got += b
print("step2 pollout_after_shut=%d pollhup_before_reading=%d server_read=%d tail_intact=%d" % (
    1 if after_shut & select.POLLOUT else 0, 1 if ev & select.POLLHUP else 0,
    steps.get("server_read", -1), 1 if got == b"bye" * 1000 else 0), flush=True)
t.join()
