# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What training added: the change of a ratio of sums between two probes of the same sequences, with a paired
bootstrap-t interval and a p-value of "no change" (ours, not the paper's; docs/statistics.md#what-training-added).

Both the energy share (sum_i e_i / sum_i t_i) and the energy ratio (sum_i e_i / sum_i n_i, n_i a sequence's mean
energy in the normal controls) are ratios of per-sequence sums. With the same probe sequences at a checkpoint (1)
and at the reference (0), D = A1/B1 - A0/B0; a resample draws sequence indices once and applies them at both
checkpoints (the pairing), and each resample is studentized by its own jackknife error, as `intervals` does for a
share. The interval is the smallest holding the equal-tailed and the symmetric bootstrap-t intervals; the p-value
of "no change" is the symmetric bootstrap-t test's, (1 + #{|t*_b| >= |D / se|}) / (B + 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float

from ..errors import InvalidInputError
from .intervals import _multipliers, _resample_counts

__all__ = ["PairedChange", "paired_change"]

#: Resamples whose |t*| is within this of |t| count as reaching it (rounding, not a real difference).
_TIE = 1e-12


@dataclass(frozen=True)
class PairedChange:
    """The change D of each statistic from the reference probe, (S,) each (NaN where not defined).

    Attributes:
        change: D = A1/B1 - A0/B0.
        low: Lower bound of the paired bootstrap-t interval.
        high: Upper bound.
        p_value: p-value of "no change" (D = 0 in the population), symmetric bootstrap-t.
        n_sequences: Paired sequences the change rests on.
    """

    change: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray
    n_sequences: int


def paired_change(
    numerators: tuple[Float[np.ndarray, "n S"], Float[np.ndarray, "n S"]],
    denominators: tuple[Float[np.ndarray, "n S"], Float[np.ndarray, "n S"]],
    *,
    n_resamples: int,
    confidence: float,
    generator: torch.Generator,
) -> PairedChange:
    """Change of S ratios of sums sum(a) / sum(b) from a reference probe (0) to another (1) of the same sequences.

    Args:
        numerators: (a0, a1): each sequence's numerator at the reference and at the checkpoint, (n, S) each, rows
            in the same sequence order.
        denominators: (b0, b1): likewise for the denominators.
        n_resamples: Multinomial resamples B of the sequences (the same draw at both probes).
        confidence: Level of the interval, in (0, 1).
        generator: CPU generator of the resamples.

    Returns:
        The `PairedChange`: NaN interval and p-value with fewer than two sequences or a zero denominator sum.

    Raises:
        InvalidInputError: n_resamples not positive, confidence outside (0, 1), or shapes that disagree.

    Examples:
        >>> a0 = np.array([[1.0], [2.0], [1.5], [3.0]]); b = np.array([[4.0], [5.0], [4.0], [6.0]])
        >>> found = paired_change((a0, 2 * a0), (b, b), n_resamples=200, confidence=0.9,
        ...                       generator=torch.Generator().manual_seed(0))
        >>> round(float(found.change[0]), 4), bool(found.low[0] <= found.change[0] <= found.high[0])
        (0.3947, True)
    """
    a0, a1, b0, b1 = (np.asarray(value, dtype=np.float64) for value in (*numerators, *denominators))
    _check(a0, a1, b0, b1, n_resamples, confidence)
    n = a0.shape[0]
    ones = np.ones((1, n))
    change, error = (value[0] for value in _change_and_error(ones, a0, a1, b0, b1))
    nan = np.full(a0.shape[1], np.nan)
    if n < 2 or not (np.all(b0.sum(0) > 0) and np.all(b1.sum(0) > 0)):
        return PairedChange(change, nan, nan.copy(), nan.copy(), n)
    studentized = np.concatenate(
        [
            _studentized(counts.numpy(), a0, a1, b0, b1, change)
            for counts in _resample_counts(n, n_resamples, generator)
        ]
    )
    below, above = _multipliers(studentized, confidence)
    low, high = change - _reach(below, error), change + _reach(above, error)
    return PairedChange(change, low, high, _p_value(studentized, change, error), n)


def _check(
    a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray, n_resamples: int, confidence: float
) -> None:
    if n_resamples < 1:
        raise InvalidInputError(f"n_bootstrap must be positive, got {n_resamples}.")
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence must be in (0, 1), got {confidence}.")
    if a0.ndim != 2 or a0.shape[0] == 0 or any(value.shape != a0.shape for value in (a1, b0, b1)):
        raise InvalidInputError(
            "The numerators and denominators at both probes must be (n_seq, S) arrays of the same n_seq > 0 paired "
            f"sequences, got shapes {[value.shape for value in (a0, a1, b0, b1)]}."
        )


def _change_and_error(
    counts: Float[np.ndarray, "B n"], a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray
) -> tuple[Float[np.ndarray, "B S"], Float[np.ndarray, "B S"]]:
    """D of each resample (sequence i drawn counts[b, i] times) and its jackknife standard error, (B, S) each.

    Leaving out one draw of sequence i at both probes gives D_(i), counts[b, i] times; se^2 = (m - 1) / m times the
    squared deviations of these m = sum(counts[b]) values from their mean, summed.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        sums = [counts @ value for value in (a0, a1, b0, b1)]  # (B, S) each
        change = sums[1] / sums[3] - sums[0] / sums[2]
        left_out = (sums[1][:, None] - a1) / (sums[3][:, None] - b1) - (sums[0][:, None] - a0) / (
            sums[2][:, None] - b0
        )  # (B, n, S)
    weights = counts[:, :, None]
    left_out = np.where(weights > 0, left_out, 0.0)
    m = counts.sum(1)[:, None]
    mean = (weights * left_out).sum(1) / m
    spread = (weights * (left_out - mean[:, None]) ** 2).sum(1)
    return change, np.sqrt((m - 1) / m * spread)


def _studentized(
    counts: Float[np.ndarray, "B n"],
    a0: np.ndarray,
    a1: np.ndarray,
    b0: np.ndarray,
    b1: np.ndarray,
    change: Float[np.ndarray, " S"],
) -> Float[np.ndarray, "B S"]:
    """(D*_b - D) / se*_b of each resample: 0 within `_TIE` (0 / 0 included), infinite for a zero se."""
    resampled, error = _change_and_error(counts, a0, a1, b0, b1)
    distance = resampled - change
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.abs(distance) <= _TIE, 0.0, distance / error)


def _reach(multiplier: Float[np.ndarray, " S"], error: Float[np.ndarray, " S"]) -> Float[np.ndarray, " S"]:
    """multiplier * se; a zero se reaches 0 (every resample equal) or infinity (an infinite multiplier)."""
    with np.errstate(invalid="ignore"):
        return np.where(error == 0, np.where(np.isinf(multiplier), np.inf, 0.0), multiplier * error)


def _p_value(
    studentized: Float[np.ndarray, "B S"], change: Float[np.ndarray, " S"], error: Float[np.ndarray, " S"]
) -> Float[np.ndarray, " S"]:
    """(1 + #{|t*_b| >= |D / se|}) / (B + 1): 1 for D = 0, NaN where every t* is NaN."""
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.where(change == 0, 0.0, np.abs(change) / error)
    present = (~np.isnan(studentized)).sum(0)
    reached = (np.abs(studentized) >= observed[None] - _TIE).sum(0)
    return np.where(present > 0, (1 + reached) / (1 + present), np.nan)
