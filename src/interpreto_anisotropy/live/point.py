# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""One split point of a live probe (`LivePoint`): its open window, its tangent schedule, its windows awaiting one."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from ..commons import distributed
from ..commons.accumulators import MomentAccumulator
from ..errors import DegenerateStatisticsWarning, InvalidInputError, LiveProbeWarning
from ..probing.probe import batch_energies
from ..probing.statistics import ProbeSums, SubspaceColumns, Tally, TangentBlock, build_results
from ..reading.split_point import refuse_other_call
from ..results.verdict import row_seed
from ..tangents.controls import check_control_room
from ..tangents.explainers import OrthonormalConceptModel
from ..tangents.subspace import Subspace
from .options import LiveConfig, LiveTangent
from .rows import live_row


def moments_bytes(dim: int) -> int:
    """The bytes of one window's float64 d x d gradient moments (what `max_pending_bytes` counts per window)."""
    return dim * dim * 8


@dataclass
class _Pending:
    """Closed windows with no tangent yet (one, or consecutive ones merged): their sums, rows kept, and steps."""

    sums: ProbeSums
    kept: KeptRows | None
    step: int
    first_step: int
    micro_batches: int
    windows: int = 1

    def absorb(self, later: _Pending, *, sharded: bool) -> None:
        """Merge the closed windows that follow into these: one window, sequences end to end, moments merged in place."""
        first, last = self.sums, later.sums
        offset = first.sequence_id.shape[0] if sharded else first.tally.usable_sequences
        usable = first.tally.usable_sequences + last.tally.usable_sequences
        self.sums = ProbeSums(
            torch.cat([first.sequence_energy, last.sequence_energy]),
            torch.cat([first.sequence_total, last.sequence_total]),
            torch.cat([first.sequence_id, last.sequence_id + offset]),
            first.moments.merge(last.moments),
            first.loss_sum + last.loss_sum,
            first.loss_count + last.loss_count,
            Tally(usable, 0, first.tally.skipped_batches + last.tally.skipped_batches),
            first.n_sequences + last.n_sequences,
        )
        self.kept = self.kept.extend(later.kept) if self.kept is not None and later.kept is not None else None
        self.step = later.step
        self.micro_batches += later.micro_batches
        self.windows += later.windows


