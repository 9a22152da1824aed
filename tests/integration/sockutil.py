"""Helpers shared by the Python test programs here."""


def recv_up_to(sock, n):
    """Reads until n bytes came or the peer closed; returns what came."""
    got = b""
    while len(got) < n:
        chunk = sock.recv(min(65536, n - len(got)))
        if not chunk:
            break
        got += chunk
    return got


def listen_local(port, backlog):
    """A listening socket on 127.0.0.1:port (SO_REUSEADDR)."""
    import socket
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(backlog)
    return listener


def echo_until_eof(sock):
    """Sends back everything read until the peer's end; closes the socket."""
    while True:
        b = sock.recv(65536)
        if not b:
            break
        sock.sendall(b)
    sock.close()
