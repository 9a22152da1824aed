"""A server that hands its accepted connection to a program it starts without
fork(): system(), posix_spawn, CPython's subprocess (a vfork child that execs),
popen(); or to a worker process over SCM_RIGHTS. The program reads the
client's 6 bytes from the connection and writes one line into it; then the
server writes its own line and closes.

  spawn_case.py server KIND PORT    serve one client
  spawn_case.py client PORT         prints ok=1 when both lines are right
  spawn_case.py worker FD           scm_rights' worker (FD: its Unix socket)
  spawn_case.py server handoff_spawn|handoff_spawn_dup2|handoff_subprocess|handoff_scm|handoff_scm_named|handoff_scm_parent PORT
                                    start the program (or send the connection
                                    to a worker: a child, a process that is
                                    none, or the parent of the child that
                                    accepted), close, exit at once
  spawn_case.py client_stream PORT MIB KIND   stream MIB MiB through it, check all

KIND: system | posix_spawn | subprocess | subprocess_stdio | popen | scm_rights
scm_rights: the worker, started before the connection exists (its own
program: no fork shares the connection), receives it over a Unix socket,
and writes the peer port getpeername() gives it too.
posix_spawn's and subprocess' programs (Python) also write the peer port
getpeername() gives them: the client checks it is its own.
subprocess_stdio hands the connection over as the program's stdin and
stdout (dup2 onto 0 and 1 in the vfork child); the server then checks that
its own stdin (/dev/null) is still its own: end-of-file at once."""
import ctypes
import os
import socket
import subprocess
import sys


def peer_prog(fd):
    """A program that reads the client's 6 bytes from descriptor `fd` and
    writes them back with the peer port getpeername() gives it."""
    return ("import socket, sys\n"
            "s = socket.socket(fileno=%d)\n"
            "got = b''\n"
            "while len(got) < 6:\n"
            "    b = s.recv(6 - len(got))\n"
            "    if not b: break\n"
            "    got += b\n"
            "s.sendall(b'child:' + got + b' ' + str(s.getpeername()[1]).encode() + b'\\n')\n"
            "s.detach()\n" % fd)


def echo_prog(fd):
    """A program that writes the peer port getpeername() gives it on
    descriptor `fd` as a line, then echoes what it reads until end-of-file."""
    return ("import socket\n"
            "s = socket.socket(fileno=%d)\n"
            "s.sendall(str(s.getpeername()[1]).encode() + b'\\n')\n"
            "while True:\n"
            "    b = s.recv(1 << 16)\n"
            "    if not b: break\n"
            "    s.sendall(b)\n"
            "s.close()\n" % fd)


def echo_worker(fd):
    """handoff_scm's worker: receives one connection over its Unix socket
    and serves it as echo_prog does."""
    unix = socket.socket(fileno=fd)
    _, fds, _, _ = socket.recv_fds(unix, 1, 1)
    unix.close()
    exec(echo_prog(fds[0]))


def echo_worker_named(path):
    """handoff_scm_named's worker, no child of the server (started through a
    shell that exits): receives one connection on the named Unix socket
    `path` and serves it as echo_prog does."""
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path + ".tmp")
    unix.listen(1)
    os.rename(path + ".tmp", path)   # bound and listening once the name is there
    conn, _ = unix.accept()
    unix.close()
    os.unlink(path)
    _, fds, _, _ = socket.recv_fds(conn, 1, 1)
    conn.close()
    exec(echo_prog(fds[0]))


def accept_one(port):
    """Listens on `port` and accepts one client."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(4)
    conn, _ = listener.accept()
    listener.close()
    return conn


def handoff_to_parent(port):
    """handoff_scm_parent: a forked child accepts the client, sends the
    connection to its parent over a socket pair and exits at once; the
    parent serves it as echo_prog does."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        conn = accept_one(port)
        socket.send_fds(theirs, [b"c"], [conn.fileno()])
        conn.close()
        print("server child: handed over to the parent, exiting", flush=True)
        os._exit(0)
    theirs.close()
    _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    os.waitpid(pid, 0)   # the sender is gone before the first byte is served
    exec(echo_prog(fds[0]))
    sys.exit(0)


def handoff(kind, port):
    """Accepts one client, starts a program that serves it alone (posix_spawn
    of an echo program, or subprocess with the connection as cat's stdin and
    stdout), closes its own copy and exits at once: the program keeps the
    connection as a TCP socket's file would live on in it."""
    if kind == "handoff_scm_parent":
        handoff_to_parent(port)
    if kind == "handoff_scm_named":
        import tempfile
        import time
        path = os.path.join(tempfile.mkdtemp(), "worker.sock")
        subprocess.run(["sh", "-c", '"$0" "$1" echo_worker_named "$2" </dev/null >/dev/null 2>&1 &',
                        sys.executable, __file__, path], check=True)
        for _ in range(500):
            if os.path.exists(path):
                break
            time.sleep(0.01)
        ours = socket.socket(socket.AF_UNIX)
        ours.connect(path)
    if kind in ("handoff_scm", "handoff_used_scm"):
        ours, theirs = socket.socketpair()
        subprocess.Popen([sys.executable, __file__, "echo_worker", str(theirs.fileno())], pass_fds=[theirs.fileno()])
        theirs.close()
    conn = accept_one(port)
    fd = conn.fileno()
    if kind == "handoff_used_scm":  # a read first (nothing there yet: EAGAIN), as a dispatcher's
        conn.setblocking(False)
        try:
            conn.recv(1)
        except BlockingIOError:
            pass
        conn.setblocking(True)
    if kind in ("handoff_scm", "handoff_scm_named", "handoff_used_scm"):
        socket.send_fds(ours, [b"c"], [fd])
    elif kind == "handoff_spawn":
        os.set_inheritable(fd, True)
        os.posix_spawn(sys.executable, [sys.executable, "-c", echo_prog(fd)], os.environ)
    elif kind == "handoff_spawn_dup2":  # close-on-exec, duplicated onto cat's 0 and 1 by the file actions
        os.posix_spawn("/bin/cat", ["cat"], os.environ,
                       file_actions=[(os.POSIX_SPAWN_DUP2, fd, 0), (os.POSIX_SPAWN_DUP2, fd, 1)])
    else:
        if kind == "handoff_used_subprocess":  # the server writes first (a CGI-style header)
            conn.sendall(str(conn.getpeername()[1]).encode() + b"\n")
        subprocess.Popen(["cat"], stdin=conn, stdout=conn)
    conn.close()
    print("server: handed over, exiting", flush=True)
    sys.exit(0)


