"""Network peers for tests of fetching code: a host that accepts connections and never answers
(no vLLM; stdlib only)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator


@contextlib.contextmanager
def silent_host(backlog: int = 64) -> Iterator[tuple[str, list[socket.socket]]]:
    """``http://127.0.0.1:<port>``, accepting connections and never answering, and the
    sockets it accepted so far (a list that grows as connections come)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        listener.close()
        for conn in accepted:
            conn.close()


def settled(accepted: list, at_least: int, limit_s: float = 60.0) -> int:
    """How many connections a :func:`silent_host` accepted, once its accept thread has caught
    up with the ``at_least`` a client opened (polled: a state, not a time; ``limit_s`` only
    ends a broken test)."""
    end = time.monotonic() + limit_s
    while len(accepted) < at_least and time.monotonic() < end:
        time.sleep(0.01)
    return len(accepted)
