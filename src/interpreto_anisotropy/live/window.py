# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""One logging window's sums at one split point (`WindowSums`), and how a closed window is scored and reduced.

The tangents' energies are projected per row as `GradientProbe` does; the controls' and random subspaces' come from
the window's G^T G once it closes, tr(Q^T G^T G Q) (`scored_sums`), within float32 rounding of the post-hoc probe
(at most 7e-7 relative in the tests). A window without a tangent yet keeps its moments and, within
`max_kept_bytes`, its float32 gradient rows (`KeptRows`), to be scored exactly once the tangent exists; consecutive
such windows merge into one (`merged_sums`) as a window of their steps would have summed them. Over data-parallel
ranks, one all-reduce of counters and moments and one gather of the per-sequence energies (rank 0's first).
docs/how-to/live-probe.md ("How the live figures are computed", "Real training setups") has the details.
"""

from __future__ import annotations

import dataclasses

import torch
from jaxtyping import Bool, Float

from ..commons import distributed
from ..commons.accumulators import MomentAccumulator
from ..probing.statistics import ProbeSums, SubspaceColumns, Tally, TangentBlock
from ..probing.steps import batch_energies

__all__ = [
    "WindowSums",
    "KeptRows",
    "merged_sums",
    "scored_sums",
    "retrospective_sums",
    "reduce_window",
    "gather_sequence_energy",
    "on_every_rank",
]


@dataclasses.dataclass
class _KeptBatch:
    """A micro-batch's gradient rows, kept for a tangent that does not exist yet."""

    rows: Float[torch.Tensor, "n d"]
    finite: Bool[torch.Tensor, ""]
    shape: tuple[int, int]


@dataclasses.dataclass
class KeptRows:
    """The gradient rows a window awaiting a tangent kept, micro-batch by micro-batch, and which of its sequences
    have rows (one flag tensor per micro-batch); consecutive windows merged keep theirs end to end (`extend`)."""

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

    def tangent_energies(self, tangents: TangentBlock) -> Float[torch.Tensor, "n T"]:
        """The per-sequence energies in `tangents`, computed as `WindowSums.add` computes a live window's (this
        process's sequences with rows, in order)."""
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
    """The sums of one window at one split point of width `dim`, on the gradients' `device`.

    `bases` are the window's tangent, controls and random subspaces, or None while no tangent exists (then the
    window keeps its moments, and its gradient rows up to `max_kept_bytes`); `first_step` is the optimizer step of
    its first weights.

    Examples:
        >>> window = WindowSums(8, "cpu", None, first_step=0)
        >>> _ = window.add(torch.randn(2, 3, 8), torch.ones(2, 3, dtype=torch.bool), torch.tensor(True),
        ...            torch.tensor(1.0), torch.tensor(4))
        >>> window.probe_sums().moments.count
        6
    """

    def __init__(
        self,
        dim: int,
        device: torch.device | str,
        bases: SubspaceColumns | None,
        *,
        first_step: int,
        max_kept_bytes: int = 0,
    ):
        self.dim = dim
        self.device = torch.device(device)
        self.bases = bases
        self.tangents = bases.tangent_block if bases is not None else None
        self.first_step = first_step
        self.moments = MomentAccumulator(dim, device=self.device)
        self.energies: list[torch.Tensor] = []
        self.totals: list[torch.Tensor] = []
        self.has_rows: list[torch.Tensor] = []
        self.finite: list[torch.Tensor] = []
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self.loss_count = torch.zeros((), dtype=torch.float64, device=self.device)
        self.n_sequences = 0
        self.max_kept_bytes = max_kept_bytes
        self.kept: list[_KeptBatch] | None = [] if bases is None and max_kept_bytes > 0 else None
        self.kept_bytes = 0

    @property
    def reads(self) -> int:
        """Micro-batches added."""
        return len(self.finite)

    def add(
        self,
        gradient: Float[torch.Tensor, "b l d"],
        rows: Bool[torch.Tensor, "b l"],
        loss_finite: Bool[torch.Tensor, ""],
        loss_sum: Float[torch.Tensor, ""],
        loss_count: torch.Tensor,
    ) -> Bool[torch.Tensor, ""]:
        """Add one micro-batch (its rescaled dL/dh, its gradient rows, whether its loss is finite, its loss and terms);
        return its 0-dim "finite" flag. A non-finite one (read from its rows' squared norms) adds nothing else."""
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
        self._keep(flat_rows, finite, (gradient.shape[0], gradient.shape[1]))
        return finite

    def _keep(self, flat_rows: torch.Tensor, finite: torch.Tensor, shape: tuple[int, int]) -> None:
        """Keep a micro-batch's rows (a window without a tangent), or drop them all once they pass the bound."""
        if self.kept is None:
            return
        size = flat_rows.numel() * flat_rows.element_size()
        if self.kept_bytes + size > self.max_kept_bytes:
            self.kept, self.kept_bytes = None, 0
            return
        self.kept.append(_KeptBatch(flat_rows, finite, shape))
        self.kept_bytes += size

    def _flags_on_host(self) -> tuple[torch.Tensor, int]:
        """Which of the window's sequences have gradient rows (on the host) and how many micro-batches had
        non-finite values, read from the device in one copy."""
        if not self.finite:
            return torch.zeros(0, dtype=torch.bool), 0
        flags = torch.cat([*self.has_rows, ~torch.stack(self.finite)]).cpu()
        n_with_rows = flags.shape[0] - len(self.finite)
        return flags[:n_with_rows], int(flags[n_with_rows:].sum())

    def probe_sums(self) -> ProbeSums:
        """This process's `ProbeSums` of the window, its per-sequence energies in the tangents only ((n_seq, 0)
        without a tangent: see `retrospective_sums`; the other subspaces' come from `scored_sums`). Reads the device
        once (which sequences have rows)."""
        keep, skipped = self._flags_on_host()
        sequence_id = torch.arange(keep.shape[0])[keep]
        index = sequence_id.to(self.device, non_blocking=True)
        total = (
            torch.cat(self.totals)[index] if self.totals else torch.zeros(0, dtype=torch.float64, device=self.device)
        )
        n_tangents = self.tangents.n_tangents if self.tangents is not None else 0
        energy = torch.cat(self.energies)[index] if self.energies else total.new_zeros(total.shape[0], n_tangents)
        tally = Tally(usable_sequences=self.n_sequences, skipped_batches=skipped)
        n_sequences = int(sequence_id.shape[0])
        return ProbeSums(energy, total, sequence_id, self.moments, self.loss_sum, self.loss_count, tally, n_sequences)

    def kept_rows(self) -> KeptRows | None:
        """The gradient rows this window kept for a tangent that does not exist yet; None when it kept none."""
        return None if self.kept is None else KeptRows(self.kept, self.has_rows, self.device)


def _tangent_columns(columns: SubspaceColumns) -> list[int]:
    return [columns.tangent_column(name) for name in columns.tangents]


def _scatter(sums: ProbeSums) -> Float[torch.Tensor, "d d"]:
    """The window's G^T G, float64 (from its moments, reduced over every rank)."""
    return sums.moments.second_moment() * sums.moments.count


def scored_sums(sums: ProbeSums, columns: SubspaceColumns) -> ProbeSums:
    """A window's reduced sums with its energy in every subspace (`ProbeSums.column_energy`): the tangents' summed
    from their per-sequence energies, the controls' and the random subspaces' read from the window's scatter."""
    energy = columns.energies_of_scatter(_scatter(sums))
    tangent_energy = sums.sequence_energy.sum(0).to(energy)
    for position, column in enumerate(_tangent_columns(columns)):  # integer indices: no index copied to the device
        energy[column] = tangent_energy[position]
    return dataclasses.replace(sums, column_energy=energy)


def retrospective_sums(
    sums: ProbeSums, columns: SubspaceColumns, sequence_energy: Float[torch.Tensor, "n T"] | None
) -> ProbeSums:
    """A window that closed before its tangent existed (`sums` reduced over the ranks), scored with it, ready for
    `build_results`: as a live window given each sequence's energy in each tangent (n_seq, T) from the rows it kept;
    else from its moments alone, as one pseudo-sequence of energy tr(Q^T (G^T G) Q) (same shares, NaN interval)."""
    if sequence_energy is not None:
        return scored_sums(dataclasses.replace(sums, sequence_energy=sequence_energy), columns)
    scatter = _scatter(sums)
    energy = columns.energies_of_scatter(scatter)
    return dataclasses.replace(
        sums,
        sequence_energy=energy[_tangent_columns(columns)][None],
        sequence_total=torch.trace(scatter)[None],
        sequence_id=torch.zeros(1, dtype=torch.long),
        column_energy=energy,
    )


def merged_sums(first: ProbeSums, later: ProbeSums, *, sharded: bool) -> ProbeSums:
    """The reduced sums (`reduce_window`'s) of two consecutive windows as those of one window of their steps: their
    sequences end to end, numbered as one window numbers them, and `first`'s moments merged with `later`'s (in place)."""
    offset = first.sequence_id.shape[0] if sharded else first.tally.usable_sequences
    tally = Tally(
        first.tally.usable_sequences + later.tally.usable_sequences,
        0,
        first.tally.skipped_batches + later.tally.skipped_batches,
    )
    return ProbeSums(
        torch.cat([first.sequence_energy, later.sequence_energy]),
        torch.cat([first.sequence_total, later.sequence_total]),
        torch.cat([first.sequence_id, later.sequence_id + offset]),
        first.moments.merge(later.moments),
        first.loss_sum + later.loss_sum,
        first.loss_count + later.loss_count,
        tally,
        first.n_sequences + later.n_sequences,
    )


def reduce_window(sums: ProbeSums, *, sharded: bool) -> ProbeSums:
    """Every rank's sums of a window (all-reduced when `sharded`: all ranks must call it), identical on every rank,
    with the counters (loss sums and counts as floats) read as Python numbers, in one read of the device."""
    device = sums.moments.device
    tally = sums.tally
    losses = torch.stack([_device_scalar(sums.loss_sum, device), _device_scalar(sums.loss_count, device)])
    counts = [sums.n_sequences, tally.usable_sequences, tally.skipped_batches]
    moments, energy, total, ids = sums.moments, sums.sequence_energy, sums.sequence_total, sums.sequence_id
    if sharded:
        counters = torch.cat([losses, torch.tensor(counts, dtype=torch.float64).to(device)])
        losses, counts = distributed.all_reduce_sum(counters), []
        moments = distributed.all_reduce_moments(moments)
        parts = distributed.all_gather_objects((energy.cpu(), total.cpu()))  # rank 0's sequences first, then 1's...
        energy = torch.cat([part[0] for part in parts]).to(device)
        total = torch.cat([part[1] for part in parts]).to(device)
        ids = torch.arange(total.shape[0])
    *read, n_rows = torch.cat([losses, moments.n.reshape(1)]).tolist()
    moments.known_count(n_rows)
    loss_sum, loss_count, n_sequences, usable, skipped = [*read, *counts]
    return ProbeSums(
        energy, total, ids, moments, loss_sum, loss_count, Tally(int(usable), 0, int(skipped)), int(n_sequences)
    )


def _device_scalar(value: torch.Tensor | float, device: torch.device) -> torch.Tensor:
    """A float64 0-dim tensor on `device` (a Python number is copied there; a tensor is already there)."""
    return torch.as_tensor(value, dtype=torch.float64).to(device).reshape(())


def gather_sequence_energy(energy: torch.Tensor, *, sharded: bool) -> torch.Tensor:
    """Every rank's per-sequence energies (n_seq, T), rank 0's first (all ranks must call it when `sharded`)."""
    if not sharded:
        return energy
    parts = distributed.all_gather_objects(energy.cpu())
    return torch.cat(parts).to(energy.device)


def on_every_rank(flag: bool, *, sharded: bool) -> bool:
    """Whether `flag` holds on every rank (all ranks must call it when `sharded`)."""
    if not sharded:
        return flag
    missing = distributed.all_reduce_sum(torch.tensor(0.0 if flag else 1.0, dtype=torch.float64))
    return float(missing) == 0.0