class LivePoint:
    """One split point (`layer` as the user gave it, `path` its module path): its windows, closed into rows."""

    def __init__(self, layer: int | str, path: str, schedule: TangentSchedule, settings: LiveConfig, **shared: Any):
        self.layer, self.path, self.schedule, self.settings = layer, path, schedule, settings
        self.objective, self.max_pending_bytes = shared["objective"], shared["max_pending_bytes"]
        self.dim = self.device = self.window = None  # the width and device, from the first gradient; the open window
        self.pending: list[_Pending] = []
        self.capacity = 0  # windows awaiting a tangent held at most, once the width is known
        self.span = 1  # windows merged into each of them
        self.keep_rows = True  # until the rows of the windows awaiting a tangent outgrow max_pending_bytes

    def start(self, dim: int, device: torch.device, first_step: int) -> bool:
        """Learn the split point's width and device from a gradient, and open a window if none is open."""
        fresh = self.dim is None
        if not fresh and dim != self.dim:
            raise InvalidInputError(f"Split point '{self.path}' changed width from {self.dim} to {dim}.")
        if fresh:
            self.dim, self.device = dim, device
            self.capacity = self.max_pending_bytes // moments_bytes(dim)
            self.schedule.start(dim, device)
        if self.window is None:
            self.open(first_step)
        return fresh

    def open(self, first_step: int) -> None:
        """Open a window scored against the tangent that exists now (moments and rows, within the bound, if none)."""
        if self.dim is not None:
            room = self._room_for_rows() if self.schedule.bases is None and self.keep_rows else 0
            self.window = WindowSums(self.dim, self.device, self.schedule.bases, first_step, room)

    def moments_bytes(self) -> int:
        """The memory reserved for the moments of the windows awaiting a tangent (at most `capacity` of them)."""
        if self.schedule.fit_until is None or self.dim is None:
            return 0
        windows = math.ceil(self.schedule.fit_until / self.settings.every)
        return min(windows, self.capacity) * moments_bytes(self.dim)

    def _room_for_rows(self) -> int:
        kept = sum(pending.kept.bytes for pending in self.pending if pending.kept is not None)
        return max(0, self.max_pending_bytes - self.moments_bytes() - kept)

    def add(self, hidden: torch.Tensor, gradient: torch.Tensor, rows: torch.Tensor, *loss: torch.Tensor) -> None:
        """Pool one micro-batch: its rescaled dL/dh and, for a tangent being fitted, its activations at the rows."""
        finite = self.window.add(gradient, rows, *loss)
        if self.schedule.fitting and self.schedule.activations is not None:  # pooled for the next fit
            mask = (rows & finite).reshape(-1)
            self.schedule.activations.update(hidden.reshape(-1, hidden.shape[-1]).float(), mask=mask)

    def close(self, step: int, *, sharded: bool) -> tuple[list[dict[str, Any]], ProbeSums | None, Subspace | None]:
        """Close the window whose last weights are those of `step`; fit the tangent if due."""
        window, self.window = self.window, None
        rows: list[dict[str, Any]] = []
        sums = None
        if window is not None and window.reads:
            sums = window.reduced(sharded=sharded)
            if window.bases is not None and sums.moments.count:
                columns = self._drawn(window.bases, step)
                scored = scored_sums(sums, columns)
                rows.append(self._row(scored, columns, step, window.first_step, window.reads, False))
            elif sums.moments.count:
                self._await_tangent(window, sums, step, sharded=sharded)
        fitted = self.schedule.fit(step + 1, self.device, sharded=sharded) if self.schedule.due(step + 1) else None
        if fitted is not None:
            rows.extend(self._score_pending(sharded=sharded))
        return rows, sums, fitted

    def _await_tangent(self, window: WindowSums, sums: ProbeSums, step: int, *, sharded: bool) -> None:
        """Keep a closed window until the tangent exists (with its rows if every rank kept them all)."""
        kept = window.kept is not None
        if sharded:  # kept on every rank
            kept = float(distributed.all_reduce_sum(torch.tensor(float(not kept), dtype=torch.float64))) == 0.0
        if not kept and self.keep_rows:
            self.keep_rows = False
            warnings.warn(
                f"The windows awaiting the tangent at split point '{self.path}' hold more gradient rows than max_pending_bytes leaves them ({self._room_for_rows() / 2**20:.0f} MiB besides the moments): from step {window.first_step} on they keep their moments only, and their rows will have no bootstrap interval. Raise max_pending_bytes, use a larger `every` or fewer early steps to keep them.",
                LiveProbeWarning,
                stacklevel=5,
            )
        closed = _Pending(sums, window.kept if kept else None, step, window.first_step, window.reads)
        if self.pending and len(self.pending) >= self.capacity and self.pending[-1].windows >= self.span:
            for first, later in zip(self.pending[::2], self.pending[1::2], strict=False):  # halve them: pairs merge
                first.absorb(later, sharded=sharded)
            self.pending = self.pending[::2]
            self.span *= 2
        if self.pending and self.pending[-1].windows < self.span:
            self.pending[-1].absorb(closed, sharded=sharded)
        else:
            self.pending.append(closed)

    def _score_pending(self, *, sharded: bool) -> list[dict[str, Any]]:
        rows, bases = [], self.schedule.bases
        for pending in self.pending:
            energy = None
            if pending.kept is not None:
                energy = pending.kept.tangent_energies(bases.tangent_block)
                if sharded:  # every rank's sequences, rank 0's first
                    energy = torch.cat(distributed.all_gather_objects(energy.cpu())).to(energy.device)
            columns = self._drawn(bases, pending.step)
            sums = retrospective_sums(pending.sums, columns, energy)
            rows.append(self._row(sums, columns, pending.step, pending.first_step, pending.micro_batches, True))
        self.pending, self.span, self.keep_rows = [], 1, True
        return rows

    def _drawn(self, bases: SubspaceColumns, step: int) -> SubspaceColumns:
        """The window's tangent with its own controls and random subspaces, drawn from its row's ``draw_seed``."""
        seed = {self.schedule.kind.value: self._draw_seed(step)}
        return SubspaceColumns.draw(bases.tangents, n_controls=bases.n_controls, n_random=bases.n_random, seed=seed)

    def _draw_seed(self, step: int) -> int:
        """The seed of the draws of the window whose last weights are those of `step` (its row's ``draw_seed``)."""
        return row_seed(self.settings.seed, step=step, split_point=self.path, kind=self.schedule.kind.value)

    def _row(self, sums: ProbeSums, columns: SubspaceColumns, *window: Any) -> dict:
        """The row of a window: (step, first_step, micro_batches, retrospective) are `window`."""
        step, first_step, micro_batches, retrospective = window
        kind, s = self.schedule.kind.value, self.settings
        with warnings.catch_warnings():  # a window of a few sequences: its row's n_sequences says so
            warnings.simplefilter("ignore", DegenerateStatisticsWarning)
            args = (s.seed, s.n_bootstrap, s.confidence)
            result = build_results(sums, columns, *args, objective=self.objective, split_point=self.path)[kind]
        where = {"layer": self.layer, "path": self.path, "kind": kind, "fitted_at": self.schedule.fitted_at}
        row = live_row(
            result, step=step, first_step=first_step, micro_batches=micro_batches, retrospective=retrospective, **where
        )
        return {**row, "draw_seed": self._draw_seed(step), "n_random": columns.n_random}


