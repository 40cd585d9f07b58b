# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe's results directory: a sweep's layout (config.json, rows.jsonl, reference/, tangents/), so that
`SweepResult.load`, its plots, its report and the CLI's ``report`` read it unchanged.

It reuses `SweepStore`'s public methods (the directory lock, the checked reading of rows, the tangent paths) and
writes rows.jsonl itself, atomically (`write_atomically`), from the rows it holds in memory: a window costs no
re-reading of the file. Writes are batched: at most one every `flush_seconds` (and always at `close`), so that a
window every step does not pay a disk flush every step.

A results directory holding a live run with the same settings is resumed: its rows before `start_step` are kept,
the later ones (a run restarted from an earlier checkpoint) are replaced as the new windows close.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from ..commons.files import write_atomically
from ..errors import ConfigMismatchError, ResultsStoreError
from ..sweeps.result import CONFIG_FILE, ROWS_FILE, read_config
from ..sweeps.store import SweepStore
from ..tangents.subspace import Subspace

__all__ = ["LiveStore"]


class LiveStore:
    """Rows of a live probe, written atomically to a results directory a `SweepResult` reads.

    Args:
        results_dir: The folder.
        config: The live probe's settings (what a resume must match).
        overwrite: Start afresh when the folder holds results with other settings.
        start_step: Rows at or after this step from an earlier run are dropped (the run restarts there).
        flush_seconds: Write rows.jsonl at most this often (0: at every window).

    Raises:
        ConfigMismatchError: The folder holds results with other settings (and not `overwrite`).
        SweepLockedError: Another process writes the folder.
        ResultsStoreError: Unreadable rows.
    """

    def __init__(
        self,
        results_dir: str | Path,
        config: dict[str, Any],
        *,
        overwrite: bool,
        start_step: int = 0,
        flush_seconds: float = 10.0,
    ):
        self.store = SweepStore(results_dir)
        self.results_dir = self.store.results_dir
        self.flush_seconds = flush_seconds
        self._exit = contextlib.ExitStack()
        self._exit.enter_context(self.store.lock())
        try:
            self.rows = self._prepare(config, overwrite=overwrite, start_step=start_step)
        except BaseException:
            self._exit.close()
            raise
        self._text = "".join(json.dumps(row) + "\n" for row in self.rows)
        self._dirty = True
        self._last_write = 0.0
        self.flush(force=True)

    def _prepare(self, config: dict[str, Any], *, overwrite: bool, start_step: int) -> list[dict[str, Any]]:
        path = self.results_dir / CONFIG_FILE
        stored = read_config(path) if path.exists() and not overwrite else None
        if stored is not None and stored != config:
            changed = sorted(key for key in set(stored) | set(config) if stored.get(key) != config.get(key))
            raise ConfigMismatchError(
                f"{self.results_dir} holds results with other settings ({', '.join(changed)} differ). Use another "
                "results_dir, or overwrite=True to start afresh."
            )
        if stored is None and not overwrite and (self.results_dir / ROWS_FILE).exists():
            raise ResultsStoreError(
                f"{self.results_dir} holds {ROWS_FILE} but no {CONFIG_FILE}: their settings are unknown. Use another "
                "results_dir, or overwrite=True to start afresh."
            )
        rows = [] if stored is None else [row for row in self.store.rows() if row["step"] < start_step]
        write_atomically(path, json.dumps(config, indent=1))
        return rows

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Append rows (a closed window's) and write them if `flush_seconds` have passed since the last write."""
        self.rows.extend(rows)
        self._text += "".join(json.dumps(row) + "\n" for row in rows)
        self._dirty = True
        self.flush()

    def flush(self, *, force: bool = False) -> None:
        """Write rows.jsonl atomically if rows came since the last write (and the period has passed, unless forced)."""
        now = time.monotonic()
        if self._dirty and (force or now - self._last_write >= self.flush_seconds):
            write_atomically(self.results_dir / ROWS_FILE, self._text)
            self._dirty, self._last_write = False, now

    def save_tangent(self, layer: int | str, subspace: Subspace, *, reference: bool) -> Path:
        """Save a fitted tangent where a sweep keeps its reference (early) or its per-step tangents (refit)."""
        path = self.store.reference_path(layer) if reference else self.store.tangent_path(layer, subspace.step or 0)
        subspace.save(path)
        return path

    def close(self) -> None:
        """Write what is pending and release the directory's lock."""
        try:
            self.flush(force=True)
        finally:
            self._exit.close()
