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
