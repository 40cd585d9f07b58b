# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The drift of a sweep's tangents: principal angles to the reference and to the previous checkpoint's tangent."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import MissingDriftWarning
from ..results.schema import is_skipped
from ..results.store import SweepStore
from ..tangents.subspace import Subspace
from .checkpoints import Checkpoint

__all__ = ["PreviousDrift", "drift"]


def drift(label: str, own: Subspace, other: Subspace | None) -> dict[str, Any]:
    """The mean and max principal angle between two tangents, as `drift_{label}_*` row fields (None without one).

    Args:
        label: The fields' infix ("reference", "previous").
        own: The checkpoint's tangent.
        other: The tangent compared with; None (or one of another dimension): the fields are None.

    Returns:
        {"drift_{label}_mean_angle": float | None, "drift_{label}_max_angle": float | None}.
    """
    if other is None or other.dim != own.dim:
        return {f"drift_{label}_mean_angle": None, f"drift_{label}_max_angle": None}
    angles = own.principal_angles(other)
    return {f"drift_{label}_mean_angle": float(np.mean(angles)), f"drift_{label}_max_angle": float(np.max(angles))}


class PreviousDrift:
    """The drift of each row's tangent from the previous checkpoint's, read from the results directory.

    Args:
        store: The sweep's results directory.
        checkpoints: Every checkpoint the results directory has been asked for (those of earlier runs too), sorted
            by step; the attribute is replaced once the results directory has been read.
    """

    def __init__(self, store: SweepStore, checkpoints: list[Checkpoint]):
        self.store = store
        self.checkpoints = checkpoints

    def previous_step(self, step: int) -> int | None:
        """The step before `step` among `checkpoints`, or None for the first."""
        earlier = [other.step for other in self.checkpoints if other.step < step]
        return earlier[-1] if earlier else None

    def added_to(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows with their tangent's drift from the previous checkpoint's (skipped rows as they are)."""
        for row in sorted(rows, key=lambda row: row["step"]):
            if not is_skipped(row):
                row.update(self.of(row, warn=True))
        return rows

    def of(self, row: dict[str, Any], *, warn: bool) -> dict[str, Any]:
        """The `drift_previous_*` fields of a row; `warn`: say why they are None when the previous tangent is missing."""
        previous_step = self.previous_step(row["step"])
        previous = self.store.tangent(row["layer"], previous_step) if previous_step is not None else None
        if previous_step is not None and previous is None and warn:
            warnings.warn(
                f"The drift from the previous checkpoint of step {row['step']} (split point {row['layer']!r}) is None: "
                f"{self.store.tangent_path(row['layer'], previous_step)} is missing (the previous checkpoint was "
                "skipped, or its tangent deleted). It is filled in once that checkpoint's rows are computed.",
                MissingDriftWarning,
                stacklevel=4,
            )
        own = self.store.tangent(row["layer"], row["step"])
        return {
            **drift("previous", own, previous),
            "drift_previous_step": previous_step if own is not None and previous is not None else None,
        }

    def refresh(self) -> None:
        """Recompute the drift of rows measured from another previous checkpoint than today's, or from none whose
        tangent now exists; rewrite rows.jsonl if any."""

        def refreshed(row: dict[str, Any]) -> dict[str, Any]:
            expected = self.previous_step(row["step"])
            if is_skipped(row) or row.get("drift_previous_step", -1) == expected:
                return row
            if expected is not None and not self.store.tangent_path(row["layer"], expected).exists():
                return row
            return {**row, **self.of(row, warn=False)}

        self.store.update_rows(refreshed)

    def forget_after(self, steps: set[int] | list[int]) -> None:
        """Drop the drift fields of the rows whose previous checkpoint is one of `steps` (measured again at the end
        of the run)."""
        self.store.update_rows(
            lambda row: (
                {key: value for key, value in row.items() if key != "drift_previous_step"}
                if self.previous_step(row["step"]) in steps
                else row
            )
        )
