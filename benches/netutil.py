"""Network helpers shared by the Python benchmarks (fleet.py, remote-transports.py)."""

import socket


def free_port():
    """A TCP port of 127.0.0.1 that nothing listens on at the moment of asking."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
