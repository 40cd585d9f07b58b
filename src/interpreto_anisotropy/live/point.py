# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""One split point of a live probe: its open window, its tangent schedule, and the windows awaiting a tangent.

`LivePoint.add` pools a micro-batch; `LivePoint.close` turns the window into `ProbeSums` over every rank and, with
the statistics of `GradientProbe` (`build_results`), into rows: at once when the window had a tangent, or once the
tangent is fitted (retrospectively, from the window's gradient moments).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import DegenerateStatisticsWarning, DimensionMismatchError
from ..probing.objectives import Objective
from ..probing.statistics import ProbeSums, build_results
from ..tangents.subspace import Subspace
from .reduce import reduce_window
from .rows import live_row
from .tangents import TangentSchedule
from .window import WindowSums, retrospective_sums

__all__ = ["LivePoint", "Statistics"]


@dataclass(frozen=True)
class Statistics:
    """The settings of `build_results` a live probe uses for every window (the same as `GradientProbe.run`'s)."""

    n_controls: int
    seed: int
    n_bootstrap: int
    confidence: float
    objective: Objective


@dataclass
class _Pending:
    """A closed window with no tangent yet: its reduced sums and where it lies."""

    sums: ProbeSums
    step: int
    first_step: int
    micro_batches: int


class LivePoint:
    """The live state of one split point.

    Args:
        layer: The split point as the user gave it (the rows' `layer`).
        path: Its module path.
        schedule: Its tangent schedule.
        statistics: The settings of the statistics.
    """

    def __init__(self, layer: int | str, path: str, schedule: TangentSchedule, statistics: Statistics):
        self.layer, self.path, self.schedule, self.statistics = layer, path, schedule, statistics
        self.dim: int | None = None
        self.device: torch.device | None = None
        self.window: WindowSums | None = None
        self.pending: list[_Pending] = []

    def start(self, dim: int, device: torch.device, first_step: int) -> bool:
        """Learn the split point's width and device from a gradient, and open a window if none is open.

        Returns:
            True the first time (the width was just learned).

        Raises:
            DimensionMismatchError: A width that changed, or a given tangent of another width.
        """
        fresh = self.dim is None
        if not fresh and dim != self.dim:
            raise DimensionMismatchError(f"Split point '{self.path}' changed width from {self.dim} to {dim}.")
        if fresh:
            self.dim, self.device = dim, device
            self.schedule.start(dim, device)
        if self.window is None:
            self.open(first_step)
        return fresh

    def open(self, first_step: int) -> None:
        """Open a window scored against the tangent that exists now (moments only if none)."""
        if self.dim is not None:
            self.window = WindowSums(self.dim, self.device, self.schedule.bases, first_step=first_step)

    def add(
        self,
        hidden: torch.Tensor,
        gradient: torch.Tensor,
        rows: torch.Tensor,
        loss_finite: torch.Tensor,
        loss_sum: torch.Tensor,
        loss_count: torch.Tensor,
    ) -> None:
        """Pool one micro-batch: its rescaled dL/dh and, for a tangent being fitted, its activations at the rows."""
        finite = self.window.add(gradient, rows, loss_finite, loss_sum, loss_count)
        self.schedule.add_activations(hidden, rows & finite)

    def close(self, step: int, *, sharded: bool) -> tuple[list[dict[str, Any]], ProbeSums | None, Subspace | None]:
        """Close the window whose last weights are those of `step`; fit the tangent if due.

        Returns:
            (the rows now complete, the window's reduced sums (None without reads), the tangent fitted now or None).
        """
        window, self.window = self.window, None
        rows: list[dict[str, Any]] = []
        sums = None
        if window is not None and window.reads:
            sums = reduce_window(window.probe_sums(), sharded=sharded)
            if window.bases is not None and sums.moments.count:
                rows.append(self._row(sums, step, window.first_step, window.reads, retrospective=False))
            elif sums.moments.count:
                self.pending.append(_Pending(sums, step, window.first_step, window.reads))
        fitted = self.schedule.fit(step + 1, self.device, sharded=sharded) if self.schedule.due(step + 1) else None
        if fitted is not None:
            rows.extend(self._score_pending())
        return rows, sums, fitted

    def _score_pending(self) -> list[dict[str, Any]]:
        rows = []
        with warnings.catch_warnings():  # one pseudo-sequence: the interval is NaN by design, not a degenerate input
            warnings.simplefilter("ignore", DegenerateStatisticsWarning)
            for pending in self.pending:
                sums = retrospective_sums(pending.sums, self.schedule.bases)
                rows.append(
                    self._row(sums, pending.step, pending.first_step, pending.micro_batches, retrospective=True)
                )
        self.pending = []
        return rows

    def pending_bytes(self) -> int:
        """Memory held by the windows awaiting a tangent (their float64 moments)."""
        return len(self.pending) * (self.dim or 0) ** 2 * 8

    def _row(self, sums: ProbeSums, step: int, first_step: int, micro_batches: int, *, retrospective: bool) -> dict:
        kind = self.schedule.kind.value
        settings = self.statistics
        with warnings.catch_warnings():  # a window of a few sequences: its row's n_sequences says so
            warnings.simplefilter("ignore", DegenerateStatisticsWarning)
            result = self._result(sums, kind, settings)
        return live_row(
            result,
            step=step,
            first_step=first_step,
            micro_batches=micro_batches,
            layer=self.layer,
            path=self.path,
            kind=kind,
            retrospective=retrospective,
            fitted_at=self.schedule.fitted_at,
        )

    def _result(self, sums: ProbeSums, kind: str, settings: Statistics) -> Any:
        return build_results(
            sums,
            self.schedule.bases,
            settings.seed,
            settings.n_bootstrap,
            settings.confidence,
            objective=settings.objective,
            split_point=self.path,
        )[kind]
