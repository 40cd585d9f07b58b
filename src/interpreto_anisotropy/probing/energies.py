# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Gradient energies in stacked subspaces, per sequence: the one computation `GradientProbe` and the live
`TrainingProbe` share, so that their energy shares agree to the last bit on the same gradients.

A batch's gradient rows (b * l, d) are projected once onto every basis side by side (d, K); the squared
coordinates are summed per subspace (K, S) and per sequence, in float32 products and float64 sums.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int

from ..commons import distributed
from ..tangents.subspace import Subspace

__all__ = ["stack_bases", "batch_energies", "sequences_with_rows", "gather_sequences"]


def stack_bases(
    tangents: dict[str, Subspace], controls: dict[str, torch.Tensor]
) -> tuple[Float[torch.Tensor, "d K"], Float[torch.Tensor, "K S"]]:
    """All bases side by side (tangent, then its controls, per tangent) and the column -> subspace membership."""
    columns: list[torch.Tensor] = []
    owners: list[int] = []
    subspace_index = 0
    for name, tangent in tangents.items():
        for basis in [tangent.basis, *controls[name]]:
            columns.append(basis)
            owners.extend([subspace_index] * basis.shape[1])
            subspace_index += 1
    stacked = torch.cat(columns, dim=1).float()
    membership = torch.zeros(len(owners), subspace_index, device=stacked.device)
    membership[torch.arange(len(owners)), torch.tensor(owners)] = 1.0
    return stacked, membership


def batch_energies(
    gradient: Float[torch.Tensor, "b l d"],
    probed: Bool[torch.Tensor, "b l"],
    stacked: Float[torch.Tensor, "d K"] | None,
    membership: Float[torch.Tensor, "K S"] | None,
) -> tuple[Float[torch.Tensor, "b S"] | None, Float[torch.Tensor, " b"], Float[torch.Tensor, "n d"]]:
    """Per-sequence energies of a batch's probed gradient rows in every subspace, and its rows.

    Every position is a row, zero where not probed: fixed shapes and masks instead of boolean indexing keep this
    free of host synchronisation, and a non-finite value outside `probed` adds nothing.

    Args:
        gradient: dL/dh, (b, l, d).
        probed: The rows that count, (b, l).
        stacked: The bases side by side (`stack_bases`), (d, K); None: totals and rows only.
        membership: Column -> subspace, (K, S).

    Returns:
        (energy of each sequence in each subspace (b, S) float64 or None, squared norm of each sequence (b,)
        float64, the rows (b * l, d) float32, zero where not probed).
    """
    batch_size, length, width = gradient.shape
    with torch.autocast(gradient.device.type, enabled=False):  # float32 products, even under a caller's autocast
        rows = torch.where(probed.reshape(-1)[:, None], gradient.reshape(-1, width), 0).float()
        energy = None
        if stacked is not None and membership is not None:
            token_energy = (rows @ stacked).square() @ membership
            energy = token_energy.view(batch_size, length, -1).double().sum(1)
        total = rows.square().sum(1).view(batch_size, length).double().sum(1)
    return energy, total, rows


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
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every rank's per-sequence energies (n_seq, S) and totals (n_seq,), in sequence order."""
    parts = distributed.all_gather_objects((ids.cpu(), energy.cpu(), total.cpu()))
    order = torch.argsort(torch.cat([part[0] for part in parts]))
    energy = torch.cat([part[1] for part in parts])[order]
    total = torch.cat([part[2] for part in parts])[order]
    return energy.to(device), total.to(device)
