# A client that declines the server's Accept (RFC 7609 C.3: a Decline where
# the Confirm belongs), late enough that the server's accept() has returned
# (the Confirm deferred): both must go on over TCP, no byte lost, as when
# the server awaited the Confirm inside accept(). Run as
#   decline_after_accept.py server PORT   and
#   decline_after_accept.py client PORT
# the client under SMCR_TEST_DECLINE_AFTER_ACCEPT=1 SMCR_TEST_CONFIRM_DELAY_MS=300.
# The first connection is a first contact (the group the second joins); the
# second is the case: the server writes before the client's answer came.
import os, socket, subprocess, sys, time

role = sys.argv[1]
if role == "server":
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", int(sys.argv[2])))
    l.listen(4)
    s1, _ = l.accept()
    s1.sendall(s1.recv(1))
    s, _ = l.accept()
    data, err = b"", "none"
    try:
        s.sendall(b"banner")
        while len(data) < 4000:
            k = s.recv(65536)
            if not k:
                break
            data += k
        s.sendall(data.replace(b"ping", b"pong"))
        s.shutdown(socket.SHUT_WR)
        s.recv(1)  # the client's end of stream
    except OSError as e:
        err = e.strerror
    ok = data == b"ping" * 1000 and err == "none"
    print("server: ok=%d error=%s bytes=%d" % (ok, err, len(data)))
    sys.exit(0 if ok else 1)
else:
    addr = ("127.0.0.1", int(sys.argv[2]))
    c1 = socket.create_connection(addr)
    c1.sendall(b"a")
    assert c1.recv(1) == b"a"
    c = socket.create_connection(addr)
    c.sendall(b"ping" * 1000)
    data, err = b"", "none"
    try:
        while True:
            k = c.recv(65536)
            if not k:
                break
            data += k
    except OSError as e:
        err = e.strerror
    c.close()
    print("client: ok=%d error=%s bytes=%d" % (data == b"banner" + b"pong" * 1000, err, len(data)))
    # The group as the client sees it (SMCR_STAT: tools/smcr_stat): the
    # server's RMB of the declined connection, announced by its CONFIRM
    # RKEY, must be announced gone too.
    stat = os.environ.get("SMCR_STAT")
    for _ in range(40 if stat else 0):
        out = subprocess.run([stat, "--raw", "--pid", str(os.getpid())], capture_output=True, text=True).stdout
        groups = [l.strip() for l in out.splitlines() if l.strip().startswith("group ")]
        if groups and "peer_rmbs=1 " in groups[0]:
            break
        time.sleep(0.05)
    if stat:
        print("client group:", *groups)
