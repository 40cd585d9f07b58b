# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""One logging window's sums at one split point: what `GradientProbe._accumulate` keeps, micro-batch by micro-batch.

Per micro-batch the window adds the per-sequence energies in the stacked subspaces (when a tangent exists), the
sequences' squared gradient norms, float64 gradient moments (count, sum, G^T G), the loss and its number of terms,
and a 0-dim "all finite" flag; nothing waits for the device until the window closes. A window that opened without
a tangent keeps only its moments, from which the energy of any subspace Q is tr(Q^T (G^T G) Q) afterwards.
Memory: O(d^2) float64 for the moments plus O(sequences x subspaces) for the energies.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float

from ..commons.accumulators import MomentAccumulator
from ..probing.energies import batch_energies, sequences_with_rows
from ..probing.statistics import ProbeSums, SubspaceColumns, Tally

__all__ = ["WindowSums"]


class WindowSums:
    """The sums of one window at one split point.

    Args:
        dim: The split point's width d.
        device: Where the sums live (the gradients' device).
        bases: The window's tangent, its controls and random subspaces (`SubspaceColumns`), or None
            when no tangent exists yet (moments only).
        first_step: The optimizer step of the window's first weights.

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
    ):
        self.dim = dim
        self.device = torch.device(device)
        self.bases = bases
        self.first_step = first_step
        self.moments = MomentAccumulator(dim, device=self.device)
        self.energies: list[torch.Tensor] = []
        self.totals: list[torch.Tensor] = []
        self.has_rows: list[torch.Tensor] = []
        self.finite: list[torch.Tensor] = []
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self.loss_count = torch.zeros((), dtype=torch.float64, device=self.device)
        self.n_sequences = 0

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
        """Add one micro-batch: its (rescaled) dL/dh, its gradient rows, whether its loss is finite, its loss and terms.

        A micro-batch with a non-finite loss or a non-finite value at a gradient row adds nothing but its flag: its
        finiteness is read from its rows' squared norms (no extra pass over the gradient), then its sums are masked.

        Returns:
            The micro-batch's 0-dim "finite" flag.
        """
        energies = batch_energies(gradient, rows, self.bases)
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
        return finite

    def skipped_batches(self) -> int:
        """Micro-batches with non-finite values (reads the device)."""
        return int((~torch.stack(self.finite)).sum()) if self.finite else 0

    def probe_sums(self) -> ProbeSums:
        """The window's `ProbeSums` (this process's), as `GradientProbe` hands them to `build_results`.

        Without a tangent, the per-sequence energies are empty (0, 0): score them with `retrospective_sums`.
        """
        sizes = [part.shape[0] for part in self.totals]
        ids = list(torch.arange(sum(sizes)).split(sizes)) if sizes else []
        n_subspaces = self.bases.n_columns if self.bases is not None else 0
        energies = self.energies if self.bases is not None else []
        energy, total, sequence_id = sequences_with_rows(
            energies, self.totals if energies else [], self.has_rows, ids, n_subspaces, self.device
        )
        tally = Tally(usable_sequences=self.n_sequences, skipped_batches=self.skipped_batches())
        n_sequences = int(torch.cat(self.has_rows).sum()) if self.has_rows else 0
        return ProbeSums(energy, total, sequence_id, self.moments, self.loss_sum, self.loss_count, tally, n_sequences)


def retrospective_sums(sums: ProbeSums, columns: SubspaceColumns) -> ProbeSums:
    """A window's sums scored from its gradient moments: one pseudo-sequence holding the whole window.

    The energy of the rows in a subspace Q is tr(Q^T (G^T G) Q) = ||G Q||_F^2, so the energy shares of the tangent,
    its controls and the random subspaces are those the rows would give; only the bootstrap interval, which needs
    each sequence's energies, is lost (NaN).

    Args:
        sums: The window's sums (`WindowSums.probe_sums`).
        columns: The scored subspaces.

    Returns:
        The same sums with per-"sequence" energies (1, S) and total (1,).
    """
    moments = sums.moments
    scatter = moments.second_moment() * moments.count  # G^T G, float64
    return ProbeSums(
        columns.energies_of_scatter(scatter)[None],
        torch.trace(scatter)[None],
        torch.zeros(1, dtype=torch.long),
        moments,
        sums.loss_sum,
        sums.loss_count,
        sums.tally,
        sums.n_sequences,
    )
