# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""Bootstrap-t intervals over sequences, studentized by the jackknife: of an energy share, of what training added."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from ..commons.tensors import copied_to
from ..errors import DegenerateStatisticsWarning, InvalidInputError

#: Fewer probe sequences than this warn (`benchmarks/interval_coverage.py`: coverage under 0.93 below it).
MIN_BOOTSTRAP_SEQUENCES = 20

#: The names of the processes of `benchmarks/interval_coverage.py`, in the order of `MEASURED_COVERAGE`'s entries.
MEASURED_PROCESSES = ("homogeneous", "two types", "heavy-tailed two types")

#: {n_seq: coverage of the 95 % interval in each of `MEASURED_PROCESSES`} (`interval_coverage.py --seed 0`).
MEASURED_COVERAGE = {5: (0.954, 0.916, 0.872), 10: (0.946, 0.969, 0.908), 15: (0.942, 0.957, 0.928)}

#: Shares (or changes) closer than this are the same (rounding that a zero jackknife error must not make infinite).
_TIE = 1e-12

#: Resamples drawn at a time (the draws, hence the intervals, do not depend on anything else).
_DRAW_CHUNK = 250


def share_intervals(
    energy: Float[torch.Tensor, "n S"],
    total: Float[torch.Tensor, " n"],
    *,
    n_resamples: int,
    confidence: float,
    generator: torch.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap-t interval of each column's energy share sum(energy) / sum(total), resampling sequences."""
    _check_resampling(n_resamples, confidence)
    if energy.dim() != 2 or total.shape != energy.shape[:1] or total.shape[0] == 0:
        raise InvalidInputError(
            f"energy (n_seq, S) and total (n_seq,) must describe the same n_seq > 0 sequences, got shapes {tuple(energy.shape)} and {tuple(total.shape)}."
        )
    n_sequences = total.shape[0]
    if n_sequences < MIN_BOOTSTRAP_SEQUENCES:
        _warn_few(n_sequences)
    if n_sequences == 1 or not bool(total.sum() > 0):  # nothing to leave out, or no share defined
        nan = np.full(energy.shape[1], np.nan)
        return nan, nan.copy()
    ones = torch.ones(1, n_sequences, dtype=torch.float64, device=total.device)
    share, error = (value[0] for value in _share_and_error(ones, energy, total))
    studentized = [
        _studentized(counts, energy, total, share) for counts in _resample_counts(n_sequences, n_resamples, generator)
    ]
    *studentized, share, error = torch.cat([*studentized, share[None], error[None]]).cpu().numpy()  # one read
    below, above = _multipliers(np.stack(studentized), confidence)
    return _clipped(share, error, below, above)


def _check_resampling(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise InvalidInputError(f"n_bootstrap must be positive, got {n_resamples}.")
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence must be in (0, 1), got {confidence}.")


def _warn_few(n_sequences: int) -> None:
    """Warn of an unreliable (with one sequence, no) interval, quoting the coverage measured nearest below."""
    reported = "is reported as NaN" if n_sequences == 1 else "covers less than it says"
    size = max((size for size in MEASURED_COVERAGE if size <= n_sequences), default=min(MEASURED_COVERAGE))
    measured = ", ".join(
        f"{coverage:.3f} ({name})" for name, coverage in zip(MEASURED_PROCESSES, MEASURED_COVERAGE[size], strict=True)
    )
    warnings.warn(
        f"The interval of the energy share rests on {n_sequences} probe sequence(s), fewer than "
        f"{MIN_BOOTSTRAP_SEQUENCES}: it {reported} (at {size} sequences a nominal 95 % interval covered {measured} "
        f"in the synthetic processes of benchmarks/interval_coverage.py). Give more probe texts.",
        DegenerateStatisticsWarning,
        stacklevel=5,
    )


def _resample_counts(n_sequences: int, n_resamples: int, generator: torch.Generator) -> list[torch.Tensor]:
    """How often each sequence is drawn in each resample, float64 (n_resamples, n_seq), in chunks of `_DRAW_CHUNK`."""
    chunks = []
    for start in range(0, n_resamples, _DRAW_CHUNK):
        size = min(_DRAW_CHUNK, n_resamples - start)
        draws = torch.randint(n_sequences, (size, n_sequences), generator=generator)
        counts = torch.zeros(size, n_sequences, dtype=torch.float64)
        chunks.append(counts.scatter_add_(1, draws, torch.ones_like(draws, dtype=torch.float64)))
    return chunks


def _share_and_error(
    counts: Float[torch.Tensor, "B n"], energy: Float[torch.Tensor, "n S"], total: Float[torch.Tensor, " n"]
) -> tuple[Float[torch.Tensor, "B S"], Float[torch.Tensor, "B S"]]:
    """Share and jackknife standard error of each resample (sequence i drawn counts[b, i] times): ((B, S), (B, S))."""
    energy_sum, total_sum = counts @ energy, counts @ total
    share = energy_sum / total_sum[:, None]
    left_out = (energy_sum[:, None, :] - energy) / (total_sum[:, None] - total)[:, :, None]  # (B, n, S)
    return share, _jackknife_error(counts, left_out)


def _jackknife_error(counts: Any, left_out: Any) -> Any:
    """The jackknife standard error (B, S) from the statistic with each sequence left out (B, n, S), torch or numpy."""
    weights = counts[:, :, None]
    where = torch.where if isinstance(counts, torch.Tensor) else np.where
    left_out = where(weights > 0, left_out, 0.0)  # a sequence not drawn leaves nothing out
    m = counts.sum(1)[:, None]
    mean = (weights * left_out).sum(1) / m
    spread = (weights * (left_out - mean[:, None]) ** 2).sum(1)
    return ((m - 1) / m * spread) ** 0.5


def _studentized(
    counts: Float[torch.Tensor, "B n"],
    energy: Float[torch.Tensor, "n S"],
    total: Float[torch.Tensor, " n"],
    share: Float[torch.Tensor, " S"],
    max_elements: int = 2**22,
) -> Float[torch.Tensor, "B S"]:
    """(R_b - share) / se_b of each resample, on the energies' device: 0 within `_TIE` (0 / 0 included), infinite for a zero se."""
    rows = max(1, max_elements // (energy.shape[0] * max(energy.shape[1], 1)))
    parts = []
    for start in range(0, counts.shape[0], rows):
        resampled, error = _share_and_error(copied_to(counts[start : start + rows], total.device), energy, total)
        distance = resampled - share
        parts.append(torch.where(distance.abs() <= _TIE, torch.zeros_like(distance), distance / error))
    return torch.cat(parts)


def _multipliers(
    studentized: Float[np.ndarray, "B S"], confidence: float
) -> tuple[Float[np.ndarray, " S"], Float[np.ndarray, " S"]]:
    """Standard errors the interval reaches below and above the share, (S,) each: the larger of the equal-tailed
    and the symmetric bootstrap-t's, from order statistics (interpolating would make NaN between -inf and +inf)."""
    tail = (1 - confidence) / 2
    low_tail, high_tail = _order_statistic(studentized, tail), _order_statistic(studentized, 1 - tail)
    symmetric = _order_statistic(np.abs(studentized), confidence)
    return np.fmax(high_tail, symmetric), np.fmax(-low_tail, symmetric)


def _order_statistic(values: Float[np.ndarray, "B S"], level: float) -> Float[np.ndarray, " S"]:
    """The smallest of each column's non-NaN values with a fraction `level` at or below it, (S,); NaN if none."""
    present = (~np.isnan(values)).sum(0)
    rank = np.clip(np.ceil(level * present - 1e-9).astype(int), 1, None) - 1
    ordered = np.sort(values, axis=0)  # NaN last
    picked = np.take_along_axis(ordered, np.minimum(rank, values.shape[0] - 1)[None], axis=0)[0]
    return np.where(present > 0, picked, np.nan)


def _clipped(
    share: Float[np.ndarray, " S"],
    error: Float[np.ndarray, " S"],
    below: Float[np.ndarray, " S"],
    above: Float[np.ndarray, " S"],
) -> tuple[np.ndarray, np.ndarray]:
    """[share - below se, share + above se] clipped to [0, 1]; a zero se with an infinite multiplier reaches the bound."""
    with np.errstate(invalid="ignore"):
        low, high = (np.where((error == 0) & np.isinf(side), np.inf, side * error) for side in (below, above))
        return np.clip(share - low, 0.0, 1.0), np.clip(share + high, 0.0, 1.0)


@dataclass(frozen=True)
class PairedChange:
    """The change D of each statistic from the reference probe, (S,) each (NaN where not defined)."""

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
    """Change of S ratios of sums sum(a) / sum(b) from a reference probe (0) to another (1) of the same sequences."""
    a0, a1, b0, b1 = (np.asarray(value, dtype=np.float64) for value in (*numerators, *denominators))
    _check_resampling(n_resamples, confidence)
    if a0.ndim != 2 or a0.shape[0] == 0 or any(value.shape != a0.shape for value in (a1, b0, b1)):
        raise InvalidInputError(
            f"The numerators and denominators at both probes must be (n_seq, S) arrays of the same n_seq > 0 paired sequences, got shapes {[value.shape for value in (a0, a1, b0, b1)]}."
        )
    n = a0.shape[0]
    ones = np.ones((1, n))
    change, error = (value[0] for value in _change_and_error(ones, a0, a1, b0, b1))
    nan = np.full(a0.shape[1], np.nan)
    if n < 2 or not (np.all(b0.sum(0) > 0) and np.all(b1.sum(0) > 0)):
        return PairedChange(change, nan, nan.copy(), nan.copy(), n)
    parts = []  # (D*_b - D) / se*_b of each resample: 0 within `_TIE` (0 / 0 included), infinite for a zero se
    for counts in _resample_counts(n, n_resamples, generator):
        resampled, resampled_error = _change_and_error(counts.numpy(), a0, a1, b0, b1)
        distance = resampled - change
        with np.errstate(invalid="ignore", divide="ignore"):
            parts.append(np.where(np.abs(distance) <= _TIE, 0.0, distance / resampled_error))
    studentized = np.concatenate(parts)
    below, above = _multipliers(studentized, confidence)
    low, high = change - _paired_reach(below, error), change + _paired_reach(above, error)
    return PairedChange(change, low, high, _p_value(studentized, change, error), n)


def _change_and_error(
    counts: Float[np.ndarray, "B n"], a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray
) -> tuple[Float[np.ndarray, "B S"], Float[np.ndarray, "B S"]]:
    """D of each resample (sequence i drawn counts[b, i] times) and its jackknife standard error, (B, S) each."""
    with np.errstate(invalid="ignore", divide="ignore"):
        sums = [counts @ value for value in (a0, a1, b0, b1)]  # (B, S) each
        change = sums[1] / sums[3] - sums[0] / sums[2]
        left_out = (sums[1][:, None] - a1) / (sums[3][:, None] - b1) - (sums[0][:, None] - a0) / (
            sums[2][:, None] - b0
        )  # (B, n, S)
    return change, _jackknife_error(counts, left_out)


def _paired_reach(multiplier: Float[np.ndarray, " S"], error: Float[np.ndarray, " S"]) -> Float[np.ndarray, " S"]:
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
