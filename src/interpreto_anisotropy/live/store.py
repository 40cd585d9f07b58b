# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The live probe's results directory: a sweep's layout (config.json, rows.jsonl, reference/, tangents/), so that
`SweepResult.load`, its plots, its report and the CLI's ``report`` read it unchanged.

It reuses `SweepStore`'s public methods (the directory lock, the checked reading of rows, the tangent paths) and
appends the rows of closed windows to rows.jsonl itself (`append_whole`): a write costs the new rows only, however
many windows the file holds, and never touches the rows already written; a write that fails leaves the file as it
was. Writes are batched: at most one every `flush_seconds` (and always at `close`), so that a window every step does
not pay a disk flush every step.

A results directory holding a live run with the same settings is resumed: its rows before `start_step` are kept,
the later ones (a run restarted from an earlier checkpoint) are dropped, and a last line left unterminated by a
writer that was killed while writing it is removed (with a warning), in one atomic rewrite when opening.
`overwrite` empties the folder of everything the library wrote there first (`SweepStore.clear`), reading none of it:
a later resume never finds an earlier run's tangents beside the new run's rows.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

from ..commons.columns import row_line
from ..commons.files import append_whole, cut_unterminated_tail, write_atomically
from ..errors import ConfigMismatchError
from ..sweeps.rows_file import CONFIG_FILE, ROWS_FILE, read_config
from ..sweeps.store import SweepStore
from ..tangents.subspace import Subspace

__all__ = ["LiveStore"]


class LiveStore:
    """Rows of a live probe, appended to the rows.jsonl of a results directory a `SweepResult` reads.

    Args:
        results_dir: The folder.
        config: The live probe's settings (what a resume must match).
        overwrite: Start afresh: remove what the library wrote in the folder (rows, config, tangents, top tokens,
            provenance, report), whatever its settings; files it did not write stay.
        start_step: Rows at or after this step from an earlier run are dropped (the run restarts there).
        flush_seconds: Write rows.jsonl at most this often (0: at every window).

    Raises:
        ConfigMismatchError: The folder holds results with other settings (and not `overwrite`).
        SweepLockedError: Another process writes the folder.
        ResultsStoreError: Unreadable rows, or results without a config.json (and not `overwrite`).
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
        self.rows_path = self.results_dir / ROWS_FILE
        self.flush_seconds = flush_seconds
        self._exit = contextlib.ExitStack()
        self._exit.enter_context(self.store.lock())
        try:
            self._prepare(config, overwrite=overwrite, start_step=start_step)
        except BaseException:
            self._exit.close()
            raise
        self._pending = ""
        self._last_write = -math.inf  # the first window is written at once

    def _prepare(self, config: dict[str, Any], *, overwrite: bool, start_step: int) -> None:
        """Check and record the settings; keep the rows of an earlier run before `start_step`."""
        path = self.results_dir / CONFIG_FILE
        if overwrite:
            self.store.clear()
        stored = read_config(path) if path.exists() else None
        if stored is not None and stored != config:
            changed = sorted(key for key in set(stored) | set(config) if stored.get(key) != config.get(key))
            raise ConfigMismatchError(
                f"{self.results_dir} holds results with other settings ({', '.join(changed)} differ). Use another "
                "results_dir, or overwrite=True to start afresh."
            )
        if stored is None:
            self.store.refuse_leftovers()
        write_atomically(path, json.dumps(config, indent=1))
        if stored is None:
            write_atomically(self.rows_path, "")
            return
        if cut_unterminated_tail(self.rows_path):
            warnings.warn(
                f"The last line of {self.rows_path} was unterminated (the previous run was stopped while writing "
                "it): it was removed; the rows before it are kept.",
                stacklevel=4,
            )
        rows = self.store.rows()
        kept = [row for row in rows if row["step"] < start_step]
        if len(kept) < len(rows):
            write_atomically(self.rows_path, "".join(json.dumps(row) + "\n" for row in kept))

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Queue rows (a closed window's) and append them if `flush_seconds` have passed since the last write."""
        self._pending += "".join(map(row_line, rows))
        self.flush()

    def flush(self, *, force: bool = False) -> None:
        """Append the queued rows to rows.jsonl (if the period has passed since the last write, unless forced)."""
        now = time.monotonic()
        if self._pending and (force or now - self._last_write >= self.flush_seconds):
            append_whole(self.rows_path, self._pending)
            self._pending, self._last_write = "", now

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
