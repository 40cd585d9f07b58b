# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""From the probe's sums to its results: energy shares, controls, p-values, bootstrap intervals, IsoScore*.

`GradientProbe.run` accumulates `ProbeSums` batch by batch, reduces them across ranks, and hands them to
`build_results`, which computes every statistic of a `ProbeResult` from the sums alone.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int

from ..commons.accumulators import MomentAccumulator, top_eigenvectors
from ..errors import DegenerateStatisticsWarning, InvalidInputError
from ..metrics.isotropy import isoscore_star_from_covariance, isoscore_star_from_trace_and_norm
from ..tangents.controls import analytic_null, p_value
from ..tangents.subspace import Subspace
from .objectives import Objective
from .result import ProbeResult

__all__ = ["ProbeSums", "Tally", "build_results"]

#: Fewer probe sequences than this give a bootstrap interval too unreliable to report without a warning.
MIN_BOOTSTRAP_SEQUENCES = 10


@dataclass
class Tally:
    """What one pass over the inputs counted on this shard (filled by `GradientProbe._iterate` as it ends).

    Attributes:
        usable_sequences: Sequences long enough for the objective.
        skipped_sequences: Sequences too short for it.
        skipped_batches: Batches with non-finite values.
        first_nonfinite: (batch index, sequence ids) of the first non-finite batch, if any.
    """

    usable_sequences: int = 0
    skipped_sequences: int = 0
    skipped_batches: int = 0
    first_nonfinite: tuple[int, torch.Tensor] | None = None


@dataclass
class ProbeSums:
    """The sums `GradientProbe.run` accumulates, then reduces across ranks, then builds results from.

    Attributes:
        sequence_energy: Energy of each probed sequence in each subspace, (n_seq, S), float64.
        sequence_total: Squared gradient norm of each probed sequence, (n_seq,), float64.
        sequence_id: Index of each probed sequence in the inputs, (n_seq,).
        moments: Float64 moments of the probed gradient rows.
        loss_sum: Sum of the loss terms (a 0-dim tensor before the reduction, a float after).
        loss_count: Number of loss terms (likewise).
        tally: The counts of `_iterate` (this shard's, then every rank's).
        n_sequences: Probed sequences over every rank (after the reduction).
    """

    sequence_energy: Float[torch.Tensor, "n S"]
    sequence_total: Float[torch.Tensor, " n"]
    sequence_id: Int[torch.Tensor, " n"]
    moments: MomentAccumulator
    loss_sum: Any
    loss_count: Any
    tally: Tally
    n_sequences: int = 0


def build_results(
    sums: ProbeSums,
    tangents: dict[str, Subspace],
    controls: dict[str, torch.Tensor],
    n_controls: int,
    seed: int,
    n_bootstrap: int,
    confidence: float,
    objective: Objective,
    split_point: str,
) -> dict[str, ProbeResult]:
    """The `ProbeResult` of each tangent from the sums reduced over every rank.

    Args:
        sums: The reduced sums (per-sequence energies (n_seq, S), totals (n_seq,), gradient moments, counts).
        tangents: The tangents, in the order of the columns of `sums.sequence_energy`.
        controls: Each tangent's normal controls, (R, d, k).
        n_controls: R.
        seed: Seed of the bootstrap.
        n_bootstrap: Bootstrap resamples of sequences.
        confidence: Confidence level of the interval.
        objective: The objective the gradients are of.
        split_point: Where they were taken.

    Returns:
        {name: ProbeResult}; with a single probe sequence, ci_low and ci_high are NaN (no interval).

    Warns:
        DegenerateStatisticsWarning: Fewer than `MIN_BOOTSTRAP_SEQUENCES` probe sequences: the bootstrap interval
            resamples too few of them to be reliable (with one, it would have zero width, and is NaN instead).
    """
    moments, dim = sums.moments, next(iter(tangents.values())).dim
    n_tokens = moments.count
    shares = (sums.sequence_energy.sum(0) / sums.sequence_total.sum()).cpu().numpy()
    second_moment = moments.second_moment()
    covariance = moments.covariance()
    max_rank = max(subspace.rank for subspace in tangents.values())
    top_values, _ = top_eigenvectors(second_moment, max_rank)
    top_values = top_values.clamp(min=0)
    total_energy = float(torch.trace(second_moment))
    isoscore_full = float(isoscore_star_from_covariance(covariance, n=n_tokens))
    tangent_columns = [index * (1 + n_controls) for index in range(len(tangents))]
    alpha = (1 - confidence) / 2
    ci_low, ci_high = _bootstrap_intervals(
        sums.sequence_energy[:, tangent_columns],
        sums.sequence_total,
        n_bootstrap,
        torch.Generator().manual_seed(seed),
        alpha,
    )
    common = {
        "n_tokens": n_tokens,
        "n_sequences": sums.n_sequences,
        "dim": dim,
        "loss": sums.loss_sum / max(sums.loss_count, 1),
        "objective": objective.name,
        "reduction": objective.reduction.value,
        "split_point": split_point,
        "seed": seed,
        "n_skipped_batches": sums.tally.skipped_batches,
        "n_skipped_sequences": sums.tally.skipped_sequences,
        "isoscore_star": isoscore_full,
    }
    results: dict[str, ProbeResult] = {}
    column = 0
    for tangent_index, (name, tangent) in enumerate(tangents.items()):
        k = tangent.rank
        energy_share = float(shares[column])
        control_shares = shares[column + 1 : column + 1 + n_controls].astype(np.float64)
        oracle = float(top_values[:k].sum()) / total_energy if total_energy > 0 else 0.0
        without_tangent = float(_isoscore_star_in_complements(covariance, tangent.basis[None])[0])
        without_controls = _isoscore_star_in_complements(covariance, controls[name])
        results[name] = ProbeResult.build(
            name=name,
            method=tangent.method,
            rank=k,
            energy_share=energy_share,
            control_energy_shares=control_shares,
            analytic_null=analytic_null(min(max(energy_share, 0.0), 1.0), dim, k),
            p_value=p_value(energy_share, control_shares),
            ci_low=float(ci_low[tangent_index]),
            ci_high=float(ci_high[tangent_index]),
            confidence=confidence,
            oracle_energy_share=oracle,
            isoscore_star_without_tangent=without_tangent,
            isoscore_star_without_controls=without_controls,
            **common,
        )
        column += 1 + n_controls
    return results


