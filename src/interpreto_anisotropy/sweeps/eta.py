# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""How long a sweep will take: the time per checkpoint, measured on the first one, times the checkpoints left.

Examples:
    >>> timer = CheckpointTimer(10, clock=iter([0.0, 12.0]).__next__)
    >>> timer.start_round()
    >>> timer.end_round(1)
    'about 12 s per checkpoint, 1.8 min for the 9 checkpoints left'
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..results.schema import is_skipped

__all__ = ["CheckpointTimer", "estimate_line", "opening_line", "seconds_per_checkpoint_of_rows"]

_now = time.perf_counter  # the default clock (a test replaces it)


def estimate_line(seconds_per_round: float, remaining: int, *, per_round: int = 1, source: str = "") -> str:
    """ "about N s per checkpoint, M min for the K checkpoints left" (the time left counts rounds of `per_round`).

    Args:
        seconds_per_round: Seconds one round of `per_round` checkpoints takes (one checkpoint, without ranks).
        remaining: Checkpoints left.
        per_round: Checkpoints computed at once (one per rank under ``--parallel checkpoints``).
        source: Where the time comes from, said in parentheses after the time per checkpoint.

    Returns:
        The line.

    Examples:
        >>> estimate_line(30.0, 4)
        'about 30 s per checkpoint, 2.0 min for the 4 checkpoints left'
    """
    left = math.ceil(remaining / per_round) * seconds_per_round
    each = seconds_per_round / per_round
    per = f"{each:.1f}" if each < 10 else f"{each:.0f}"
    total = f"{left / 60:.1f} min" if left >= 60 or left == 0 else f"{left:.0f} s"
    noun = "checkpoint" if remaining == 1 else "checkpoints"
    return f"about {per} s per checkpoint{f' ({source})' if source else ''}, {total} for the {remaining} {noun} left"


def seconds_per_checkpoint_of_rows(rows: Sequence[dict[str, Any]]) -> float | None:
    """The mean time a checkpoint took in earlier rows: per step, the sum of its split points' ``wall_seconds``.

    Args:
        rows: Rows already written.

    Returns:
        Seconds per checkpoint, or None when no computed row has a time.
    """
    per_point: dict[tuple[int, str], float] = {}
    for row in rows:
        seconds = row.get("wall_seconds")
        if not is_skipped(row) and isinstance(seconds, (int, float)) and math.isfinite(seconds):
            per_point[(row["step"], str(row.get("layer")))] = float(seconds)
    steps = {step for step, _ in per_point}
    return sum(per_point.values()) / len(steps) if steps else None


def opening_line(todo: int, rows: Sequence[dict[str, Any]], *, per_round: int = 1, early: int = 0) -> str:
    """What a sweep says before its first checkpoint: how many, and the time per checkpoint if its rows tell it.

    Args:
        todo: Checkpoints to compute.
        rows: The rows already computed (their ``wall_seconds``).
        per_round: Checkpoints computed at once.
        early: Early checkpoints read first to fit the reference tangent (0: none).

    Returns:
        One line of text.
    """
    after = f", after the reference tangent is fitted on {early} early checkpoints" if early else ""
    seconds = seconds_per_checkpoint_of_rows(rows)
    if seconds is None:
        return (
            f"{todo} checkpoint{'s' if todo != 1 else ''} to compute{after}; the time per checkpoint is "
            "measured on the first one"
        )
    return (
        estimate_line(seconds, todo, per_round=per_round, source="the wall_seconds of the rows already computed")
        + after
    )


class CheckpointTimer:
    """Measures the sweep's rounds of checkpoints and says how long the rest will take.

    Args:
        total: Checkpoints to compute.
        per_round: Checkpoints computed at once (one per rank under ``--parallel checkpoints``).
        clock: Seconds, as `time.perf_counter` gives them (the default; a test injects its own).

    Examples:
        >>> timer = CheckpointTimer(3, clock=iter([0.0, 5.0]).__next__)
        >>> timer.start_round()
        >>> timer.end_round(1)
        'about 5.0 s per checkpoint, 10 s for the 2 checkpoints left'
    """

    def __init__(self, total: int, *, per_round: int = 1, clock: Callable[[], float] | None = None):
        self.total = total
        self.per_round = per_round
        self.clock = clock or _now
        self.done = 0
        self.rounds: list[float] = []
        self._started: float | None = None

    def start_round(self) -> None:
        """Mark the start of a round."""
        self._started = self.clock()

    def end_round(self, checkpoints: int) -> str | None:
        """Mark the end of a round of `checkpoints`; the estimate of what is left after the first round, else None."""
        if self._started is not None:
            self.rounds.append(self.clock() - self._started)
        self.done += checkpoints
        remaining = self.total - self.done
        if len(self.rounds) != 1 or remaining <= 0:
            return None
        return estimate_line(self.rounds[0], remaining, per_round=self.per_round)
