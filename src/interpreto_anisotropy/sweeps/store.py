# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A sweep's results directory: its config, its rows, and its tangents; what is done, and where each file goes.

The store only stores: rows come to it complete (drift included), and it appends them atomically.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from ..commons.files import write_atomically
from ..errors import ConfigMismatchError, InvalidInputError
from ..tangents.subspace import Subspace
from .result import CONFIG_FILE, ROWS_FILE, read_rows

__all__ = ["SweepStore"]


def _safe_name(layer: int | str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(layer))


class SweepStore:
    """The files of one sweep under `results_dir`: config.json, rows.jsonl, reference/ and tangents/.

    Args:
        results_dir: The sweep's folder.

    Examples:
        >>> store = SweepStore("runs/toy/sweep")  # doctest: +SKIP
        >>> store.done()  # doctest: +SKIP
        {(0, '1'), (1, '1')}
    """

    def __init__(self, results_dir: str | Path):
        self.results_dir = Path(results_dir)

    def prepare(self, config: dict[str, Any], *, overwrite: bool) -> None:
        """Write `config` to config.json, or check it equals the one there.

        Raises:
            ConfigMismatchError: The folder holds a sweep with other settings (and not `overwrite`, which removes
                its rows and tangents first).
            InvalidInputError: The folder cannot be created.
        """
        path = self.results_dir / CONFIG_FILE
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InvalidInputError(f"Cannot create results_dir {self.results_dir}: {error}") from error
        if path.exists():
            previous = json.loads(path.read_text())
            if previous != config:
                if not overwrite:
                    changed = sorted(
                        key for key in set(previous) | set(config) if previous.get(key) != config.get(key)
                    )
                    raise ConfigMismatchError(
                        f"{self.results_dir} holds a sweep with other settings ({', '.join(changed)} differ). "
                        "Use another results_dir, or overwrite=True (--overwrite) to start afresh."
                    )
                for stale in (ROWS_FILE, "reference", "tangents"):
                    target = self.results_dir / stale
                    if target.is_dir():
                        shutil.rmtree(target)
                    elif target.exists():
                        target.unlink()
        write_atomically(path, json.dumps(config, indent=1))

    def rows(self) -> list[dict[str, Any]]:
        """The rows written so far."""
        return read_rows(self.results_dir / ROWS_FILE)

    def done(self) -> set[tuple[int, str]]:
        """The (step, layer) pairs with rows."""
        return {(row["step"], str(row["layer"])) for row in self.rows()}

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append complete rows to rows.jsonl in one atomic write, in step order."""
        path = self.results_dir / ROWS_FILE
        existing = path.read_text() if path.exists() else ""
        added = "".join(json.dumps(row) + "\n" for row in sorted(rows, key=lambda row: row["step"]))
        write_atomically(path, existing + added)

    def reference_path(self, layer: int | str) -> Path:
        """Where the reference tangent of a split point goes."""
        return self.results_dir / "reference" / f"{_safe_name(layer)}.safetensors"

    def tangent_path(self, layer: int | str, step: int) -> Path:
        """Where the tangent refitted on a checkpoint goes."""
        return self.results_dir / "tangents" / _safe_name(layer) / f"step-{step}.safetensors"

    def tangent(self, layer: int | str, step: int, *, device: str = "cpu") -> Subspace | None:
        """The tangent refitted on a checkpoint, None when it was not saved."""
        path = self.tangent_path(layer, step)
        return Subspace.load(path, device=device) if path.exists() else None
