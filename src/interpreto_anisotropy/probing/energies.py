# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Gradient energies in stacked subspaces, per sequence: the one computation `GradientProbe` and the live
`TrainingProbe` share, so that their energy shares agree to the last bit on the same gradients.

A batch's gradient rows (b * l, d) are projected onto every subspace (`statistics.SubspaceColumns.energies`: the
bases side by side, one product per block); the squared coordinates are summed per subspace and per sequence, in
float32 products and float64 sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Bool, Float, Int

from ..commons import distributed

__all__ = ["BatchEnergies", "batch_energies", "sequences_with_rows", "gather_sequences"]


def batch_energies(
    gradient: Float[torch.Tensor, "b l d"], probed: Bool[torch.Tensor, "b l"], columns: Any | None
) -> BatchEnergies:
    """Energies of a batch's probed gradient rows in every subspace, per token and per sequence, and its rows.

    Every position is a row, zero where not probed: fixed shapes and masks instead of boolean indexing keep this
    free of host synchronisation, and a non-finite value outside `probed` adds nothing.

    Args:
        gradient: dL/dh, (b, l, d).
        probed: The rows that count, (b, l).
        columns: The subspaces (`statistics.SubspaceColumns`, whose `energies` projects rows); None: totals and
            rows only.

    Returns:
        The `BatchEnergies`.
    """
    batch_size, length, width = gradient.shape
    with torch.autocast(gradient.device.type, enabled=False):  # float32 products, even under a caller's autocast
        rows = torch.where(probed.reshape(-1)[:, None], gradient.reshape(-1, width), 0).float()
        token_energy = columns.energies(rows) if columns is not None else None
        token_total = rows.square().sum(1)
        energy = None if token_energy is None else token_energy.view(batch_size, length, -1).double().sum(1)
        total = token_total.view(batch_size, length).double().sum(1)
    return BatchEnergies(energy, total, rows, token_energy, token_total)


@dataclass
class BatchEnergies:
    """The energies of one batch.

    Attributes:
        energy: Energy of each sequence in each subspace, (b, S) float64, or None without subspaces.
        total: Squared gradient norm of each sequence, (b,) float64.
        rows: The gradient rows, (b * l, d) float32, zero where not probed.
        token_energy: Each row's energy in each subspace, (b * l, S) float32, or None.
        token_total: Each row's squared norm, (b * l,) float32.
    """

    energy: Float[torch.Tensor, "b S"] | None
    total: Float[torch.Tensor, " b"]
    rows: Float[torch.Tensor, "n d"]
    token_energy: Float[torch.Tensor, "n S"] | None
    token_total: Float[torch.Tensor, " n"]


def sequences_with_rows(
    energies: list[torch.Tensor],
    totals: list[torch.Tensor],
    has_rows: list[torch.Tensor],
    ids: list[torch.Tensor],
    n_subspaces: int,
    device: torch.device,
) -> tuple[Float[torch.Tensor, "n S"], Float[torch.Tensor, " n"], Int[torch.Tensor, " n"]]:
    """Per-sequence energies (n_seq, S), totals (n_seq,) and ids (n_seq,) of the sequences with probed tokens."""
    if not energies:
        empty = torch.zeros(0, dtype=torch.float64, device=device)
        return empty.view(0, 1).expand(0, n_subspaces), empty, torch.zeros(0, dtype=torch.long)
    keep = torch.cat(has_rows)
    return torch.cat(energies)[keep], torch.cat(totals)[keep], torch.cat(ids)[keep.cpu()]


def gather_sequences(
    ids: torch.Tensor, energy: torch.Tensor, total: torch.Tensor, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every rank's per-sequence energies (n_seq, S), totals (n_seq,) and ids (n_seq,), in sequence order."""
    parts = distributed.all_gather_objects((ids.cpu(), energy.cpu(), total.cpu()))
    every_id = torch.cat([part[0] for part in parts])
    order = torch.argsort(every_id)
    energy = torch.cat([part[1] for part in parts])[order]
    total = torch.cat([part[2] for part in parts])[order]
    return energy.to(device), total.to(device), every_id[order]
