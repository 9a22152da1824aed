#!/usr/bin/env python3
"""A small redis client on the Linux kernel's own SMC (an AF_SMC socket in a
process without the shim): the kernel-side peer of a real server under
smc_run in tests/guest/interop_test.sh.

  af_smc_redis.py IP PORT [HOOK]

SET of a 1 MiB random value and GET back, 500 pipelined INCRs, 100 small
SET/GETs, then (while the connection is up) runs HOOK (a shell command: the
kernel's link-group dump), and ends with SHUTDOWN NOSAVE. Prints
"af_smc_redis: ok=0|1 ..." and exits 0 when every reply was right.
"""
import ctypes
import os
import socket
import struct
import subprocess
import sys

AF_SMC = 43


def smc_connect(ip, port):
    s = socket.socket(AF_SMC, socket.SOCK_STREAM, 0)
    # Python cannot pass an address for a family it does not know: connect()
    # through libc with a struct sockaddr_in (AF_SMC takes AF_INET addresses).
    addr = struct.pack("=HH4s8x", socket.AF_INET, socket.htons(port), socket.inet_aton(ip))
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(addr, len(addr))
    if libc.connect(s.fileno(), buf, len(addr)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return s


def command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Reader:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def _fill(self):
        b = self.s.recv(1 << 20)
        if not b:
            raise EOFError("server closed the connection")
        self.buf += b

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l

    def reply(self):
        l = self.line()
        if l[:1] in (b"+", b"-", b":"):
            return l
        if l[:1] == b"$":
            n = int(l[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        raise ValueError(f"unexpected reply {l[:40]!r}")


def main():
    ip, port = sys.argv[1], int(sys.argv[2])
    hook = sys.argv[3] if len(sys.argv) > 3 else ""
    s = smc_connect(ip, port)
    r = Reader(s)
    checks = []
    big = os.urandom(1 << 20)
    s.sendall(command("SET", "big", big) + command("GET", "big"))
    checks.append(r.reply() == b"+OK")
    checks.append(r.reply() == big)
    s.sendall(b"".join(command("INCR", "n") for _ in range(500)))
    replies = [r.reply() for _ in range(500)]
    checks.append(replies[-1] == b":500")
    for i in range(100):
        s.sendall(command("SET", f"k{i}", f"v{i}" * 10) + command("GET", f"k{i}"))
        checks.append(r.reply() == b"+OK" and r.reply() == (f"v{i}" * 10).encode())
    if hook:
        sys.stdout.write(subprocess.run(hook, shell=True, capture_output=True, text=True).stdout)
    s.sendall(command("SHUTDOWN", "NOSAVE"))
    try:  # redis closes the connection without a reply
        r.reply()
    except (EOFError, ConnectionError):
        pass
    ok = all(checks)
    print(f"af_smc_redis: ok={1 if ok else 0} checks={sum(checks)}/{len(checks)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
