# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A folder's size polled in a thread, for the disk-budget test and benchmark of Hub sweeps."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


class CacheSize:
    """The bytes of regular files under a folder, polled in a thread while in use; `peak` is the largest seen.

    Args:
        folder: The folder to measure (a Hugging Face cache).
        interval: Seconds between polls.
    """

    def __init__(self, folder: Path, *, interval: float = 0.005):
        self.folder, self.interval, self.peak, self._stop = folder, interval, 0, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def now(self) -> int:
        """Bytes of the regular files under the folder now (symbolic links not counted)."""
        total = 0
        for root, _, files in os.walk(self.folder):
            for name in files:
                path = os.path.join(root, name)
                try:
                    total += 0 if os.path.islink(path) else os.path.getsize(path)
                except OSError:  # deleted meanwhile
                    pass
        return total

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.now())
            time.sleep(self.interval)

    def __enter__(self) -> CacheSize:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