@dataclasses.dataclass
class _KeptBatch:
    """A micro-batch's gradient rows, kept for a tangent that does not exist yet."""

    rows: torch.Tensor
    finite: torch.Tensor
    shape: tuple[int, int]


@dataclasses.dataclass
class KeptRows:
    """The gradient rows a window awaiting a tangent kept, and which of its sequences have rows, per micro-batch."""

    batches: list[_KeptBatch]
    has_rows: list[torch.Tensor]
    device: torch.device

    @property
    def bytes(self) -> int:
        """The bytes of the rows held."""
        return sum(batch.rows.numel() * batch.rows.element_size() for batch in self.batches)

    def extend(self, later: KeptRows) -> KeptRows:
        """Append the rows of the window that follows. Returns self."""
        self.batches.extend(later.batches)
        self.has_rows.extend(later.has_rows)
        return self

    def tangent_energies(self, tangents: TangentBlock) -> torch.Tensor:
        """This process's per-sequence energies in `tangents`, as `WindowSums.add` computes a live window's."""
        parts = []
        for batch in self.batches:
            probed = torch.ones(batch.shape, dtype=torch.bool, device=batch.rows.device)
            energy = batch_energies(batch.rows.view(*batch.shape, -1), probed, tangents).energy
            parts.append(torch.where(batch.finite, energy, 0))
        width = tangents.n_tangents
        energy = torch.cat(parts) if parts else torch.zeros(0, width, dtype=torch.float64, device=self.device)
        with_rows = torch.cat(self.has_rows) if self.has_rows else torch.zeros(0, dtype=torch.bool, device=self.device)
        return energy[with_rows]


