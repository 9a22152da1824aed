"""connect() on a duplicate of a socket that is not connected yet.

The client makes a socket, duplicates it (dup: libc's dup(); fdupfd:
os.dup(), which is fcntl(F_DUPFD_CLOEXEC)), closes the original and
connects the duplicate; it sends 1 MiB and reads it back from an echo
server. Prints "<mode> echoed=<bytes> intact=<yes|no>".
"""
import ctypes
import hashlib
import os
import socket
import sys
import threading

from sockutil import echo_until_eof, listen_local, recv_up_to

N = 1 << 20


def client(port, mode):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if mode == "dup":
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.dup(s.fileno())
    else:
        fd = os.dup(s.fileno())
    if fd < 0:
        raise OSError(ctypes.get_errno(), "dup")
    s.close()
    c = socket.socket(fileno=fd)
    c.connect(("127.0.0.1", port))
    payload = os.urandom(N)

    def write():  # while the echo is read: more than both buffers hold
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)

    writer = threading.Thread(target=write)
    writer.start()
    back = recv_up_to(c, N + 1)
    writer.join()
    c.close()
    same = hashlib.sha256(back).digest() == hashlib.sha256(payload).digest()
    print("%s echoed=%d intact=%s" % (mode, len(back), "yes" if same else "no"), flush=True)


def main(port, mode):
    listener = listen_local(port, 1)
    pid = os.fork()
    if pid == 0:
        listener.close()
        try:
            client(port, mode)
        except Exception as e:  # said, and the server's echo ends
            print("%s failed: %r" % (mode, e), flush=True)
        os._exit(0)
    s, _ = listener.accept()
    echo_until_eof(s)
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