def _isoscore_star_in_complements(covariance: torch.Tensor, bases: torch.Tensor) -> np.ndarray:
    """IsoScore* of the cloud with each rank-k subspace removed, computed inside its (d - k)-dim complement.

    With P an orthonormal basis of the complement of Q, the covariance there is P^T Sigma P, whose trace and
    squared Frobenius norm are tr(Sigma) - tr(Q^T Sigma Q) and ||Sigma||^2 - 2 ||Sigma Q||^2 + ||Q^T Sigma Q||^2:
    IsoScore* (shrinkage toward the scaled identity) needs nothing else, so P is never formed.

    Args:
        covariance: Covariance of the gradient cloud, (d, d), float64.
        bases: Orthonormal bases, (R, d, k).

    Returns:
        (R,) IsoScore* values of P^T Sigma P.
    """
    d, k = bases.shape[-2], bases.shape[-1]
    bases = bases.to(covariance)
    sigma_q = covariance @ bases
    inner = bases.transpose(-1, -2) @ sigma_q
    traces = torch.trace(covariance) - torch.diagonal(inner, dim1=-2, dim2=-1).sum(-1)
    norms = covariance.square().sum() - 2 * sigma_q.square().sum((-2, -1)) + inner.square().sum((-2, -1))
    return np.array(
        [float(isoscore_star_from_trace_and_norm(t, f, d - k)) for t, f in zip(traces, norms, strict=True)]
    )


def _bootstrap_intervals(
    energy: Float[torch.Tensor, "n S"],
    total: Float[torch.Tensor, " n"],
    n_resamples: int,
    generator: torch.Generator,
    alpha: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap interval [alpha, 1 - alpha] of each column's energy share, resampling sequences: ((S,), (S,)).

    Warns with fewer than `MIN_BOOTSTRAP_SEQUENCES` sequences; with one, every resample is that sequence, so the
    interval is NaN rather than a confident zero width.
    """
    if n_resamples < 1:
        raise InvalidInputError(f"n_bootstrap must be positive, got {n_resamples}.")
    n_sequences = total.shape[0]
    if n_sequences < MIN_BOOTSTRAP_SEQUENCES:
        reported = "is reported as NaN" if n_sequences == 1 else "is unreliable"
        warnings.warn(
            f"The bootstrap interval of the energy share resamples {n_sequences} probe sequence(s), fewer than "
            f"{MIN_BOOTSTRAP_SEQUENCES}: it {reported}. Give more probe texts.",
            DegenerateStatisticsWarning,
            stacklevel=4,
        )
    if n_sequences == 1:
        nan = np.full(energy.shape[1], np.nan)
        return nan, nan.copy()
    shares = _bootstrap_shares(energy, total, n_resamples, generator)
    return np.quantile(shares, alpha, axis=0), np.quantile(shares, 1 - alpha, axis=0)


def _bootstrap_shares(
    energy: Float[torch.Tensor, "n S"],
    total: Float[torch.Tensor, " n"],
    n_resamples: int,
    generator: torch.Generator,
    chunk: int = 250,
) -> np.ndarray:
    """Energy shares sum(energy) / sum(total) over multinomial resamples of sequences, (n_resamples, S).

    The draws come from a CPU generator (the same intervals on every device); resamples are taken `chunk` at a
    time, so memory stays O(chunk * n) whatever `n_resamples`.
    """
    n_sequences = total.shape[0]
    shares = []
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        draws = torch.randint(n_sequences, (size, n_sequences), generator=generator)
        counts = torch.zeros(size, n_sequences, dtype=torch.float64)
        counts.scatter_add_(1, draws, torch.ones_like(draws, dtype=torch.float64))
        counts = counts.to(total.device)
        shares.append(((counts @ energy) / (counts @ total)[:, None]).cpu())
    return torch.cat(shares).numpy()
