# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Whether a results directory's rows and references still describe its checkpoints' content.

Examples:
    >>> changed_steps([{"step": 0, "fingerprint": "sha256:a"}], {0: "sha256:b"})
    [0]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..results.records import fingerprint
from .checkpoints import Checkpoint

__all__ = ["TakenFingerprints", "changed_early_steps", "changed_steps"]


class TakenFingerprints:
    """Each checkpoint's fingerprint, taken once per run (a Hub checkpoint's again once it is downloaded)."""

    def __init__(self) -> None:
        self._taken: dict[Checkpoint, str] = {}

    def of(self, checkpoint: Checkpoint) -> str | None:
        """The checkpoint's fingerprint, or None while it cannot be taken."""
        if checkpoint not in self._taken:
            taken = fingerprint(checkpoint)
            if taken is None:
                return None
            self._taken[checkpoint] = taken
        return self._taken[checkpoint]

    def by_step(self, checkpoints: Iterable[Checkpoint]) -> dict[int, str | None]:
        """{step: fingerprint or None} of some checkpoints."""
        return {checkpoint.step: self.of(checkpoint) for checkpoint in checkpoints}


def changed_steps(rows: Iterable[Mapping[str, Any]], current: Mapping[int, str | None]) -> list[int]:
    """The steps whose rows were computed on content other than the checkpoint's current content, sorted."""
    return sorted(
        {
            row["step"]
            for row in rows
            if row.get("fingerprint") and current.get(row["step"]) and row["fingerprint"] != current[row["step"]]
        }
    )


def changed_early_steps(info: Mapping[str, Any], current: Mapping[int, str | None]) -> list[int]:
    """The early steps a reference tangent pooled whose content has changed since, sorted (from its `info`)."""
    pooled = info.get("early_fingerprints") or {}
    return sorted(
        int(step) for step, taken in pooled.items() if taken and current.get(int(step)) and taken != current[int(step)]
    )
