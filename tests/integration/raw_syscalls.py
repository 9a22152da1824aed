"""System calls made with syscall() rather than libc's wrappers.

libuv (Node.js) closes every descriptor with syscall(SYS_close, fd). Past
the shim, the SMC-R connection stayed in its table under that number: the
peer never saw the end, and the next socket() to get the number answered
connect() with EISCONN from the dead connection (Node's HTTP client failed
every request after the first few).

The client (a forked child of the echo server):
  - routed: on an SMC-R connection, write, read, getpeername and close with
    syscall() as the application sees it (the shim's export): the echo
    intact, the peer's address, and the close ends the connection;
  - reuse: a new socket gets that number and connects and echoes;
  - bypass: closes a connection with libc's own syscall() (dlsym in
    libc.so.6, past the shim, as a raw system call or io_uring would): the
    next socket() that gets the number still connects and echoes, and the
    old connection ends.
  - dup_over: a pipe duplicated onto a connection's number with
    syscall(SYS_dup3): the connection ends, the number is the pipe's.
The server counts the connections whose end it saw. One line per step; the
test compares them with plain TCP's and checks SMC-R from the counters.
"""
import ctypes
import hashlib
import os
import select
import socket
import sys
import threading

from sockutil import echo_until_eof, listen_local, recv_up_to

N = 256 * 1024
# x86_64 and aarch64 numbers (asm-generic for the latter).
if os.uname().machine == "x86_64":
    SYS_READ, SYS_WRITE, SYS_CLOSE, SYS_GETPEERNAME, SYS_DUP3 = 0, 1, 3, 52, 292
else:
    SYS_READ, SYS_WRITE, SYS_CLOSE, SYS_GETPEERNAME, SYS_DUP3 = 63, 64, 57, 205, 24


def syscall_of(lib):
    f = lib.syscall
    f.restype = ctypes.c_long
    return lambda *args: f(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])


# The process's syscall(): the shim's when it is preloaded.
app_syscall = syscall_of(ctypes.CDLL(None, use_errno=True))
# libc's own, looked up in libc.so.6 itself: never the shim's.
libc_syscall = syscall_of(ctypes.CDLL("libc.so.6", use_errno=True))


def echo_once(c):
    payload = os.urandom(N)
    writer = threading.Thread(target=c.sendall, args=(payload,))
    writer.start()
    back = recv_up_to(c, N)
    writer.join()
    return hashlib.sha256(back).digest() == hashlib.sha256(payload).digest()


def raw_echo(fd):
    payload = os.urandom(N)
    out = ctypes.create_string_buffer(payload, N)

    def write():
        sent = 0
        while sent < N:
            n = app_syscall(SYS_WRITE, fd, ctypes.byref(out, sent), N - sent)
            if n <= 0:
                raise OSError(ctypes.get_errno(), "raw write")
            sent += n

    writer = threading.Thread(target=write)
    writer.start()
    back = ctypes.create_string_buffer(N)
    got = 0
    while got < N:
        n = app_syscall(SYS_READ, fd, ctypes.byref(back, got), N - got)
        if n <= 0:
            break
        got += n
    writer.join()
    return got == N and back.raw == payload


def saw_end(ends):
    """Whether the server saw one more connection end (within 10 s)."""
    if not select.select([ends], [], [], 10)[0]:
        return False
    return os.read(ends, 1) == b"x"


def client(port, ends):
    c = socket.create_connection(("127.0.0.1", port))
    echo_once(c)  # the connection is in place before the raw calls
    fd = c.detach()
    intact = raw_echo(fd)
    addr = ctypes.create_string_buffer(128)
    alen = ctypes.c_uint32(128)
    rc = app_syscall(SYS_GETPEERNAME, fd, addr, ctypes.byref(alen))
    peer_port = int.from_bytes(addr.raw[2:4], "big") if rc == 0 else -ctypes.get_errno()
    closed = app_syscall(SYS_CLOSE, fd)
    print("routed: echo intact=%s peer port right=%s close=%d, the server saw the end=%s"
          % (intact, peer_port == port, closed, saw_end(ends)), flush=True)

    d = socket.socket()
    same = d.fileno() == fd
    d.connect(("127.0.0.1", port))
    intact = echo_once(d)
    d.close()
    print("reuse: same number=%s echo intact=%s, the server saw the end=%s" % (same, intact, saw_end(ends)),
          flush=True)

    e = socket.create_connection(("127.0.0.1", port))
    echo_once(e)
    efd = e.detach()
    closed = libc_syscall(SYS_CLOSE, efd)
    f = socket.socket()
    same = f.fileno() == efd
    try:
        f.connect(("127.0.0.1", port))
        result = "echo intact=%s" % echo_once(f)
    except OSError as err:
        result = "connect failed: %s" % os.strerror(err.errno)
    # The old connection's end: at the latest when the number was reused.
    print("bypass: close=%d same number=%s %s, the server saw the old one end=%s"
          % (closed, same, result, saw_end(ends)), flush=True)
    f.close()
    print("last: the server saw the end=%s" % saw_end(ends), flush=True)

    # A descriptor the shim does not know duplicated onto a connection's
    # number with syscall(): the connection is closed, the number is the
    # pipe's (libc's write through the shim reaches the pipe).
    g = socket.create_connection(("127.0.0.1", port))
    echo_once(g)
    gfd = g.detach()
    r, w = os.pipe()
    rc = app_syscall(SYS_DUP3, w, gfd, 0)
    try:
        written = os.write(gfd, b"pipe") == 4
    except OSError:
        written = False
    ready = select.select([r], [], [], 2)[0]
    got = os.read(r, 4) if ready else b""
    print("dup_over: dup3 returned the number=%s, a write on it reaches the pipe=%s, the server saw the connection end=%s"
          % (rc == gfd, written and got == b"pipe", saw_end(ends)), flush=True)
    for n in (gfd, r, w):
        os.close(n)


def main(port):
    listener = listen_local(port, 8)
    ends, ended = os.pipe()
    pid = os.fork()
    if pid == 0:
        listener.close()
        os.close(ended)
        try:
            client(port, ends)
        except Exception as e:
            print("client failed: %r" % e, flush=True)
        os._exit(0)
    os.close(ends)
    for _ in range(5):
        s, _ = listener.accept()

        def serve(sock=s):
            echo_until_eof(sock)  # returns at the client's end; raises on a reset
            os.write(ended, b"x")

        threading.Thread(target=serve, daemon=True).start()
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main(int(sys.argv[1]))