class WindowSums:
    """The sums of one window at one split point of width `dim`, on the gradients' `device`."""

    def __init__(self, dim: int, device: Any, bases: SubspaceColumns | None, first_step: int, max_kept_bytes: int = 0):
        self.dim, self.device, self.bases, self.first_step = dim, torch.device(device), bases, first_step
        self.tangents = bases.tangent_block if bases is not None else None
        self.moments = MomentAccumulator(dim, device=self.device)
        self.energies, self.totals, self.has_rows, self.finite = [], [], [], []
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self.loss_count = torch.zeros((), dtype=torch.float64, device=self.device)
        self.n_sequences = 0
        self.kept = KeptRows([], self.has_rows, self.device) if bases is None and max_kept_bytes > 0 else None
        self.room = max_kept_bytes  # the bytes of rows it may still keep

    @property
    def reads(self) -> int:
        """Micro-batches added."""
        return len(self.finite)

    def add(self, gradient: torch.Tensor, rows: torch.Tensor, *loss: torch.Tensor) -> torch.Tensor:
        """Add one micro-batch (rescaled dL/dh, rows, loss finite, loss sum and terms); return its "finite" flag."""
        loss_finite, loss_sum, loss_count = loss
        energies = batch_energies(gradient, rows, self.tangents)
        energy, total, flat_rows = energies.energy, energies.total, energies.rows
        finite = loss_finite & torch.isfinite(total.sum())
        if energy is not None:
            self.energies.append(torch.where(finite, energy, 0))
        self.totals.append(torch.where(finite, total, 0))
        kept = rows & finite
        self.has_rows.append(kept.any(1))
        self.moments.update(flat_rows, mask=kept.reshape(-1))
        zero = torch.zeros((), dtype=torch.float64, device=self.device)
        self.loss_sum = self.loss_sum + torch.where(finite, loss_sum.double(), zero)
        self.loss_count = self.loss_count + torch.where(finite, loss_count.double(), zero)
        self.finite.append(finite)
        self.n_sequences += gradient.shape[0]
        if self.kept is not None:  # a window without a tangent keeps its rows, or drops them all past the bound
            self.room -= flat_rows.numel() * flat_rows.element_size()
            if self.room < 0:
                self.kept = None
            else:
                self.kept.batches.append(_KeptBatch(flat_rows, finite, (gradient.shape[0], gradient.shape[1])))
        return finite

    def reduced(self, *, sharded: bool) -> ProbeSums:
        """Every rank's `ProbeSums` of the window (all ranks call it when `sharded`), energies in the tangents only."""
        keep, skipped = torch.zeros(0, dtype=torch.bool), 0  # which sequences have rows; micro-batches skipped
        if self.finite:  # one copy from the device
            flags = torch.cat([*self.has_rows, ~torch.stack(self.finite)]).cpu()
            n_with_rows = flags.shape[0] - len(self.finite)
            keep, skipped = flags[:n_with_rows], int(flags[n_with_rows:].sum())
        ids = torch.arange(keep.shape[0])[keep]
        index = ids.to(self.device, non_blocking=True)
        empty = torch.zeros(0, dtype=torch.float64, device=self.device)
        total = torch.cat(self.totals)[index] if self.totals else empty
        n_tangents = self.tangents.n_tangents if self.tangents is not None else 0
        energy = torch.cat(self.energies)[index] if self.energies else total.new_zeros(total.shape[0], n_tangents)
        losses, moments = torch.stack([self.loss_sum, self.loss_count]), self.moments
        counts = [ids.shape[0], self.n_sequences, skipped]
        if sharded:
            counters = torch.cat([losses, torch.tensor(counts, dtype=torch.float64).to(self.device)])
            losses, counts = distributed.all_reduce_sum(counters), []
            moments = distributed.all_reduce_moments(moments)
            parts = distributed.all_gather_objects(
                (energy.cpu(), total.cpu())
            )  # rank 0's sequences first, then 1's...
            energy = torch.cat([part[0] for part in parts]).to(self.device)
            total = torch.cat([part[1] for part in parts]).to(self.device)
            ids = torch.arange(total.shape[0])
        *read, n_rows = torch.cat([losses, moments.n.reshape(1)]).tolist()
        moments.known_count(n_rows)
        loss_sum, loss_count, n_sequences, usable, skipped = [*read, *counts]
        tally = Tally(int(usable), 0, int(skipped))
        return ProbeSums(energy, total, ids, moments, loss_sum, loss_count, tally, int(n_sequences))


def _tangent_columns(columns: SubspaceColumns) -> list[int]:
    return [columns.tangent_column(name) for name in columns.tangents]


def _scatter(sums: ProbeSums) -> torch.Tensor:
    """The window's G^T G, float64 (from its moments, reduced over every rank)."""
    return sums.moments.second_moment() * sums.moments.count


def scored_sums(sums: ProbeSums, columns: SubspaceColumns) -> ProbeSums:
    """A window's reduced sums with its energy in every subspace: the tangents' summed, the others' from its scatter."""
    energy = columns.energies_of_scatter(_scatter(sums))
    tangent_energy = sums.sequence_energy.sum(0).to(energy)
    for position, column in enumerate(_tangent_columns(columns)):  # integer indices: no index copied to the device
        energy[column] = tangent_energy[position]
    return dataclasses.replace(sums, column_energy=energy)


