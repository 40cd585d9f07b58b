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
    """Accepts every connection, reads nothing, sends nothing, and closes them all on `stop`."""

    def __init__(self) -> None:
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

    def __enter__(self) -> StalledServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        for connection in self._held:
            connection.close()
        self._listener.close()
