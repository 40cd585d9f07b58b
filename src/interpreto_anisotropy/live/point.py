# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""One split point of a live probe (`LivePoint`): its open window, its tangent schedule, and the windows awaiting a
tangent, turned into rows with `GradientProbe`'s statistics (`build_results`) at once or, retrospectively, once the
tangent is fitted (docs/how-to/live-probe.md).

The windows awaiting a tangent hold float64 d x d moments each, so at most `pending_capacity` of them are held:
when one more closes, consecutive ones are merged two by two (`_Pending.absorb`), and each later one joins the last
until it spans as many windows as the others. Their rows then span 2, 4, ... x `every` steps, each equal to the row
of one window of those steps; runs whose windows all fit are not merged at all.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import DegenerateStatisticsWarning, DimensionMismatchError, PendingRowsWarning
from ..probing.objectives import Objective
from ..probing.statistics import ProbeSums, SubspaceColumns, build_results
from ..results.verdict import row_seed
from ..tangents.subspace import Subspace
from .rows import live_row
from .tangents import TangentSchedule
from .window import (
    KeptRows,
    WindowSums,
    gather_sequence_energy,
    merged_sums,
    on_every_rank,
    reduce_window,
    retrospective_sums,
    scored_sums,
)

__all__ = ["LivePoint", "Statistics", "moments_bytes", "pending_capacity"]


@dataclass(frozen=True)
class Statistics:
    """The settings of `build_results` a live probe uses for every window (the same as `GradientProbe.run`'s)."""

    n_controls: int
    seed: int
    n_bootstrap: int
    confidence: float
    objective: Objective


def moments_bytes(dim: int) -> int:
    """The bytes of one window's float64 d x d gradient moments, what `max_pending_bytes` counts per waiting window."""
    return dim * dim * 8


def pending_capacity(max_pending_bytes: int, dim: int) -> int:
    """How many windows awaiting a tangent a split point of width `dim` holds within its `max_pending_bytes`."""
    return max_pending_bytes // moments_bytes(dim)


@dataclass
class _Pending:
    """Closed windows with no tangent yet (one, or consecutive ones merged): their reduced sums, the rows they kept
    (None unless every one of them kept its rows), and where they lie."""

    sums: ProbeSums
    kept: KeptRows | None
    step: int
    first_step: int
    micro_batches: int
    windows: int = 1

    @property
    def bytes(self) -> int:
        return self.kept.bytes if self.kept is not None else 0

    def absorb(self, later: _Pending, *, sharded: bool) -> None:
        """Merge the closed windows that follow into these: one window from `first_step` to `later.step`."""
        self.sums = merged_sums(self.sums, later.sums, sharded=sharded)
        self.kept = self.kept.extend(later.kept) if self.kept is not None and later.kept is not None else None
        self.step = later.step
        self.micro_batches += later.micro_batches
        self.windows += later.windows


