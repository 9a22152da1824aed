"""A blocking recv larger than the RMB while the writer streams (read_fill_test.sh).

  read_fill.py server PORT blocking|nonblocking   prints reads=N over_rmb=K max=M bytes=B ok=0|1
  read_fill.py client PORT MIB                    streams MIB MiB in 1 MiB sendall calls, then closes
"""
import os
import select
import socket
import sys

RMB = 65536  # the test's SMCR_RMB_SIZE


def pattern(n):
    block = bytes(range(256)) * 4096  # 1 MiB
    return block[:n]


def serve(port, mode):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(1)
    print("listening", flush=True)
    c, _ = listener.accept()
    if mode == "nonblocking":
        c.setblocking(False)
    sizes, total, ok = [], 0, True
    while True:
        if mode == "nonblocking":
            select.select([c], [], [])
            try:
                b = c.recv(1 << 20)
            except BlockingIOError:
                continue
        else:
            b = c.recv(1 << 20)
        if not b:
            break
        # The stream is bytes 0..255 repeated: each byte is its offset mod 256.
        start = total % 256
        if b != (bytes(range(256)) * (len(b) // 256 + 2))[start:start + len(b)]:
            ok = False
        sizes.append(len(b))
        total += len(b)
    print("reads=%d over_rmb=%d max=%d bytes=%d ok=%d" % (
        len(sizes), sum(1 for s in sizes if s > RMB), max(sizes or [0]), total, ok), flush=True)


def client(port, mib):
    s = socket.create_connection(("127.0.0.1", port))
    block = pattern(1 << 20)
    for _ in range(mib):
        s.sendall(block)
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]), sys.argv[3])
    else:
        client(int(sys.argv[2]), int(sys.argv[3]))
