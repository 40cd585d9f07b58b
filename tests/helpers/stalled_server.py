# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A Hub that accepts TCP connections and never answers, on 127.0.0.1, for the timeout tests (issue 27, item 3).

Examples:
    >>> with StalledServer() as server:  # doctest: +SKIP
    ...     server.url
    'http://127.0.0.1:...'
"""

from __future__ import annotations

import socket
import threading


class StalledServer:
    """Accepts every connection, reads nothing, sends nothing, and closes them all on `stop`.

    With `headers=True` it answers each request's first bytes with the headers of a 200 of 1000 bytes, then sends
    nothing more (a Hub that stalls mid-answer).
    """

    def __init__(self, *, headers: bool = False) -> None:
        self.headers = headers
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)  # so that the accepting thread sees `stop` within 0.2 s
        self._held: list[socket.socket] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="stalled-hub", daemon=True)
        self.accepted = 0

    @property
    def url(self) -> str:
        """The endpoint, for `HF_ENDPOINT`."""
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(connection)
            self.accepted += 1
            if self.headers:
                threading.Thread(target=self._headers_then_silence, args=(connection,), daemon=True).start()

    @staticmethod
    def _headers_then_silence(connection: socket.socket) -> None:
        try:
            connection.recv(65536)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
                b"X-Repo-Commit: " + b"0" * 40 + b'\r\nETag: "0"\r\n\r\n'
            )
        except OSError:
            pass

    def __enter__(self) -> StalledServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        for connection in self._held:
            connection.close()
        self._listener.close()