def retrospective_sums(sums: ProbeSums, columns: SubspaceColumns, sequence_energy: torch.Tensor | None) -> ProbeSums:
    """A window closed before its tangent, scored with it: from its kept rows' energies, else from its moments alone."""
    # without rows: one pseudo-sequence of energy tr(Q^T (G^T G) Q) (the same shares, a NaN interval)
    if sequence_energy is not None:
        return scored_sums(dataclasses.replace(sums, sequence_energy=sequence_energy), columns)
    scatter = _scatter(sums)
    energy = columns.energies_of_scatter(scatter)
    pseudo = {"sequence_total": torch.trace(scatter)[None], "sequence_id": torch.zeros(1, dtype=torch.long)}
    return dataclasses.replace(
        sums, sequence_energy=energy[_tangent_columns(columns)][None], column_energy=energy, **pseudo
    )


class TangentSchedule:
    """When the tangent of one split point exists, what it is, and the activation moments it is fitted on."""

    def __init__(self, kind: LiveTangent, path: str, *, nb_concepts: int, n_controls: int, seed: int, **plan: Any):
        self.kind, self.path, self.nb_concepts, self.n_controls, self.seed = kind, path, nb_concepts, n_controls, seed
        self.n_random = n_controls if plan.get("n_random") is None else plan["n_random"]
        self.fit_until, self.call, self._given = plan.get("fit_until"), plan.get("call"), plan.get("given")
        # the activations pooled, the tangent, its bases (it, its controls and the random subspaces), when fitted
        self.activations = self.tangent = self.bases = self.fitted_at = None
        if (given := self._given) is not None and given.split_point not in (None, path):
            raise InvalidInputError(
                f"The given tangent was fitted at split point '{given.split_point}' but the live probe reads '{path}'. Give a tangent fitted at '{path}', or attach the probe at '{given.split_point}'."
            )
        if given is not None:
            refuse_other_call(given.call, self.call, "The given tangent", "TrainingProbe(..., call=...)")

    def start(self, dim: int, device: torch.device) -> None:
        """Prepare for a split point of width d on `device` (the first gradient's); checks a given tangent's width."""
        if self._given is not None and self.tangent is None:
            if self._given.dim != dim:
                raise InvalidInputError(
                    f"The {self.kind.value} tangent lives in R^{self._given.dim} but split point '{self.path}' has d={dim}: it was fitted on another layer or model. Fit it at this split point of this model."
                )
            self._use(self._given, device)
        if self.fitting and self.activations is None:
            check_control_room(self.nb_concepts, dim)
            self.activations = MomentAccumulator(dim, device=device)

    def resume(self, subspace: Subspace) -> None:
        """Take up the tangent a stopped run fitted (a resumed run scores its first window against it)."""
        self._given, self.fitted_at = subspace, subspace.step

    @property
    def fitting(self) -> bool:
        """Whether training activations are being pooled for a fit now."""
        return self.kind is LiveTangent.REFIT or (self.kind is LiveTangent.EARLY and self.tangent is None)

    def due(self, steps_done: int) -> bool:
        """Whether a fit is due once `steps_done` optimizer steps are done."""
        if not self.fitting or self.activations is None:
            return False
        since = steps_done - (self.fitted_at or 0)
        return steps_done >= self.fit_until if self.kind is LiveTangent.EARLY else since >= self.fit_until

    def fit(self, steps_done: int, device: torch.device, *, sharded: bool) -> Subspace | None:
        """Fit the tangent on the rows pooled (over every rank when `sharded`); None when no row was pooled yet."""
        moments = distributed.all_reduce_moments(self.activations) if sharded else self.activations
        if moments.count == 0:
            return None
        model = OrthonormalConceptModel(self.nb_concepts, moments.dim, center=True, device=str(moments.device))
        model.merge(lambda _: moments)
        info = {"fitted_on_steps": [self.fitted_at or 0, steps_done], "rows": moments.count}
        subspace = model.get_subspace().replace(
            name=self.kind.value, method="pca", split_point=self.path, call=self.call, step=steps_done, info=info
        )
        self.fitted_at = steps_done
        self._use(subspace, device)
        self.activations = MomentAccumulator(moments.dim, device=moments.device) if self.fitting else None
        return subspace

    def _use(self, subspace: Subspace, device: torch.device) -> None:
        self.tangent = tangent = subspace.to(device=device, dtype=torch.float32)
        self.bases = SubspaceColumns.draw(
            {self.kind.value: tangent}, n_controls=self.n_controls, n_random=self.n_random, seed=self.seed
        )