class LivePoint:
    """The live state of one split point: `layer` as the user gave it (the rows' `layer`), `path` its module path;
    the windows awaiting a tangent may hold `max_pending_bytes` here (`pending_capacity` windows, merged beyond)."""

    def __init__(
        self,
        layer: int | str,
        path: str,
        schedule: TangentSchedule,
        statistics: Statistics,
        *,
        max_pending_bytes: int,
        every: int,
    ):
        self.layer, self.path, self.schedule, self.statistics = layer, path, schedule, statistics
        self.max_pending_bytes, self.every = max_pending_bytes, every
        self.dim: int | None = None
        self.device: torch.device | None = None
        self.window: WindowSums | None = None
        self.pending: list[_Pending] = []
        self.capacity = 0  # windows awaiting a tangent held at most, once the width is known
        self.span = 1  # windows merged into each of them
        self.keep_rows = True  # until the rows of the windows awaiting a tangent outgrow max_pending_bytes

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
            self.capacity = pending_capacity(self.max_pending_bytes, dim)
            self.schedule.start(dim, device)
        if self.window is None:
            self.open(first_step)
        return fresh

    def open(self, first_step: int) -> None:
        """Open a window scored against the tangent that exists now (moments and rows, within the bound, if none)."""
        if self.dim is not None:
            room = self._room_for_rows() if self.schedule.bases is None and self.keep_rows else 0
            self.window = WindowSums(
                self.dim, self.device, self.schedule.bases, first_step=first_step, max_kept_bytes=room
            )

    def moments_bytes(self) -> int:
        """The memory reserved for the moments of the windows awaiting a tangent (float64 d x d each): those of the
        windows before a fit, at most `capacity` of them."""
        if self.schedule.fit_until is None or self.dim is None:
            return 0
        return min(math.ceil(self.schedule.fit_until / self.every), self.capacity) * moments_bytes(self.dim)

    def _room_for_rows(self) -> int:
        return max(0, self.max_pending_bytes - self.moments_bytes() - sum(pending.bytes for pending in self.pending))

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
                columns = self._drawn(window.bases, step)
                sums = scored_sums(sums, columns)
                rows.append(self._row(sums, columns, step, window.first_step, window.reads, retrospective=False))
            elif sums.moments.count:
                self._await_tangent(window, sums, step, sharded=sharded)
        fitted = self.schedule.fit(step + 1, self.device, sharded=sharded) if self.schedule.due(step + 1) else None
        if fitted is not None:
            rows.extend(self._score_pending(sharded=sharded))
        return rows, sums, fitted

    def _await_tangent(self, window: WindowSums, sums: ProbeSums, step: int, *, sharded: bool) -> None:
        """Keep a closed window until the tangent exists (with its rows if every rank kept them all)."""
        kept = on_every_rank(window.kept is not None, sharded=sharded)
        if not kept and self.keep_rows:
            self.keep_rows = False
            warnings.warn(
                f"The windows awaiting the tangent at split point '{self.path}' hold more gradient rows than "
                f"max_pending_bytes leaves them ({self._room_for_rows() / 2**20:.0f} MiB besides the moments): from "
                f"step {window.first_step} on they keep their moments only, and their rows will have no bootstrap "
                "interval. Raise max_pending_bytes, use a larger `every` or fewer early steps to keep them.",
                PendingRowsWarning,
                stacklevel=5,
            )
        closed = _Pending(sums, window.kept_rows() if kept else None, step, window.first_step, window.reads)
        if self.pending and len(self.pending) >= self.capacity and self.pending[-1].windows >= self.span:
            self._merge_pairs(sharded=sharded)
        if self.pending and self.pending[-1].windows < self.span:
            self.pending[-1].absorb(closed, sharded=sharded)
        else:
            self.pending.append(closed)

    def _merge_pairs(self, *, sharded: bool) -> None:
        """Halve the windows awaiting a tangent: each pair of consecutive ones becomes one."""
        for first, later in zip(self.pending[::2], self.pending[1::2], strict=False):
            first.absorb(later, sharded=sharded)
        self.pending = self.pending[::2]
        self.span *= 2

    def _score_pending(self, *, sharded: bool) -> list[dict[str, Any]]:
        rows = []
        bases = self.schedule.bases
        for pending in self.pending:
            energy = None
            if pending.kept is not None:
                energy = gather_sequence_energy(pending.kept.tangent_energies(bases.tangent_block), sharded=sharded)
            columns = self._drawn(bases, pending.step)
            sums = retrospective_sums(pending.sums, columns, energy)
            rows.append(
                self._row(sums, columns, pending.step, pending.first_step, pending.micro_batches, retrospective=True)
            )
        self.pending, self.span = [], 1
        self.keep_rows = True
        return rows

    def _drawn(self, bases: SubspaceColumns, step: int) -> SubspaceColumns:
        """The window's tangent with its own controls and random subspaces, drawn from the seed of (seed, step,
        split point, tangent kind) (`results.verdict.row_seed`, as a sweep row's): no two windows share a draw."""
        seed = {self.schedule.kind.value: self._draw_seed(step)}
        return SubspaceColumns.draw(bases.tangents, n_controls=bases.n_controls, n_random=bases.n_random, seed=seed)

    def _draw_seed(self, step: int) -> int:
        """The seed of the draws of the window whose last weights are those of `step` (its row's ``draw_seed``)."""
        kind = self.schedule.kind.value
        return row_seed(self.statistics.seed, step=step, split_point=self.path, kind=kind)

    def _row(
        self,
        sums: ProbeSums,
        columns: SubspaceColumns,
        step: int,
        first_step: int,
        micro_batches: int,
        *,
        retrospective: bool,
    ) -> dict:
        kind = self.schedule.kind.value
        settings = self.statistics
        with warnings.catch_warnings():  # a window of a few sequences: its row's n_sequences says so
            warnings.simplefilter("ignore", DegenerateStatisticsWarning)
            result = build_results(
                sums,
                columns,
                settings.seed,
                settings.n_bootstrap,
                settings.confidence,
                objective=settings.objective,
                split_point=self.path,
            )[kind]
        return {
            **live_row(
                result,
                step=step,
                first_step=first_step,
                micro_batches=micro_batches,
                layer=self.layer,
                path=self.path,
                kind=kind,
                retrospective=retrospective,
                fitted_at=self.schedule.fitted_at,
            ),
            "draw_seed": self._draw_seed(step),
            "n_random": columns.n_random,
        }
