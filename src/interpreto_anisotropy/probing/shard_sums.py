# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What one shard of a probe keeps of its batches: streaming sums on the device, never the gradients themselves."""

from __future__ import annotations

import torch

from ..commons.accumulators import MomentAccumulator
from .breakdown import Breakdown
from .energies import batch_energies, sequences_with_rows
from .statistics import ProbeSums, SubspaceColumns, Tally
from .steps import Step

__all__ = ["ShardSums"]


class ShardSums:
    """The sums of one shard's probed batches, step by step.

    Args:
        columns: The tangents, controls and random subspaces the gradients are projected on.
        vocab_size: Token ids the breakdown by token counts (V).
        device: Where the sums live (the model's device).
    """

    def __init__(self, columns: SubspaceColumns, vocab_size: int, device: torch.device):
        self.columns = columns
        self.device = device
        dim = next(iter(columns.tangents.values())).dim
        self.per_sequence_energy: list[torch.Tensor] = []
        self.per_sequence_total: list[torch.Tensor] = []
        self.per_sequence_has_rows: list[torch.Tensor] = []
        self.per_sequence_id: list[torch.Tensor] = []
        self.moments = MomentAccumulator(dim, device=device)
        self.loss_sum = self.loss_count = torch.zeros((), dtype=torch.float64, device=device)
        self.breakdown = Breakdown(
            vocab_size,
            [columns.tangent_column(name) for name in columns.tangents],
            [columns.control_columns(name) for name in columns.tangents],
            device,
        )

    def add(self, step: Step) -> None:
        """Add one batch's energies, moments, breakdown and loss (no host synchronisation)."""
        # Zero rows where not probed (padding, past the cap, a non-finite batch).
        energies = batch_energies(step.gradient, step.probed, self.columns)
        self.per_sequence_energy.append(energies.energy)
        self.per_sequence_total.append(energies.total)
        self.per_sequence_has_rows.append(step.probed.any(1))
        self.per_sequence_id.append(step.sequence_ids)
        probed = step.probed.reshape(-1)
        self.moments.update(energies.rows, mask=probed)
        batch = step.batch
        self.breakdown.add(
            batch.get("original_input_ids", batch["input_ids"]).reshape(-1),
            (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0).reshape(-1),
            energies.token_energy,
            energies.token_total,
            probed,
        )
        self.loss_sum = self.loss_sum + step.loss_sum
        self.loss_count = self.loss_count + step.loss_count

    def finish(self, tally: Tally) -> tuple[ProbeSums, Breakdown]:
        """This shard's `ProbeSums` (its sequences with probed rows only, with the pass's `tally`) and breakdown."""
        sequence_energy, sequence_total, sequence_id = sequences_with_rows(
            self.per_sequence_energy,
            self.per_sequence_total,
            self.per_sequence_has_rows,
            self.per_sequence_id,
            self.columns.n_columns,
            self.device,
        )
        sums = ProbeSums(
            sequence_energy, sequence_total, sequence_id, self.moments, self.loss_sum, self.loss_count, tally
        )
        return sums, self.breakdown
