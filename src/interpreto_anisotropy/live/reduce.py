# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""A window's sums over every data-parallel rank: one all-reduce of the counters and the moments, one gather of the
per-sequence energies (rank 0's sequences first, then rank 1's, ...), as `GradientProbe` reduces its shards.
Outside a process group it only reads the device. A window scored after its tangent was fitted gathers its
per-sequence tangent energies then, in the same order (`gather_sequence_energy`)."""

from __future__ import annotations

import torch

from ..commons import distributed
from ..probing.statistics import ProbeSums, Tally

__all__ = ["reduce_window", "gather_sequence_energy", "on_every_rank"]


def reduce_window(sums: ProbeSums, *, sharded: bool) -> ProbeSums:
    """Every rank's sums of a window (all ranks must call it), with the counters read as Python numbers.

    Args:
        sums: This rank's sums (`WindowSums.probe_sums`).
        sharded: Whether to all-reduce across the ranks of the process group.

    Returns:
        The reduced `ProbeSums` (identical on every rank), loss sums and counts as floats.
    """
    device = sums.moments.device
    tally = sums.tally
    counters = torch.stack(
        [
            torch.as_tensor(sums.loss_sum, dtype=torch.float64, device=device).reshape(()),
            torch.as_tensor(sums.loss_count, dtype=torch.float64, device=device).reshape(()),
            torch.tensor(float(sums.n_sequences), dtype=torch.float64, device=device),
            torch.tensor(float(tally.usable_sequences), dtype=torch.float64, device=device),
            torch.tensor(float(tally.skipped_batches), dtype=torch.float64, device=device),
        ]
    )
    moments, energy, total, ids = sums.moments, sums.sequence_energy, sums.sequence_total, sums.sequence_id
    if sharded:
        counters = distributed.all_reduce_sum(counters)
        moments = distributed.all_reduce_moments(moments)
        parts = distributed.all_gather_objects((energy.cpu(), total.cpu()))  # rank 0's sequences first, then 1's...
        energy = torch.cat([part[0] for part in parts]).to(device)
        total = torch.cat([part[1] for part in parts]).to(device)
        ids = torch.arange(total.shape[0])
    loss_sum, loss_count, n_sequences, usable, skipped = counters.tolist()
    return ProbeSums(
        energy, total, ids, moments, loss_sum, loss_count, Tally(int(usable), 0, int(skipped)), int(n_sequences)
    )


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