def client_stream(port, megabytes, port_line):
    """Streams `megabytes` MiB through the program and checks every byte came
    back, and the port line first if `port_line`."""
    import hashlib
    import threading
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(60)
    f = s.makefile("rb")
    line = f.readline().rstrip(b"\n") if port_line else str(s.getsockname()[1]).encode()
    total = megabytes << 20
    sent = hashlib.sha256()

    def write():
        block = bytes(range(256)) * 256
        left = total
        i = 0
        while left > 0:
            chunk = bytes([i & 0xFF]) + block[1:min(len(block), left)]
            sent.update(chunk)
            s.sendall(chunk)
            left -= len(chunk)
            i += 1
        s.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=write)
    t.start()
    got = hashlib.sha256()
    n = 0
    while True:
        b = f.read1(1 << 16)
        if not b:
            break
        got.update(b)
        n += len(b)
    t.join()
    ok = n == total and got.digest() == sent.digest() and line == str(s.getsockname()[1]).encode()
    print("client: %d of %d bytes back, port line %r, ok=%d" % (n, total, line, ok))
    sys.exit(0 if ok else 1)


def worker(fd):
    unix = socket.socket(fileno=fd)
    _, fds, _, _ = socket.recv_fds(unix, 1, 1)
    s = socket.socket(fileno=fds[0])
    got = b""
    while len(got) < 6:
        b = s.recv(6 - len(got))
        if not b:
            break
        got += b
    s.sendall(b"child:" + got + b" " + str(s.getpeername()[1]).encode() + b"\n")
    s.close()
    unix.sendall(b"k")


def serve(kind, port):
    if kind == "scm_rights":
        ours, theirs = socket.socketpair()
        helper = subprocess.Popen([sys.executable, __file__, "worker", str(theirs.fileno())],
                                  pass_fds=[theirs.fileno()])
        theirs.close()
    conn = accept_one(port)
    fd = conn.fileno()
    shell = 'printf "child:%%s\\n" "$(head -c 6 <&%d)" >&%d' % (fd, fd)
    if kind in ("system", "posix_spawn", "popen"):
        os.set_inheritable(fd, True)
    if kind == "system":
        status = os.system("sh -c '%s'" % shell)
    elif kind == "posix_spawn":
        pid = os.posix_spawn(sys.executable, [sys.executable, "-c", peer_prog(fd)], os.environ)
        status = os.waitpid(pid, 0)[1]
    elif kind == "subprocess":
        status = subprocess.run([sys.executable, "-c", peer_prog(fd)], pass_fds=[fd]).returncode
    elif kind == "subprocess_stdio":
        status = subprocess.run(["sh", "-c", 'printf "child:%s\\n" "$(head -c 6)"'], stdin=conn,
                                stdout=conn).returncode
    elif kind == "scm_rights":
        socket.send_fds(ours, [b"c"], [fd])
        ours.recv(1)  # the worker is done with it
        status = helper.wait()
    elif kind == "popen":
        libc = ctypes.CDLL(None)
        libc.popen.restype = ctypes.c_void_p
        libc.popen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        libc.pclose.argtypes = [ctypes.c_void_p]
        f = libc.popen(("sh -c '%s'" % shell).encode(), b"r")
        status = libc.pclose(f) if f else -1
    else:
        sys.exit("unknown kind " + kind)
    conn.sendall(b"server:done\n")
    conn.close()
    own_stdin = os.read(0, 1) == b"" if kind == "subprocess_stdio" else True
    print("server status=%s own_stdin=%d" % (status, own_stdin), flush=True)
    sys.exit(0 if status == 0 and own_stdin else 1)


def client(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    s.sendall(b"hello!")
    f = s.makefile("rb")
    lines = [f.readline(), f.readline()]
    print("client got %r" % lines)
    first = lines[0].rstrip(b"\n").split(b" ")
    ok = (first[0] == b"child:hello!" and lines[1] == b"server:done\n"
          and (len(first) == 1 or first[1] == str(s.getsockname()[1]).encode()))
    print("ok=%d" % ok)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if sys.argv[1] == "server" and sys.argv[2].startswith("handoff_"):
        handoff(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "server":
        serve(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "client_stream":
        client_stream(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] not in ("handoff_subprocess", "handoff_spawn_dup2"))
    elif sys.argv[1] == "echo_worker_named":
        echo_worker_named(sys.argv[2])
    elif sys.argv[1] == "echo_worker":
        echo_worker(int(sys.argv[2]))
    elif sys.argv[1] == "worker":
        worker(int(sys.argv[2]))
    else:
        client(int(sys.argv[2]))
